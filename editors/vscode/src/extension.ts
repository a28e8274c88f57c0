/**
 * Entry point: wires the real `vscode-languageclient` into the Controller.
 *
 * The server runs as `<python> -m hp_lsp` over stdio. Settings go in through initializationOptions, a
 * `workspace/didChangeConfiguration` on every change (sent by the Controller) and the middleware below for
 * `workspace/configuration`, all three carrying the same cleaned `hpLsp` section.
 *
 * A server that exits before it finished initializing is not restarted and the client shows nothing about
 * it: the Controller shows one message with the server's last stderr line. Once it ran, a crash gets the
 * client's usual restarts (4 in 3 minutes) and messages.
 */
import { spawn } from 'node:child_process';
import * as vscode from 'vscode';
import {
  CloseAction,
  ConfigurationParams,
  ErrorHandler,
  LanguageClient,
  LanguageClientOptions,
  RevealOutputChannelOn,
  ServerOptions,
  State,
} from 'vscode-languageclient/node';
import { ClientHandle, ClientSpec, Controller } from './controller';
import { DOCUMENT_SELECTOR } from './documents';
import { SECTION, configurationItem } from './settings';
import { PlanViews, SHOW_PLAN } from './planView';
import { StderrTail } from './stderr';
import { StartGuard } from './startGuard';

/** The language client, silent until the server first runs (the Controller reports a failed start once). */
class HpLanguageClient extends LanguageClient {
  quiet = true;

  override error(message: string, data?: unknown, showNotification: boolean | 'force' = true): void {
    super.error(message, data, this.quiet ? false : showNotification);
  }
}

let controller: Controller | undefined;
let planViews: PlanViews | undefined;

function createClient(spec: ClientSpec): ClientHandle {
  let stderr = new StderrTail();
  let guard = new StartGuard();
  // Spawned here, not by the client: exactly the command line logged (with TransportKind.stdio the client
  // would append `--stdio`), and its stderr's last line kept for the failure message. The client still
  // copies stderr into the output channel.
  const serverOptions: ServerOptions = () =>
    new Promise((resolve, reject) => {
      const tail = (stderr = new StderrTail());
      const watch = guard;
      const child = spawn(spec.command, spec.args, { cwd: spec.cwd, env: spec.env });
      child.once('exit', (code, signal) => watch.exited(code, signal));
      child.stderr.setEncoding('utf8');
      child.stderr.on('data', (chunk: string) => tail.push(chunk));
      child.stderr.on('close', () => tail.close());
      child.once('spawn', () => resolve(child));
      child.once('error', reject); // ENOENT / EACCES: no process at all
    });
  let client: HpLanguageClient | undefined;
  let running = false;
  let fallback: ErrorHandler | undefined;
  const usual = () => (fallback ??= client!.createDefaultErrorHandler());
  const errorHandler: ErrorHandler = {
    error: (error, message, count) => usual().error(error, message, count),
    closed: () => {
      if (!running) {
        // Exited while starting: restarting would fail the same way five times. The Controller reports it.
        return { action: CloseAction.DoNotRestart, handled: true };
      }
      running = false;
      return usual().closed();
    },
  };
  const clientOptions: LanguageClientOptions = {
    documentSelector: DOCUMENT_SELECTOR,
    outputChannel: spec.outputChannel,
    revealOutputChannelOn: RevealOutputChannelOn.Never,
    errorHandler,
    // false: no retry and no message of the client's own (it would show one per attempt).
    initializationFailedHandler: () => false,
    initializationOptions: spec.initializationOptions,
    middleware: {
      // The "▸ Plan view" code lens runs hpLsp.showPlan on the server; its answer opens the plan view.
      executeCommand: async (command, args, next) => {
        const result = await next(command, args);
        if (command === SHOW_PLAN) {
          planViews?.show(result);
        }
        return result;
      },
      workspace: {
        configuration: async (params: ConfigurationParams, token, next) => {
          const answers = await next(params, token);
          if (!Array.isArray(answers)) {
            return answers;
          }
          return params.items.map((item, i) => {
            const scope = item.scopeUri ? vscode.Uri.parse(item.scopeUri) : undefined;
            const ours = configurationItem(item.section, vscode.workspace.getConfiguration(SECTION, scope));
            return ours === undefined ? answers[i] : ours;
          });
        },
      },
    },
  };
  // The id `hpLsp` makes the client read `hpLsp.trace.server` for its protocol trace.
  const made = (client = new HpLanguageClient('hpLsp', 'HyperParallel', serverOptions, clientOptions));
  made.onDidChangeState((e) => {
    if (e.newState === State.Running) {
      running = true;
      made.quiet = false;
    }
  });
  planViews?.setRequester((command, args) => made.sendRequest('workspace/executeCommand', { command, arguments: args }));
  return {
    start: () => (guard = new StartGuard()).run(() => made.start(), () => made.isRunning()),
    stop: () => made.stop(2000),
    sendRequest: (method, params) => made.sendRequest(method, params),
    sendNotification: (method, params) => made.sendNotification(method, params),
    lastStderrLine: () => stderr.lastLine(),
  };
}

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  planViews = new PlanViews();
  context.subscriptions.push(planViews);
  controller = new Controller(createClient);
  context.subscriptions.push(controller);
  await controller.activate();
}

export async function deactivate(): Promise<void> {
  const c = controller;
  controller = undefined;
  await c?.stop();
}
