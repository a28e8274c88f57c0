import { strict as assert } from 'node:assert';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeEach, test } from 'node:test';
// The same module the bundle substitutes for `vscode` (esbuild alias), so this is the state src/ sees.
import { Uri, stub as s } from './vscode-stub';
import {
  COMMANDS,
  ClientHandle,
  ClientSpec,
  Controller,
  SERVER_COMMANDS,
  describeApplyResult,
  startFailure,
} from '../src/controller';
import { SERVER_KEYS } from '../src/settings';
import { SAVE_TRACE_PALETTE, SHOW_PLAN_PALETTE } from '../src/planView';


interface FakeClient extends ClientHandle {
  spec: ClientSpec;
  requests: { method: string; params: unknown }[];
  notifications: { method: string; params: unknown }[];
  stopped: number;
}

function factory(opts: { failStart?: boolean; reply?: unknown; stderr?: string } = {}) {
  const made: FakeClient[] = [];
  const make = (spec: ClientSpec): ClientHandle => {
    const client: FakeClient = {
      spec,
      requests: [],
      notifications: [],
      stopped: 0,
      start: async () => {
        if (opts.failStart) {
          throw new Error('spawn python3 ENOENT');
        }
      },
      stop: async () => {
        client.stopped += 1;
      },
      sendRequest: async (method, params) => {
        client.requests.push({ method, params });
        return opts.reply;
      },
      sendNotification: async (method, params) => {
        client.notifications.push({ method, params });
      },
      lastStderrLine: async () => opts.stderr,
    };
    made.push(client);
    return client;
  };
  return { made, make };
}

const flush = () => new Promise((resolve) => setImmediate(resolve));

beforeEach(() => s.reset());

test('registers exactly the commands package.json contributes', () => {
  const manifest = JSON.parse(readFileSync(join(__dirname, '..', '..', 'package.json'), 'utf8'));
  // "Show plan" and "Save plan as trace" are registered by the plan view (src/planView.ts), not the Controller.
  const contributed = manifest.contributes.commands.map((c: { command: string }) => c.command)
    .filter((c: string) => c !== SHOW_PLAN_PALETTE && c !== SAVE_TRACE_PALETTE).sort();
  const controller = new Controller(factory().make, 'linux');
  assert.deepEqual([...s.commands.keys()].sort(), contributed);
  assert.deepEqual(Object.values(COMMANDS).sort(), contributed);
  // The server's own command ids are registered by the language client; ours must not collide with them.
  for (const id of Object.values(SERVER_COMMANDS)) {
    assert.ok(!contributed.includes(id));
  }
  for (const c of manifest.contributes.commands) {
    assert.match(c.title, /^HyperParallel: /);
  }
  controller.dispose();
  assert.equal(s.commands.size, 0);
});

test('package.json documents every server setting plus interpreter and trace.server', () => {
  const manifest = JSON.parse(readFileSync(join(__dirname, '..', '..', 'package.json'), 'utf8'));
  const props = manifest.contributes.configuration.properties as Record<string, { description?: string; markdownDescription?: string }>;
  const expected = [...SERVER_KEYS.map(([k]) => `hpLsp.${k}`), 'hpLsp.interpreter', 'hpLsp.trace.server'].sort();
  assert.deepEqual(Object.keys(props).sort(), expected);
  for (const [key, prop] of Object.entries(props)) {
    assert.ok((prop.markdownDescription ?? prop.description ?? '').length > 20, key);
  }
  assert.equal(manifest.engines.vscode, '^1.82.0');
  assert.equal(manifest.dependencies['vscode-languageclient'], '9.0.1');
  assert.ok(manifest.activationEvents.includes('onLanguage:yaml'));
});

test('activation alone does not start Python; a matching document does', async () => {
  const f = factory();
  s.documents.push(s.document('/w/values.yaml', 'replicas: 3\n'));
  const controller = new Controller(f.make, 'linux');
  await controller.activate();
  assert.equal(f.made.length, 0);
  s.open(s.document('/w/other.yaml', 'kind: Pod\n'));
  await flush();
  assert.equal(f.made.length, 0);
  s.open(s.document('/w/llama/train.yaml', 'model:\n  name: x\n'));
  await flush();
  assert.equal(f.made.length, 1);
  assert.ok(controller.running);
  // A second matching document reuses the running server.
  s.open(s.document('/w/search.yaml', ''));
  await flush();
  assert.equal(f.made.length, 1);
  controller.dispose();
});

