/**
 * The `hpLsp` settings section (docs/formats.md §4) as the server wants it.
 *
 * VS Code hands back every contributed key, including client-only ones (`interpreter`, `trace.server`).
 * The server gets exactly its own keys, type-checked here so that a bad value is reported in the
 * extension's log, and with an explicit `null` for every key the user has not set (or set to something
 * unusable): the server layers initializationOptions, workspace/configuration and didChangeConfiguration
 * key by key, so a key left out of a later message would keep an earlier value, while `null` means "unset:
 * use the server's default".
 */

/** The part of `vscode.WorkspaceConfiguration` this module reads (a stub in tests). */
export interface ConfigurationLike {
  get<T>(section: string): T | undefined;
}

export const SECTION = 'hpLsp';

export interface ClusterSettings {
  numNodes: number | null;
  cardsPerNode: number | null;
  deviceType: string | null;
  deviceMemoryGb: number | null;
}

/** What the server reads, nested the way VS Code nests dotted setting names; `null` = unset. */
export interface ServerSettings {
  cluster: ClusterSettings;
  memoryLimitGb: number | null;
  framework: string | null;
  searchOnSave: boolean | null;
  maxFileSizeKb: number | null;
  ratiosFile: string | null;
}

export interface ReadSettings {
  settings: ServerSettings;
  /** One line per value that was set but could not be used (shown in the output channel). */
  problems: string[];
}

type Kind = 'posint' | 'posnumber' | 'string' | 'boolean';

/** Setting name (relative to `hpLsp`) -> expected kind; client-only keys are deliberately absent. */
export const SERVER_KEYS: ReadonlyArray<readonly [string, Kind]> = [
  ['cluster.numNodes', 'posint'],
  ['cluster.cardsPerNode', 'posint'],
  ['cluster.deviceType', 'string'],
  ['cluster.deviceMemoryGb', 'posnumber'],
  ['memoryLimitGb', 'posnumber'],
  ['framework', 'string'],
  ['searchOnSave', 'boolean'],
  ['maxFileSizeKb', 'posint'],
  ['ratiosFile', 'string'],
];

function coerce(kind: Kind, value: unknown): { ok: boolean; value?: number | string | boolean } {
  switch (kind) {
    case 'posint':
      return typeof value === 'number' && Number.isInteger(value) && value > 0 ? { ok: true, value } : { ok: false };
    case 'posnumber':
      return typeof value === 'number' && Number.isFinite(value) && value > 0 ? { ok: true, value } : { ok: false };
    case 'string': {
      if (typeof value !== 'string') {
        return { ok: false };
      }
      const trimmed = value.trim();
      // An empty string is how the settings UI clears a text field: treat it as unset, not as an error.
      return trimmed ? { ok: true, value: trimmed } : { ok: true };
    }
    case 'boolean':
      return typeof value === 'boolean' ? { ok: true, value } : { ok: false };
  }
}

/** Read the server's settings from the `hpLsp` configuration section. */
export function readServerSettings(config: ConfigurationLike): ReadSettings {
  const settings: ServerSettings = {
    cluster: { numNodes: null, cardsPerNode: null, deviceType: null, deviceMemoryGb: null },
    memoryLimitGb: null,
    framework: null,
    searchOnSave: null,
    maxFileSizeKb: null,
    ratiosFile: null,
  };
  const problems: string[] = [];
  for (const [key, kind] of SERVER_KEYS) {
    const raw = config.get<unknown>(key);
    if (raw === undefined || raw === null) {
      continue;
    }
    const { ok, value } = coerce(kind, raw);
    if (!ok) {
      problems.push(`${SECTION}.${key}: ignoring ${JSON.stringify(raw)} (expected ${describe(kind)})`);
      continue;
    }
    if (value === undefined) {
      continue;
    }
    const [head, tail] = key.split('.', 2);
    if (tail === undefined) {
      (settings as unknown as Record<string, unknown>)[head] = value;
    } else {
      (settings as unknown as Record<string, Record<string, unknown>>)[head][tail] = value;
    }
  }
  return { settings, problems };
}

function describe(kind: Kind): string {
  return {
    posint: 'a positive integer',
    posnumber: 'a positive number',
    string: 'a string',
    boolean: 'true or false',
  }[kind];
}

/** `initializationOptions` for the server: `{"hpLsp": {...}}` (docs/formats.md §4). */
export function initializationOptions(config: ConfigurationLike): { hpLsp: ServerSettings } {
  return { hpLsp: readServerSettings(config).settings };
}

/** Params of `workspace/didChangeConfiguration`: `{"settings": {"hpLsp": {...}}}`. */
export function didChangeConfigurationParams(config: ConfigurationLike): { settings: { hpLsp: ServerSettings } } {
  return { settings: initializationOptions(config) };
}

/**
 * Answer a `workspace/configuration` request item: the cleaned section for `hpLsp` (or a sub-key of it),
 * `undefined` for anything else so the default handler answers it.
 */
export function configurationItem(section: string | undefined, config: ConfigurationLike): unknown {
  if (section === SECTION) {
    return readServerSettings(config).settings;
  }
  if (section?.startsWith(`${SECTION}.`)) {
    let node: unknown = readServerSettings(config).settings;
    for (const part of section.slice(SECTION.length + 1).split('.')) {
      node = node && typeof node === 'object' ? (node as Record<string, unknown>)[part] : undefined;
    }
    return node ?? null;
  }
  return undefined;
}
