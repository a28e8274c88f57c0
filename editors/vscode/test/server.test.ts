/**
 * The extension's own command line and settings against the real server, over stdio, without VS Code:
 * `<interpreter> -m hp_lsp` as serverCommandLine builds it, initializationOptions and didChangeConfiguration
 * as settings.ts builds them, and the server command the palette's "Apply optimal strategy" sends.
 *
 * Needs the repository's venv (`.venv/bin/python` with hp_lsp installed). Without it the test is skipped,
 * except under CI=true where it must run.
 */
import { strict as assert } from 'node:assert';
import { ChildProcess, spawn } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { pathToFileURL } from 'node:url';
import {
  MessageConnection,
  StreamMessageReader,
  StreamMessageWriter,
  createMessageConnection,
} from 'vscode-jsonrpc/node';
import { SERVER_COMMANDS } from '../src/controller';
import { chooseInterpreter, serverCommandLine } from '../src/interpreter';
import { ConfigurationLike, didChangeConfigurationParams, initializationOptions } from '../src/settings';

const repo = join(__dirname, '..', '..', '..', '..');
const python = join(repo, '.venv', process.platform === 'win32' ? 'Scripts/python.exe' : 'bin/python');
const example = join(repo, 'examples', 'llama3-70b', 'train.yaml');
const available = existsSync(python) && existsSync(example);
const skip = available || process.env.CI === 'true' ? false : 'no .venv or example (run the Quick start first)';

interface Published {
  uri: string;
  diagnostics: { code?: string | number; severity?: number; message: string }[];
}

interface TextEditLike {
  range: { start: { line: number; character: number }; end: { line: number; character: number } };
  newText: string;
}
interface DocumentChange {
  textDocument: { uri: string; version: number | null };
  edits: TextEditLike[];
}

/** Apply LSP edits to a text (UTF-16 columns = JS string indices), last edit first. */
function applyEdits(text: string, edits: TextEditLike[]): string {
  const starts = [0];
  for (let i = 0; i < text.length; i++) {
    if (text[i] === '\n') {
      starts.push(i + 1);
    }
  }
  const offset = (p: { line: number; character: number }) => starts[p.line] + p.character;
  const sorted = [...edits].sort((a, b) => offset(b.range.start) - offset(a.range.start));
  let out = text;
  for (const e of sorted) {
    out = out.slice(0, offset(e.range.start)) + e.newText + out.slice(offset(e.range.end));
  }
  return out;
}

const section = (values: Record<string, unknown>): ConfigurationLike => ({ get: <T>(k: string) => values[k] as T });

let server: ChildProcess | undefined;
let connection: MessageConnection | undefined;
after(() => {
  connection?.dispose();
  // Close the pipes too: a child that never started would otherwise keep the test process alive.
  server?.stdin?.destroy();
  server?.stdout?.destroy();
  server?.stderr?.destroy();
  server?.kill();
});

