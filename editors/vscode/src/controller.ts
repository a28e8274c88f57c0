/**
 * The extension's behaviour: when to start the server, with which interpreter and settings, and the three
 * commands. The language client itself is made by an injected factory, so this file runs under node's test
 * runner against a stub `vscode` module (test/vscode-stub.ts) without VS Code.
 */
import * as vscode from 'vscode';
import { isHyperParallelDocument } from './documents';
import {
  InterpreterChoice,
  PythonExtensionApi,
  chooseInterpreter,
  serverCommandLine,
} from './interpreter';
import { SECTION, didChangeConfigurationParams, initializationOptions, readServerSettings } from './settings';

/** Commands this extension contributes (package.json `contributes.commands`). */
export const COMMANDS = {
  applyOptimalStrategy: 'hyperparallel.applyOptimalStrategy',
  restartServer: 'hyperparallel.restartServer',
  showSearchOutput: 'hyperparallel.showSearchOutput',
} as const;

/**
 * Commands the server executes (`workspace/executeCommand`). The language client also registers these ids
 * as VS Code commands when the server advertises them, which is why the palette commands above use their
 * own `hyperparallel.*` ids: two registrations of one id would fail.
 */
export const SERVER_COMMANDS = {
  applyOptimalStrategy: 'hpLsp.applyOptimalStrategy',
} as const;

export const PYTHON_EXTENSION_ID = 'ms-python.python';

/** What the controller needs from a running language client (`LanguageClient` satisfies it). */
export interface ClientHandle {
  start(): Promise<void>;
  stop(): Promise<void>;
  sendRequest(method: string, params: unknown): Promise<unknown>;
  sendNotification(method: string, params: unknown): Promise<void>;
  /** The server's last stderr line (after a failed start), if it wrote one. */
  lastStderrLine?(): Promise<string | undefined>;
}

export interface ClientSpec {
  command: string;
  args: string[];
  cwd: string | undefined;
  env: Record<string, string | undefined>;
  initializationOptions: unknown;
  outputChannel: vscode.LogOutputChannel;
}

export type ClientFactory = (spec: ClientSpec) => ClientHandle;

export class Controller implements vscode.Disposable {
  readonly output: vscode.LogOutputChannel;
  private client: ClientHandle | undefined;
  private starting: Promise<ClientHandle | undefined> | undefined;
  private interpreter: InterpreterChoice | undefined;
  private readonly disposables: vscode.Disposable[] = [];
  private pythonWatch: { dispose(): unknown } | undefined;

  constructor(
    private readonly factory: ClientFactory,
    private readonly platform: string = process.platform,
    private readonly home: string | undefined = process.env.HOME ?? process.env.USERPROFILE,
  ) {
    this.output = vscode.window.createOutputChannel('HyperParallel', { log: true });
    this.disposables.push(
      this.output,
      vscode.commands.registerCommand(COMMANDS.applyOptimalStrategy, () => this.applyOptimalStrategy()),
      vscode.commands.registerCommand(COMMANDS.restartServer, () => this.restart()),
      vscode.commands.registerCommand(COMMANDS.showSearchOutput, () => this.showSearchOutput()),
      vscode.workspace.onDidOpenTextDocument((doc) => this.considerDocument(doc)),
      vscode.workspace.onDidChangeConfiguration((e) => this.configurationChanged(e)),
    );
  }

  /** Start when a HyperParallel document is already open (activation by `onLanguage:yaml`). */
  async activate(): Promise<void> {
    for (const doc of vscode.workspace.textDocuments) {
      if (isHyperParallelDocument(doc)) {
        await this.ensureStarted();
        return;
      }
    }
  }

  get running(): boolean {
    return this.client !== undefined;
  }

  get interpreterChoice(): InterpreterChoice | undefined {
    return this.interpreter;
  }

  private considerDocument(doc: vscode.TextDocument): void {
    if (!this.client && !this.starting && isHyperParallelDocument(doc)) {
      void this.ensureStarted();
    }
  }

