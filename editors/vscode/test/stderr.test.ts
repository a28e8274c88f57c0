import { strict as assert } from 'node:assert';
import { test } from 'node:test';
import { StderrTail } from '../src/stderr';

test('keeps the last non-empty line across split chunks', async () => {
  const t = new StderrTail();
  t.push('Traceback (most recent call last):\n  File "x", line 1\nModuleNotF');
  t.push('oundError: No module named hp_lsp\r\n\n');
  t.close();
  assert.equal(await t.lastLine(), 'ModuleNotFoundError: No module named hp_lsp');
});

test('an unterminated last line counts; nothing written gives undefined after the wait', async () => {
  const t = new StderrTail();
  t.push('first\nerror: unrecognized arguments: --stdio');
  assert.equal(await t.lastLine(10), 'error: unrecognized arguments: --stdio');
  assert.equal(await new StderrTail().lastLine(10), undefined);
});