test('the client is spawned with the chosen interpreter, folder, env and initializationOptions', async () => {
  const f = factory();
  s.folders.push({ uri: Uri.file('/w'), name: 'w', index: 0 });
  s.config = {
    'hpLsp.interpreter': '${workspaceFolder}/.venv/bin/python',
    'hpLsp.cluster.numNodes': 4,
    'hpLsp.cluster.cardsPerNode': 8,
    'hpLsp.cluster.deviceType': 'H100',
    'hpLsp.searchOnSave': true,
    'hpLsp.maxFileSizeKb': 0,
  };
  s.documents.push(s.document('/w/train.yaml', ''));
  const controller = new Controller(f.make, 'linux');
  await controller.activate();
  const spec = f.made[0].spec;
  assert.equal(spec.command, '/w/.venv/bin/python');
  assert.deepEqual(spec.args, ['-m', 'hp_lsp']);
  assert.equal(spec.cwd, '/w');
  assert.equal(spec.env.PYTHONUNBUFFERED, '1');
  assert.deepEqual(spec.initializationOptions, {
    hpLsp: {
      cluster: { numNodes: 4, cardsPerNode: 8, deviceType: 'H100', deviceMemoryGb: null },
      memoryLimitGb: null,
      searchOnSave: true,
      maxFileSizeKb: null,
      framework: null,
      ratiosFile: null,
    },
  });
  const log = s.channels[0].lines.map((l) => `${l.level}: ${l.text}`).join('\n');
  assert.match(log, /warn: hpLsp\.maxFileSizeKb: ignoring 0/);
  assert.match(log, /Starting: \/w\/\.venv\/bin\/python -m hp_lsp \(interpreter from setting\)/);
  controller.dispose();
});

test('the Python extension supplies the interpreter and a new selection restarts the server', async () => {
  const f = factory();
  let listener: (() => unknown) | undefined;
  let selected = '/envs/one/bin/python';
  s.extensions.set('ms-python.python', {
    isActive: false,
    exports: undefined,
    activate: async () => ({
      environments: {
        getActiveEnvironmentPath: () => ({ id: selected, path: selected }),
        resolveEnvironment: async (env: { path: string }) => ({ executable: { uri: { fsPath: env.path } } }),
        onDidChangeActiveEnvironmentPath: (l: () => unknown) => {
          listener = l;
          return { dispose: () => (listener = undefined) };
        },
      },
    }),
  });
  s.documents.push(s.document('/w/train.yaml', ''));
  const controller = new Controller(f.make, 'linux');
  await controller.activate();
  assert.equal(f.made[0].spec.command, '/envs/one/bin/python');
  assert.equal(controller.interpreterChoice?.source, 'python-extension');
  selected = '/envs/two/bin/python';
  listener?.();
  await flush();
  await flush();
  assert.equal(f.made.length, 2);
  assert.equal(f.made[0].stopped, 1);
  assert.equal(f.made[1].spec.command, '/envs/two/bin/python');
  controller.dispose();
});

test('settings changes are pushed with didChangeConfiguration; an interpreter change restarts', async () => {
  const f = factory();
  s.documents.push(s.document('/w/train.yaml', ''));
  const controller = new Controller(f.make, 'linux');
  await controller.activate();
  s.changeConfig({ 'hpLsp.memoryLimitGb': 60, 'hpLsp.cluster.deviceType': 'A3' });
  await flush();
  assert.deepEqual(f.made[0].notifications, [
    {
      method: 'workspace/didChangeConfiguration',
      params: {
        settings: {
          hpLsp: {
            cluster: { numNodes: null, cardsPerNode: null, deviceType: 'A3', deviceMemoryGb: null },
            memoryLimitGb: 60,
            searchOnSave: null,
            maxFileSizeKb: null,
            framework: null,
            ratiosFile: null,
          },
        },
      },
    },
  ]);
  s.changeConfig({ 'editor.tabSize': 2 });
  await flush();
  assert.equal(f.made[0].notifications.length, 1);
  s.changeConfig({ 'hpLsp.interpreter': '/other/python' });
  await flush();
  await flush();
  assert.equal(f.made.length, 2);
  assert.equal(f.made[1].spec.command, '/other/python');
  controller.dispose();
});

test('an interpreter change during a start takes effect once that start settles', async () => {
  let release!: () => void;
  const gate = new Promise<void>((resolve) => {
    release = resolve;
  });
  const specs: ClientSpec[] = [];
  const make = (spec: ClientSpec): ClientHandle => {
    specs.push(spec);
    const first = specs.length === 1;
    return {
      start: () => (first ? gate : Promise.resolve()),
      stop: async () => undefined,
      sendRequest: async () => undefined,
      sendNotification: async () => undefined,
    };
  };
  s.documents.push(s.document('/w/train.yaml', ''));
  const controller = new Controller(make, 'linux');
  const activated = controller.activate();
  await flush();
  assert.equal(specs.length, 1); // the first start waits on its server
  s.changeConfig({ 'hpLsp.interpreter': '/other/python' });
  await flush();
  assert.equal(specs.length, 1);
  release();
  await activated;
  for (let i = 0; i < 5; i += 1) {
    await flush();
  }
  assert.equal(specs.length, 2);
  assert.equal(specs[1].command, '/other/python');
  controller.dispose();
});