  /** The running client, starting it first if needed; undefined when it cannot start (already reported). */
  ensureStarted(): Promise<ClientHandle | undefined> {
    if (this.client) {
      return Promise.resolve(this.client);
    }
    this.starting ??= this.start().finally(() => {
      this.starting = undefined;
    });
    return this.starting;
  }

  private async pythonApi(): Promise<PythonExtensionApi | undefined> {
    const ext = vscode.extensions.getExtension<PythonExtensionApi>(PYTHON_EXTENSION_ID);
    if (!ext) {
      return undefined;
    }
    try {
      return ext.isActive ? ext.exports : await ext.activate();
    } catch (err) {
      this.output.warn(`Python extension did not activate: ${String(err)}`);
      return undefined;
    }
  }

  private workspaceFolder(): vscode.WorkspaceFolder | undefined {
    const active = vscode.window.activeTextEditor?.document.uri;
    return (active && vscode.workspace.getWorkspaceFolder(active)) || vscode.workspace.workspaceFolders?.[0];
  }

  private async start(): Promise<ClientHandle | undefined> {
    const config = vscode.workspace.getConfiguration(SECTION);
    const folder = this.workspaceFolder();
    const python = await this.pythonApi();
    this.interpreter = await chooseInterpreter({
      configured: config.get<string | null>('interpreter'),
      python,
      resource: folder?.uri,
      workspaceFolder: folder?.uri.fsPath,
      home: this.home,
      platform: this.platform,
    });
    this.watchPython(python);
    const { command, args } = serverCommandLine(this.interpreter);
    const settings = readServerSettings(config);
    for (const problem of settings.problems) {
      this.output.warn(problem);
    }
    this.output.info(
      `Starting: ${[command, ...args].join(' ')} (interpreter from ${this.interpreter.source}` +
        `${this.interpreter.note ? `; ${this.interpreter.note}` : ''})`,
    );
    const client = this.factory({
      command,
      args,
      cwd: folder?.uri.fsPath,
      // Unbuffered so that a crash's last words reach the output channel.
      env: { ...process.env, PYTHONUNBUFFERED: '1' },
      initializationOptions: initializationOptions(config),
      outputChannel: this.output,
    });
    try {
      await client.start();
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      const stderr = await client.lastStderrLine?.();
      this.output.error(`The server did not start: ${stderr ?? message}`);
      const failure = startFailure([command, ...args].join(' '), stderr, message);
      const actions = failure.interpreter ? ['Open Settings', 'Show Output'] : ['Show Output'];
      void vscode.window.showErrorMessage(failure.text, ...actions).then((choice) => {
        if (choice === 'Open Settings') {
          void vscode.commands.executeCommand('workbench.action.openSettings', `${SECTION}.interpreter`);
        } else if (choice === 'Show Output') {
          this.output.show(true);
        }
      });
      try {
        await client.stop();
      } catch {
        // Already dead: nothing to stop.
      }
      return undefined;
    }
    this.client = client;
    return client;
  }

  /** Follow the interpreter picked in the Python extension while we use it. */
  private watchPython(python: PythonExtensionApi | undefined): void {
    this.pythonWatch?.dispose();
    this.pythonWatch = undefined;
    if (!python || this.interpreter?.source !== 'python-extension') {
      return;
    }
    const onChange =
      python.environments?.onDidChangeActiveEnvironmentPath ?? python.settings?.onDidChangeExecutionDetails;
    this.pythonWatch = onChange?.(() => {
      this.output.info('The Python extension selected another interpreter: restarting.');
      void this.restart();
    });
  }

  async stop(): Promise<void> {
    const starting = this.starting;
    if (starting) {
      await starting;
    }
    const client = this.client;
    this.client = undefined;
    if (client) {
      try {
        await client.stop();
      } catch (err) {
        this.output.warn(`Stopping the server: ${String(err)}`);
      }
    }
  }

