import { strict as assert } from 'node:assert';
import { test } from 'node:test';
import {
  ConfigurationLike,
  configurationItem,
  didChangeConfigurationParams,
  initializationOptions,
  readServerSettings,
} from '../src/settings';

/** A configuration section backed by a flat map of dotted names, like VS Code's `get('cluster.numNodes')`. */
function section(values: Record<string, unknown>): ConfigurationLike {
  return { get: <T>(key: string) => values[key] as T | undefined };
}

test('every server setting maps into the nested hpLsp section', () => {
  const cfg = section({
    'cluster.numNodes': 8,
    'cluster.cardsPerNode': 8,
    'cluster.deviceType': ' H100 ',
    'cluster.deviceMemoryGb': 80,
    memoryLimitGb: 76.5,
    searchOnSave: false,
    maxFileSizeKb: 2048,
    interpreter: '/opt/venv/bin/python',
    'trace.server': 'verbose',
  });
  assert.deepEqual(initializationOptions(cfg), {
    hpLsp: {
      cluster: { numNodes: 8, cardsPerNode: 8, deviceType: 'H100', deviceMemoryGb: 80 },
      memoryLimitGb: 76.5,
      searchOnSave: false,
      maxFileSizeKb: 2048,
      framework: null,
      ratiosFile: null,
    },
  });
});

const UNSET = {
  cluster: { numNodes: null, cardsPerNode: null, deviceType: null, deviceMemoryGb: null },
  memoryLimitGb: null,
  searchOnSave: null,
  maxFileSizeKb: null,
  framework: null,
  ratiosFile: null,
};

test('client-only keys never reach the server; unset keys are sent as null', () => {
  const opts = initializationOptions(section({ interpreter: 'python3', 'trace.server': 'messages' }));
  assert.deepEqual(opts, { hpLsp: UNSET });
});

test('null defaults and cleared text fields are null, so the server uses its own defaults', () => {
  const cfg = section({
    'cluster.numNodes': null,
    'cluster.deviceType': '   ',
    memoryLimitGb: null,
    searchOnSave: true,
  });
  const read = readServerSettings(cfg);
  assert.deepEqual(read.settings, { ...UNSET, searchOnSave: true });
  assert.deepEqual(read.problems, []);
});

test('invalid values are dropped and reported by name', () => {
  const cfg = section({
    'cluster.numNodes': 0,
    'cluster.cardsPerNode': 2.5,
    'cluster.deviceMemoryGb': -1,
    memoryLimitGb: '80',
    searchOnSave: 'yes',
    maxFileSizeKb: 512,
  });
  const read = readServerSettings(cfg);
  assert.deepEqual(read.settings, { ...UNSET, maxFileSizeKb: 512 });
  assert.deepEqual(
    read.problems.map((p) => p.split(':')[0]),
    ['hpLsp.cluster.numNodes', 'hpLsp.cluster.cardsPerNode', 'hpLsp.cluster.deviceMemoryGb', 'hpLsp.memoryLimitGb', 'hpLsp.searchOnSave'],
  );
  assert.match(read.problems[0], /ignoring 0 \(expected a positive integer\)/);
});

test('didChangeConfiguration carries the same section under settings', () => {
  const cfg = section({ 'cluster.deviceType': 'A3', memoryLimitGb: 60 });
  assert.deepEqual(didChangeConfigurationParams(cfg), {
    settings: { hpLsp: { ...UNSET, cluster: { ...UNSET.cluster, deviceType: 'A3' }, memoryLimitGb: 60 } },
  });
});

test('workspace/configuration answers hpLsp, its sub-keys, and defers other sections', () => {
  const cfg = section({ 'cluster.numNodes': 4, 'cluster.cardsPerNode': 16, interpreter: 'x' });
  const cluster = { ...UNSET.cluster, numNodes: 4, cardsPerNode: 16 };
  assert.deepEqual(configurationItem('hpLsp', cfg), { ...UNSET, cluster });
  assert.deepEqual(configurationItem('hpLsp.cluster', cfg), cluster);
  assert.equal(configurationItem('hpLsp.cluster.numNodes', cfg), 4);
  assert.equal(configurationItem('hpLsp.memoryLimitGb', cfg), null);
  assert.equal(configurationItem('python', cfg), undefined);
  assert.equal(configurationItem(undefined, cfg), undefined);
});
