import { strict as assert } from 'node:assert';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { isHyperParallelDocument, looksLikeHyperParallel, matchesName } from '../src/documents';

const doc = (fsPath: string, text: string, languageId = 'yaml', scheme = 'file') => ({
  languageId,
  uri: { scheme, fsPath },
  getText: () => text,
});

test('file names: train*.yaml and *search*.yaml', () => {
  for (const name of ['/a/train.yaml', '/a/train_llama.yml', 'C:\\x\\train-70b.yaml', '/a/search.yaml', '/a/llama_search_1k.yaml', '/a/SEARCH.YAML']) {
    assert.ok(matchesName(name), name);
  }
  for (const name of ['/a/retrain.yaml', '/train/config.yaml', '/a/train.json', '/a/docker-compose.yaml']) {
    assert.ok(!matchesName(name), name);
  }
});

test('content sniff: trainer, legacy and search-config sections', () => {
  assert.ok(looksLikeHyperParallel('# comment\naccelerator:\n  tp_size: 4\n'));
  assert.ok(looksLikeHyperParallel('model:\n  pretrained_model_name_or_path: meta-llama/Llama-3.1-8B\n'));
  assert.ok(looksLikeHyperParallel('model:\n  name: x\ntrain:\n  accelerator:\n    tp_degree: 2\n'));
  assert.ok(looksLikeHyperParallel('cluster:\n  num_nodes: 8\n  cards_per_node: 8\n'));
  assert.ok(looksLikeHyperParallel('train_yaml: ./train.yaml\n'));
  assert.ok(looksLikeHyperParallel('parallelism:\r\n  tp: [1, 2]\r\n'));
});

test('content sniff: other YAML is not a config', () => {
  const k8s = 'apiVersion: v1\nkind: Pod\nmetadata:\n  name: x\nspec:\n  containers:\n  - name: c\n    image: busybox\n';
  const workflow = 'name: CI\non: [push]\njobs:\n  build:\n    runs-on: ubuntu-latest\n    steps:\n      - uses: actions/checkout@v4\n';
  const compose = 'services:\n  web:\n    image: nginx\n    deploy:\n      resources: {}\n';
  for (const text of [k8s, workflow, compose, '', 'a: 1']) {
    assert.ok(!looksLikeHyperParallel(text), text);
  }
  // A nested key alone is not enough outside the sections a config is made of.
  assert.ok(!looksLikeHyperParallel('spec:\n  device_type: gpu\n'));
});

test('content sniff reads only the first lines', () => {
  const padded = 'a: 1\n'.repeat(100) + 'accelerator:\n  tp_size: 2\n';
  assert.ok(!looksLikeHyperParallel(padded));
  assert.ok(looksLikeHyperParallel(padded, 200));
});

test('only YAML files on disk start the server', () => {
  assert.ok(isHyperParallelDocument(doc('/w/train.yaml', '')));
  assert.ok(isHyperParallelDocument(doc('/w/config.yaml', 'fsdp_config:\n  dp_shard_size: 8\n')));
  assert.ok(!isHyperParallelDocument(doc('/w/config.yaml', 'a: 1\n')));
  assert.ok(!isHyperParallelDocument(doc('/w/train.yaml', '', 'yaml', 'untitled')));
  assert.ok(!isHyperParallelDocument(doc('/w/train.yaml', '', 'plaintext')));
});

test("the repository's examples are all recognised by content alone", () => {
  const root = join(__dirname, '..', '..', '..', '..', 'examples');
  if (!existsSync(root)) {
    return;
  }
  const files: string[] = [];
  const walk = (dir: string) => {
    for (const name of readdirSync(dir)) {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) {
        walk(path);
      } else if (/\.ya?ml$/.test(name)) {
        files.push(path);
      }
    }
  };
  walk(root);
  for (const path of files) {
    assert.ok(looksLikeHyperParallel(readFileSync(path, 'utf8')), path);
  }
});