  async restart(): Promise<void> {
    await this.stop();
    this.output.info('Restarting the server.');
    await this.ensureStarted();
  }

  private configurationChanged(e: vscode.ConfigurationChangeEvent): void {
    if (!e.affectsConfiguration(SECTION)) {
      return;
    }
    if (e.affectsConfiguration(`${SECTION}.interpreter`)) {
      if (this.client) {
        void this.restart();
      } else if (this.starting) {
        // A start already chose the old interpreter: once it settles (started or reported), restart on the new one.
        void this.starting.then(() => this.restart());
      }
      return;
    }
    const client = this.client;
    if (!client) {
      return;
    }
    const config = vscode.workspace.getConfiguration(SECTION);
    for (const problem of readServerSettings(config).problems) {
      this.output.warn(problem);
    }
    void client.sendNotification('workspace/didChangeConfiguration', didChangeConfigurationParams(config));
  }

  /** "HyperParallel: Apply optimal strategy": the server computes the edit and applies it through the client. */
  async applyOptimalStrategy(): Promise<unknown> {
    const doc = vscode.window.activeTextEditor?.document;
    if (!doc || doc.uri.scheme !== 'file' || doc.languageId !== 'yaml') {
      void vscode.window.showWarningMessage('HyperParallel: open a train.yaml or a search config first.');
      return undefined;
    }
    const client = await this.ensureStarted();
    if (!client) {
      return undefined;
    }
    try {
      const result = await client.sendRequest('workspace/executeCommand', {
        command: SERVER_COMMANDS.applyOptimalStrategy,
        arguments: [doc.uri.toString()],
      });
      const message = describeApplyResult(result);
      if (message) {
        const applied = (result as { applied?: unknown }).applied !== false;
        void (applied ? vscode.window.showInformationMessage : vscode.window.showWarningMessage)(
          `HyperParallel: ${message}`,
        );
      }
      return result;
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      this.output.error(`Apply optimal strategy: ${message}`);
      void vscode.window.showErrorMessage(`HyperParallel: ${message}`);
      return undefined;
    }
  }

  /** "HyperParallel: Show search output": the log where the server reports each search it runs. */
  showSearchOutput(): void {
    this.output.show(true);
  }

  dispose(): void {
    this.pythonWatch?.dispose();
    for (const d of this.disposables) {
      d.dispose();
    }
  }
}

/**
 * The one message for a server that did not start: its last stderr line (else the client's error), and the
 * advice to set `hpLsp.interpreter` only when the interpreter is the problem (missing, not executable, or a
 * Python without hp-lsp); a server that crashed for another reason gets its own words, not that advice.
 */
export function startFailure(
  commandLine: string,
  stderr: string | undefined,
  error: string,
): { text: string; interpreter: boolean } {
  const said = (stderr ?? error).replace(/\.$/, '');
  const interpreter = /No module named '?hp_lsp|ENOENT|EACCES|not found|No such file/i.test(`${said}\n${error}`);
  const advice = interpreter ? ' Set "hpLsp.interpreter" to a Python where hp-lsp is installed.' : '';
  return { text: `HyperParallel: the server did not start ("${commandLine}"): ${said}.${advice}`, interpreter };
}

/**
 * A one-line message for what `hpLsp.applyOptimalStrategy` returned (`{"applied": bool, "strategy"?: str,
 * "reason"?: str}`), or undefined when there is nothing to say.
 */
export function describeApplyResult(result: unknown): string | undefined {
  if (!result || typeof result !== 'object') {
    return undefined;
  }
  const r = result as { applied?: unknown; strategy?: unknown; reason?: unknown; message?: unknown };
  const text = (v: unknown) => (typeof v === 'string' && v ? v : undefined);
  if (r.applied === false) {
    return `not applied: ${text(r.reason) ?? 'the server gave no reason'}`;
  }
  if (r.applied === true) {
    return text(r.strategy) ? `applied ${text(r.strategy)}` : undefined;
  }
  return text(r.message);
}
