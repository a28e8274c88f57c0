import { strict as assert } from 'node:assert';
import { existsSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';

// The shipped bundle (dist/extension.js, built by `npm run build` before the tests in `npm run check`) must
// load with nothing but `vscode` outside it: a missing or mis-bundled dependency fails here, not in a
// user's editor. VS Code cannot run offline, so `vscode` is a permissive stand-in whose every export is a
// class (vscode-languageclient subclasses several at load time).
test('dist/extension.js loads with only vscode external and exports activate/deactivate', () => {
  const bundle = join(__dirname, '..', '..', 'dist', 'extension.js');
  assert.ok(existsSync(bundle), 'dist/extension.js is missing: run `npm run build` first');
  assert.ok(statSync(bundle).size > 50_000, 'the bundle should contain vscode-languageclient');
  const Module = require('node:module') as { _load: (request: string, ...rest: unknown[]) => unknown };
  const original = Module._load;
  const requested: string[] = [];
  const permissive = new Proxy({}, { get: (_t, key) => (key === '__esModule' ? false : class {}) });
  Module._load = function (request: string, ...rest: unknown[]) {
    requested.push(request);
    return request === 'vscode' ? permissive : original.call(this, request, ...rest);
  };
  try {
    const ext = require(bundle) as { activate?: unknown; deactivate?: unknown };
    assert.equal(typeof ext.activate, 'function');
    assert.equal(typeof ext.deactivate, 'function');
  } finally {
    Module._load = original;
  }
  const external = requested.filter((r) => !r.startsWith('node:') && !isBuiltin(r) && r !== bundle);
  assert.deepEqual([...new Set(external)], ['vscode']);
});

function isBuiltin(name: string): boolean {
  return (require('node:module') as { builtinModules: string[] }).builtinModules.includes(name);
}
