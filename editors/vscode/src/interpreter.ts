/**
 * Which Python runs `python -m hp_lsp`.
 *
 * Order: the `hpLsp.interpreter` setting; else the interpreter selected in the Python extension
 * (ms-python.python), because that is where users already pick the venv holding hp-lsp; else `python3`
 * (`python` on Windows) from PATH. Kept free of the `vscode` module so the choice is unit-tested.
 */

/** The slice of the Python extension's public API used here (both its current and its legacy shape). */
export interface PythonExtensionApi {
  environments?: {
    getActiveEnvironmentPath(resource?: unknown): { id: string; path: string } | undefined;
    resolveEnvironment(env: { id: string; path: string } | string): Promise<
      { executable: { uri?: { fsPath: string } | undefined } } | undefined
    >;
    onDidChangeActiveEnvironmentPath?: (listener: () => unknown) => { dispose(): unknown };
  };
  settings?: {
    getExecutionDetails(resource?: unknown): { execPath: string[] | undefined };
    onDidChangeExecutionDetails?: (listener: () => unknown) => { dispose(): unknown };
  };
}

export type InterpreterSource = 'setting' | 'python-extension' | 'default';

export interface InterpreterChoice {
  /** Executable to spawn. */
  command: string;
  /** Arguments that belong to the interpreter itself (e.g. `conda run -n env python` split up). */
  args: string[];
  source: InterpreterSource;
  /** Why the Python extension was not used, when it was present but gave nothing (for the log). */
  note?: string;
}

export interface ChooseOptions {
  /** The `hpLsp.interpreter` setting (empty or null when unset). */
  configured?: string | null;
  /** The Python extension's API, when that extension is installed. */
  python?: PythonExtensionApi;
  /** The resource (document or folder URI) the interpreter is asked for. */
  resource?: unknown;
  /** For `${workspaceFolder}` in the setting. */
  workspaceFolder?: string;
  /** For a leading `~` and `${userHome}` in the setting. */
  home?: string;
  /** `process.platform`; decides the default executable name. */
  platform?: string;
}

/** Expand `${workspaceFolder}`, `${userHome}`, `${env:NAME}` and a leading `~` the way VS Code users expect. */
export function expandVariables(
  value: string,
  vars: { workspaceFolder?: string; home?: string; env?: Record<string, string | undefined> },
): string {
  let out = value.replace(/\$\{(workspaceFolder|userHome|env:([A-Za-z_][A-Za-z0-9_]*))\}/g, (whole, name, envName) => {
    if (name === 'workspaceFolder') {
      return vars.workspaceFolder ?? whole;
    }
    if (name === 'userHome') {
      return vars.home ?? whole;
    }
    return vars.env?.[envName] ?? '';
  });
  if (vars.home && (out === '~' || out.startsWith('~/') || out.startsWith('~\\'))) {
    out = vars.home + out.slice(1);
  }
  return out;
}

/**
 * Split a configured interpreter into executable and arguments. A value that names an existing path with
 * spaces must be quoted by the user: `"/opt/my python/bin/python"`; an unquoted value without spaces is taken
 * as one path.
 */
export function splitCommandLine(value: string): string[] {
  const parts: string[] = [];
  const re = /"([^"]*)"|'([^']*)'|(\S+)/g;
  let m: RegExpExecArray | null;
  while ((m = re.exec(value)) !== null) {
    parts.push(m[1] ?? m[2] ?? m[3]);
  }
  return parts;
}

export function defaultInterpreter(platform: string | undefined): string {
  return platform === 'win32' ? 'python' : 'python3';
}

async function fromPythonExtension(api: PythonExtensionApi, resource: unknown): Promise<string[] | string> {
  try {
    if (api.environments) {
      const active = api.environments.getActiveEnvironmentPath(resource);
      if (active) {
        const resolved = await api.environments.resolveEnvironment(active);
        const exe = resolved?.executable.uri?.fsPath;
        if (exe) {
          return [exe];
        }
        // An unresolved path is still the interpreter the user picked; trust it.
        if (active.path) {
          return [active.path];
        }
      }
    }
    const legacy = api.settings?.getExecutionDetails(resource).execPath;
    if (legacy && legacy.length > 0 && legacy[0]) {
      return [...legacy];
    }
    return 'the Python extension has no interpreter selected';
  } catch (err) {
    return `the Python extension failed: ${err instanceof Error ? err.message : String(err)}`;
  }
}

export async function chooseInterpreter(opts: ChooseOptions): Promise<InterpreterChoice> {
  const configured = opts.configured?.trim();
  if (configured) {
    const expanded = expandVariables(configured, {
      workspaceFolder: opts.workspaceFolder,
      home: opts.home,
      env: typeof process !== 'undefined' ? process.env : undefined,
    });
    const [command, ...args] = splitCommandLine(expanded);
    if (command) {
      return { command, args, source: 'setting' };
    }
  }
  let note: string | undefined;
  if (opts.python) {
    const found = await fromPythonExtension(opts.python, opts.resource);
    if (Array.isArray(found)) {
      const [command, ...args] = found;
      return { command, args, source: 'python-extension' };
    }
    note = found;
  }
  return { command: defaultInterpreter(opts.platform), args: [], source: 'default', note };
}

/** The server's command line for a chosen interpreter: `<python> [args] -m hp_lsp`. */
export function serverCommandLine(choice: InterpreterChoice): { command: string; args: string[] } {
  return { command: choice.command, args: [...choice.args, '-m', 'hp_lsp'] };
}
