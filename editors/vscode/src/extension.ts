/**
 * Entry point: wires the real `vscode-languageclient` into the Controller.
 *
 * The server runs as `<python> -m hp_lsp` over stdio. Settings go in through initializationOptions, a
 * `workspace/didChangeConfiguration` on every change (sent by the Controller) and the middleware below for
 * `workspace/configuration`, all three carrying the same cleaned `hpLsp` section.
 */
import * as vscode from 'vscode';
import {
  ConfigurationParams,
  LanguageClient,
  LanguageClientOptions,
  ServerOptions,
} from 'vscode-languageclient/node';
import { ClientHandle, ClientSpec, Controller } from './controller';
import { DOCUMENT_SELECTOR } from './documents';
import { SECTION, configurationItem } from './settings';

let controller: Controller | undefined;

function createClient(spec: ClientSpec): ClientHandle {
  const serverOptions: ServerOptions = {
    command: spec.command,
    args: spec.args,
    // No `transport`: with TransportKind.stdio the client appends `--stdio` to the command line. Without it
    // the client still speaks over the process's stdin/stdout and runs exactly the command line shown.
    options: { cwd: spec.cwd, env: spec.env },
  };
  const clientOptions: LanguageClientOptions = {
    documentSelector: DOCUMENT_SELECTOR,
    outputChannel: spec.outputChannel,
    initializationOptions: spec.initializationOptions,
    middleware: {
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
  const client = new LanguageClient('hpLsp', 'HyperParallel', serverOptions, clientOptions);
  return {
    start: () => client.start(),
    stop: () => client.stop(2000),
    sendRequest: (method, params) => client.sendRequest(method, params),
    sendNotification: (method, params) => client.sendNotification(method, params),
  };
}

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  controller = new Controller(createClient);
  context.subscriptions.push(controller);
  await controller.activate();
}

export async function deactivate(): Promise<void> {
  const c = controller;
  controller = undefined;
  await c?.stop();
}
