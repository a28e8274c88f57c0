import { strict as assert } from 'node:assert';
import { test } from 'node:test';
import { ExitedWhileStarting, NotRunningAfterStart, StartGuard } from '../src/startGuard';

test('a start that never settles fails when the process exits', async () => {
  const guard = new StartGuard();
  const pending = guard.run(() => new Promise<void>(() => undefined));
  guard.exited(1, null);
  await assert.rejects(pending, (err: unknown) => err instanceof ExitedWhileStarting && /code 1/.test(err.message));
});

test("a start's own failure is kept", async () => {
  const guard = new StartGuard();
  await assert.rejects(guard.run(() => Promise.reject(new Error('Pending response rejected'))), /Pending response/);
  guard.exited(1, null); // afterwards: nothing more happens
});

test('an exit after a good start changes nothing', async () => {
  const guard = new StartGuard();
  await guard.run(() => Promise.resolve());
  guard.exited(null, 'SIGTERM');
});

test('a start that resolves with the client not running fails', async () => {
  // vscode-languageclient 9: the close handler clears the start promise, start() returns undefined
  const guard = new StartGuard();
  await assert.rejects(guard.run(() => Promise.resolve(), () => false), NotRunningAfterStart);
  guard.exited(1, null); // the exit that came after: nothing more happens
});
