import { strict as assert } from 'node:assert';
import { test } from 'node:test';
import {
  PythonExtensionApi,
  chooseInterpreter,
  expandVariables,
  serverCommandLine,
  splitCommandLine,
} from '../src/interpreter';

function modernApi(path: string | undefined, resolved: string | undefined): PythonExtensionApi & { asked: unknown[] } {
  const asked: unknown[] = [];
  return {
    asked,
    environments: {
      getActiveEnvironmentPath(resource) {
        asked.push(resource);
        return path === undefined ? undefined : { id: 'env', path };
      },
      resolveEnvironment: async () => (resolved === undefined ? undefined : { executable: { uri: { fsPath: resolved } } }),
    },
  };
}

test('the hpLsp.interpreter setting wins over the Python extension', async () => {
  const choice = await chooseInterpreter({
    configured: '/opt/venv/bin/python',
    python: modernApi('/usr/bin/python3.12', '/usr/bin/python3.12'),
  });
  assert.deepEqual(choice, { command: '/opt/venv/bin/python', args: [], source: 'setting' });
});

test('the setting expands ${workspaceFolder}, ~ and ${env:...}, and may carry arguments', async () => {
  process.env.HP_TEST_ENV = 'proj';
  const choice = await chooseInterpreter({
    configured: '${workspaceFolder}/.venv/bin/python',
    workspaceFolder: '/work/repo',
  });
  assert.equal(choice.command, '/work/repo/.venv/bin/python');
  assert.equal(expandVariables('~/venvs/${env:HP_TEST_ENV}/bin/python', { home: '/home/u', env: process.env }), '/home/u/venvs/proj/bin/python');
  assert.equal(expandVariables('${userHome}/x', { home: '/h' }), '/h/x');
  assert.equal(expandVariables('${workspaceFolder}/x', {}), '${workspaceFolder}/x');
  const conda = await chooseInterpreter({ configured: 'conda run -n "my env" python' });
  assert.deepEqual([conda.command, ...conda.args], ['conda', 'run', '-n', 'my env', 'python']);
  assert.deepEqual(splitCommandLine('"/opt/my python/bin/python"'), ['/opt/my python/bin/python']);
});

test('a blank setting falls through to the Python extension, asked for the resource', async () => {
  const api = modernApi('/envs/a', '/envs/a/bin/python');
  const choice = await chooseInterpreter({ configured: '  ', python: api, resource: 'file:///work' });
  assert.deepEqual(choice, { command: '/envs/a/bin/python', args: [], source: 'python-extension' });
  assert.deepEqual(api.asked, ['file:///work']);
});

test('an unresolved environment still uses the path the user selected', async () => {
  const choice = await chooseInterpreter({ python: modernApi('/envs/b/bin/python', undefined) });
  assert.equal(choice.command, '/envs/b/bin/python');
  assert.equal(choice.source, 'python-extension');
});

test('the legacy execution-details API is used when environments is absent', async () => {
  const legacy: PythonExtensionApi = {
    settings: { getExecutionDetails: () => ({ execPath: ['conda', 'run', '-n', 'x', 'python'] }) },
  };
  const choice = await chooseInterpreter({ python: legacy });
  assert.deepEqual(choice, { command: 'conda', args: ['run', '-n', 'x', 'python'], source: 'python-extension' });
  assert.deepEqual(serverCommandLine(choice), { command: 'conda', args: ['run', '-n', 'x', 'python', '-m', 'hp_lsp'] });
});

test('no selection or a failing extension falls back to python3 and says why', async () => {
  const none = await chooseInterpreter({ python: modernApi(undefined, undefined), platform: 'linux' });
  assert.equal(none.command, 'python3');
  assert.equal(none.source, 'default');
  assert.match(none.note ?? '', /no interpreter selected/);

  const broken: PythonExtensionApi = {
    environments: {
      getActiveEnvironmentPath: () => {
        throw new Error('boom');
      },
      resolveEnvironment: async () => undefined,
    },
  };
  const failed = await chooseInterpreter({ python: broken });
  assert.equal(failed.command, 'python3');
  assert.match(failed.note ?? '', /failed: boom/);
});

test('without the Python extension: python3, or python on Windows', async () => {
  assert.deepEqual(await chooseInterpreter({ platform: 'linux' }), {
    command: 'python3',
    args: [],
    source: 'default',
    note: undefined,
  });
  assert.equal((await chooseInterpreter({ platform: 'win32' })).command, 'python');
  assert.deepEqual(serverCommandLine({ command: 'python3', args: [], source: 'default' }), {
    command: 'python3',
    args: ['-m', 'hp_lsp'],
  });
});
