/**
 * Which YAML documents are HyperParallel configs, decided on the client before the server is started.
 *
 * The extension activates on any YAML (that is cheap) but only spawns Python once a document looks like a
 * train.yaml, a search config or a RUNS file: by name (`train*.yaml`, `*search*.yaml`) or by its first lines showing
 * HyperParallel's sections (docs/formats.md §1, §2 and §6). Once running, the server receives every YAML file and
 * confirms by content: it leaves other YAML alone, so a misjudged sniff here costs nothing but a process.
 */

/** Glob patterns of the file names that are configs by convention (documented in package.json). */
export const NAME_PATTERNS = ['**/train*.yaml', '**/train*.yml', '**/*search*.yaml', '**/*search*.yml'];

const NAME_RE = /(^train[^/\\]*|search[^/\\]*)\.ya?ml$/i;

/** How many leading lines the content sniff reads. */
export const SNIFF_LINES = 60;

// Top-level sections that only HyperParallel's trainer (§1) or search config (§2) use.
const STRONG_SECTIONS = new Set([
  'training',
  'accelerator',
  'fsdp_config',
  'activation_checkpoint',
  'parallelism',
  'constraint',
  'pp_config',
  'train_yaml',
]);
// Keys below a section that, nested, mark a config even when the section name alone is too common.
const STRONG_NESTED = /^\s+(pretrained_model_name_or_path|tp_size|pp_size|dp_shard_size|cards_per_node|device_type|tp_degree|pipeline_parallel_degree|num_hidden_layers)\s*:/;
// A RUNS file (docs/formats.md §6): a `runs:` list whose items name a config or what was measured.
const RUNS_ITEM = /^\s*-?\s*(config|step_time_s|tokens_per_s_per_device|peak_memory_gib|log|trace|ascend_profile)\s*:/;

export function basename(path: string): string {
  const cut = Math.max(path.lastIndexOf('/'), path.lastIndexOf('\\'));
  return cut >= 0 ? path.slice(cut + 1) : path;
}

/** True when the file name follows the `train*.yaml` / `*search*.yaml` convention. */
export function matchesName(path: string): boolean {
  return NAME_RE.test(basename(path));
}

/** True when the first lines of a YAML text show a HyperParallel section. */
export function looksLikeHyperParallel(text: string, maxLines = SNIFF_LINES): boolean {
  // Slice first: a multi-megabyte YAML must not be split whole just to read its head.
  const lines = text.slice(0, 64 * 1024).split(/\r?\n/, maxLines);
  let topLevel: string | undefined;
  for (const line of lines) {
    const top = /^([A-Za-z_][\w-]*)\s*:/.exec(line);
    if (top) {
      topLevel = top[1];
      if (STRONG_SECTIONS.has(topLevel)) {
        return true;
      }
      continue;
    }
    if (topLevel === 'runs' && RUNS_ITEM.test(line)) {
      return true;
    }
    // Nested keys count under the sections a config is made of (`model`, `cluster`, legacy `train`).
    if (topLevel && ['model', 'cluster', 'train'].includes(topLevel) && STRONG_NESTED.test(line)) {
      return true;
    }
  }
  return false;
}

/** The parts of a `vscode.TextDocument` the decision needs. */
export interface DocumentLike {
  languageId: string;
  uri: { scheme: string; fsPath: string };
  lineCount?: number;
  getText(range?: unknown): string;
}

/** Whether this document should start the server (and is one the server will analyse). */
export function isHyperParallelDocument(doc: DocumentLike): boolean {
  if (doc.uri.scheme !== 'file' || doc.languageId !== 'yaml') {
    return false;
  }
  if (matchesName(doc.uri.fsPath)) {
    return true;
  }
  return looksLikeHyperParallel(doc.getText());
}

/**
 * The client's document selector once the server runs: every YAML file on disk. The server confirms each
 * one by content and publishes nothing for other YAML.
 */
export const DOCUMENT_SELECTOR = [{ scheme: 'file', language: 'yaml' }];