test('the server started as the extension starts it honours its settings and its apply command', { skip, timeout: 90_000 }, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'hp-lsp-vscode-'));
  const file = join(dir, 'train.yaml'); // alone: no search.yaml beside it, so the cluster comes from settings
  copyFileSync(example, file);
  const uri = pathToFileURL(file).href;
  const text = readFileSync(file, 'utf8');

  const choice = await chooseInterpreter({ configured: python });
  const { command, args } = serverCommandLine(choice);
  assert.deepEqual(args, ['-m', 'hp_lsp']);
  const proc = spawn(command, args, { cwd: repo, env: { ...process.env, PYTHONUNBUFFERED: '1' } });
  server = proc;
  let stderr = '';
  proc.stderr.on('data', (chunk) => (stderr += String(chunk)));
  // A server that cannot start or dies early fails the test at once instead of leaving requests pending.
  const died = new Promise<never>((_resolve, reject) => {
    proc.on('error', (err) => reject(new Error(`cannot start ${command}: ${err.message}`)));
    proc.on('exit', (code) => reject(new Error(`the server exited (${code}):\n${stderr}`)));
  });
  died.catch(() => undefined);
  const conn = createMessageConnection(new StreamMessageReader(proc.stdout), new StreamMessageWriter(proc.stdin));
  connection = conn;

  const published: Published[] = [];
  const edits: unknown[] = [];
  const messages: string[] = [];
  conn.onNotification('textDocument/publishDiagnostics', (p: Published) => void published.push(p));
  conn.onNotification('window/logMessage', (p: { message: string }) => void messages.push(p.message));
  conn.onNotification('window/showMessage', (p: { message: string }) => void messages.push(p.message));
  conn.onRequest('workspace/applyEdit', (p: unknown) => {
    edits.push(p);
    return { applied: true };
  });
  conn.onRequest('window/workDoneProgress/create', () => null);
  conn.onRequest('client/registerCapability', () => null);
  conn.onRequest('workspace/configuration', (p: { items: unknown[] }) => p.items.map(() => null));
  conn.listen();

  const cluster = section({
    'cluster.numNodes': 128,
    'cluster.cardsPerNode': 8,
    'cluster.deviceType': 'H100',
    memoryLimitGb: 76,
  });
  const init = (await Promise.race([died, conn.sendRequest('initialize', {
    processId: process.pid,
    rootUri: pathToFileURL(dir).href,
    capabilities: {
      workspace: { applyEdit: true, workspaceEdit: { documentChanges: true } },
      textDocument: { publishDiagnostics: {}, codeAction: { codeActionLiteralSupport: { codeActionKind: { valueSet: ['quickfix', 'source'] } } } },
    },
    initializationOptions: initializationOptions(cluster),
  })])) as { capabilities: { executeCommandProvider?: { commands: string[] } } };
  assert.ok(
    init.capabilities.executeCommandProvider?.commands.includes(SERVER_COMMANDS.applyOptimalStrategy),
    `the server advertises ${SERVER_COMMANDS.applyOptimalStrategy}`,
  );
  await conn.sendNotification('initialized', {});
  await conn.sendNotification('textDocument/didOpen', { textDocument: { uri, languageId: 'yaml', version: 1, text } });

  const codesFor = async (
    pred: (codes: string[], diagnostics: Published['diagnostics']) => boolean,
    what: string,
  ): Promise<string[]> => {
    const deadline = Date.now() + 30_000;
    for (;;) {
      const last = published.filter((p) => p.uri === uri).at(-1);
      const codes = (last?.diagnostics ?? []).map((d) => String(d.code));
      if (last && pred(codes, last.diagnostics)) {
        return codes;
      }
      if (Date.now() > deadline) {
        assert.fail(`${what}: last diagnostics ${JSON.stringify(last?.diagnostics)}\n${messages.join('\n')}\n${stderr}`);
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  };

  // The cluster from initializationOptions lets the server search: the "faster plan" hint, no "no cluster".
  let codes = await codesFor((c) => c.includes('HP611'), 'search with the cluster from initializationOptions');
  assert.ok(!codes.includes('HP302'), `no "cluster unknown" note: ${codes}`);

  // A smaller budget through didChangeConfiguration: the stated plan no longer fits.
  published.length = 0;
  const tight = section({ 'cluster.numNodes': 128, 'cluster.cardsPerNode': 8, 'cluster.deviceType': 'H100', memoryLimitGb: 4 });
  await conn.sendNotification('workspace/didChangeConfiguration', didChangeConfigurationParams(tight));
  await codesFor(
    (_c, diags) => diags.some((d) => d.severity === 1 && /\b4 GiB\b/.test(d.message)),
    'an error against the 4 GiB budget from didChangeConfiguration',
  );

  // And back: the palette command runs the server's apply command, which edits through workspace/applyEdit.
  published.length = 0;
  await conn.sendNotification('workspace/didChangeConfiguration', didChangeConfigurationParams(cluster));
  await codesFor((c) => c.includes('HP611'), 'search again with the 76 GiB budget');
  const result = (await conn.sendRequest('workspace/executeCommand', {
    command: SERVER_COMMANDS.applyOptimalStrategy,
    arguments: [uri],
  })) as { applied?: boolean; strategy?: string };
  assert.equal(result.applied, true, JSON.stringify(result));
  assert.equal(edits.length, 1);
  const change = (edits[0] as { edit: { documentChanges: DocumentChange[] } }).edit.documentChanges[0];
  assert.deepEqual(change.textDocument, { uri, version: 1 });
  const rewritten = applyEdits(text, change.edits);
  const tp = /\btp (\d+)/.exec(result.strategy ?? '')?.[1];
  assert.match(rewritten, new RegExp(`\\n  tp_size: ${tp}\\n`), `tp ${tp} written: ${rewritten}`);
  assert.equal(rewritten.split('#').length, text.split('#').length, 'comments kept');

  await conn.sendRequest('shutdown');
  await conn.sendNotification('exit');
  const code = await new Promise<number | null>((resolve) => {
    if (proc.exitCode !== null) {
      resolve(proc.exitCode);
    } else {
      proc.on('exit', (c) => resolve(c));
    }
  });
  assert.equal(code, 0, stderr);
});