test('Apply optimal strategy runs the server command for the active document', async () => {
  const f = factory({ reply: { applied: false, reason: 'no search result yet (save the file to search)' } });
  const controller = new Controller(f.make, 'linux');
  await controller.applyOptimalStrategy();
  assert.equal(f.made.length, 0);
  assert.match(s.messages[0].text, /open a train\.yaml/);

  s.activeDocument = s.document('/w/my configs/train.yaml', 'accelerator:\n  tp_size: 2\n');
  await s.commands.get(COMMANDS.applyOptimalStrategy)?.();
  assert.deepEqual(f.made[0].requests, [
    {
      method: 'workspace/executeCommand',
      params: { command: SERVER_COMMANDS.applyOptimalStrategy, arguments: ['file:///w/my%20configs/train.yaml'] },
    },
  ]);
  assert.deepEqual(s.messages.at(-1), {
    level: 'warning',
    text: 'HyperParallel: not applied: no search result yet (save the file to search)',
  });
  controller.dispose();
});

test('a server that cannot start is reported once, with the command line', async () => {
  const f = factory({ failStart: true });
  s.documents.push(s.document('/w/train.yaml', ''));
  const controller = new Controller(f.make, 'linux');
  await controller.activate();
  assert.ok(!controller.running);
  assert.equal(s.messages.length, 1);
  assert.equal(s.messages[0].level, 'error');
  assert.match(s.messages[0].text, /did not start \("python3 -m hp_lsp"\): spawn python3 ENOENT/);
  assert.match(s.messages[0].text, /Set "hpLsp.interpreter"/);
  assert.match(s.channels[0].lines.at(-1)?.text ?? '', /ENOENT/);
  controller.dispose();
});

test("a failed start shows the server's last stderr line, once", async () => {
  const f = factory({ failStart: true, stderr: '/usr/bin/python3: No module named hp_lsp' });
  s.documents.push(s.document('/w/train.yaml', ''));
  const controller = new Controller(f.make, 'linux');
  await controller.activate();
  assert.equal(s.messages.length, 1);
  assert.match(s.messages[0].text, /: \/usr\/bin\/python3: No module named hp_lsp\. Set "hpLsp.interpreter"/);
  controller.dispose();
});

test('startFailure advises the interpreter setting only when the interpreter is the problem', () => {
  const crash = startFailure('py -m hp_lsp', 'ValueError: bad settings', 'Pending response rejected');
  assert.deepEqual(crash, {
    text: 'HyperParallel: the server did not start ("py -m hp_lsp"): ValueError: bad settings.',
    interpreter: false,
  });
  assert.ok(startFailure('py -m hp_lsp', undefined, 'spawn py ENOENT').interpreter);
  assert.ok(startFailure('py -m hp_lsp', "py: No module named 'hp_lsp'", 'closed').interpreter);
});

test('Restart server and Show search output', async () => {
  const f = factory();
  const controller = new Controller(f.make, 'linux');
  await s.commands.get(COMMANDS.restartServer)?.();
  assert.equal(f.made.length, 1);
  await s.commands.get(COMMANDS.restartServer)?.();
  assert.equal(f.made.length, 2);
  assert.equal(f.made[0].stopped, 1);
  await s.commands.get(COMMANDS.showSearchOutput)?.();
  assert.equal(s.channels[0].shown, 1);
  await controller.stop();
  assert.equal(f.made[1].stopped, 1);
  controller.dispose();
});

test('apply results become one short message', () => {
  assert.equal(describeApplyResult({ applied: true }), undefined);
  assert.equal(describeApplyResult({ applied: true, strategy: 'tp 8 · pp 4' }), 'applied tp 8 · pp 4');
  assert.equal(describeApplyResult({ applied: false, reason: 'no strategy fits the budget' }), 'not applied: no strategy fits the budget');
  assert.equal(describeApplyResult({ applied: false }), 'not applied: the server gave no reason');
  assert.equal(describeApplyResult({ message: 'tp 4 -> 8' }), 'tp 4 -> 8');
  assert.equal(describeApplyResult(null), undefined);
});
