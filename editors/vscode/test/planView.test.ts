import { strict as assert } from 'node:assert';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { test } from 'node:test';
import { PlanData, escapeHtml, planHtml, safeSvg, traceArguments, traceOutcome } from '../src/planView';

const ROOT = join(__dirname, '..', '..', '..', '..');

/** The server's answer for the committed example, when a Python with hp-lsp is at hand (else a fixture). */
function serverLikeData(): PlanData {
  const py = process.env.HP_LSP_PYTHON ?? join(ROOT, '.venv', 'bin', 'python');
  try {
    const out = execFileSync(py, ['-m', 'engine.cli', 'explain', join(ROOT, 'examples', 'explain', '1f1b.yaml'),
      '--json'], { cwd: ROOT, encoding: 'utf8' });
    const doc = JSON.parse(out) as PlanData;
    doc.svg = execFileSync(py, ['-c', 'import sys;from engine.check import check_file;from engine.explain import '
      + 'explain_config;from engine.explain.svg import render;c=check_file(sys.argv[1]).config;'
      + 'print(render(explain_config(c)[0]),end="")', join(ROOT, 'examples', 'explain', '1f1b.yaml')],
    { cwd: ROOT, encoding: 'utf8' });
    return doc;
  } catch {
    if (process.env.CI === 'true') {
      throw new Error('CI: the plan view test needs the Python environment (.venv) for real server data');
    }
    return {
      which: 'stated', framework: 'hyperparallel', schedule: '1F1B', step_time_s: 1.3, tokens_per_s: 1e5, mfu: 0.37,
      bound: 'compute', bound_detail: 'compute: 72% <of> the step',
      stages: [0, 1].map((i) => ({ stage: i, layers: 8, memory_gib: { parameters: 1 }, time_s: { forward: 0.2 } })),
      svg: "<svg xmlns='http://www.w3.org/2000/svg'><text>stage 0</text><text>stage 1</text></svg>",
    };
  }
}

test('the plan page carries the timeline picture, the stages and the bound, and loads nothing', () => {
  const data = serverLikeData();
  const html = planHtml(data, 'Plan: search.yaml');
  assert.match(html, /Content-Security-Policy" content="default-src 'none';/);
  assert.doesNotMatch(html, /<script/i);
  assert.doesNotMatch(html, /(src|href)=["']?(https?:)?\/\//i, 'no network or file loads');
  assert.ok(html.includes('<svg'), 'the SVG is inline');
  for (const s of data.stages ?? []) {
    assert.ok(html.includes(`<td>${s.stage}</td><td>${s.layers}</td>`), `stage ${s.stage} row`);
    assert.ok(html.includes(`stage ${s.stage}`));
  }
  assert.ok(html.includes(`Bound: ${escapeHtml(data.bound ?? '')}`));
});

test('an error answer says why; text from the server is escaped', () => {
  assert.match(planHtml({ error: 'the <model> is not known' }, 'Plan'), /No plan to show: the &lt;model&gt; is not known/);
  const html = planHtml({ bound: '<b>x</b>', bound_detail: '"quoted" & <tag>', stages: [] }, 'P');
  assert.ok(html.includes('&lt;b&gt;x&lt;/b&gt;') && html.includes('&quot;quoted&quot; &amp; &lt;tag&gt;'));
});

test('only a plain SVG document reaches the page', () => {
  assert.equal(safeSvg("<svg><script>alert(1)</script></svg>"), '');
  assert.equal(safeSvg("<svg onload='x()'></svg>"), '');
  assert.equal(safeSvg('<div></div>'), '');
  assert.equal(safeSvg(undefined), '');
  assert.equal(safeSvg("<svg xmlns='http://www.w3.org/2000/svg'></svg>"), "<svg xmlns='http://www.w3.org/2000/svg'></svg>");
});

test('PlanViews: "Show plan" asks the server, opens one panel per document, refreshes on save', async () => {
  const { stub: s, planStub } = await import('./vscode-stub');
  const { PlanViews, SHOW_PLAN_PALETTE } = await import('../src/planView');
  s.reset();
  planStub.reset();
  const views = new PlanViews();
  assert.ok(s.commands.has(SHOW_PLAN_PALETTE));
  const asked: string[] = [];
  const doc = s.document('/w/search.yaml', 'x: 1');
  views.setRequester(async (command, args) => {
    assert.equal(command, 'hpLsp.showPlan');
    const uri = String(args[0]);
    asked.push(uri);
    return { ...serverLikeData(), uri };
  });
  s.activeDocument = doc;
  await s.commands.get(SHOW_PLAN_PALETTE)?.();
  assert.deepEqual(asked, [doc.uri.toString()]);
  assert.equal(planStub.panels.length, 1);
  const panel = planStub.panels[0];
  assert.deepEqual(panel.options,
    { enableScripts: false, enableCommandUris: ['hyperparallel.savePlanTrace'], localResourceRoots: [] });
  assert.ok(panel.webview.html.includes('<svg'));
  planStub.onDidSave.fire(doc);
  await new Promise((r) => setTimeout(r, 10));
  assert.equal(asked.length, 2);
  assert.equal(planStub.panels.length, 1, 'the same panel is reused');
  planStub.onDidSave.fire(s.document('/w/other.yaml', ''));
  await new Promise((r) => setTimeout(r, 10));
  assert.equal(asked.length, 2, 'saving another file does not refresh');
  views.show({ error: 'nothing' });
  assert.ok(s.messages.some((m) => m.level === 'warning'));
  views.dispose();
  assert.ok(panel.disposed);
  assert.ok(!s.commands.has(SHOW_PLAN_PALETTE));
});

test('"Save as trace": the arguments name the document, the absolute path and the plan shown', () => {
  assert.deepEqual(traceArguments('file:///w/a.yaml', '/t/a.trace.json', 'best'), ['file:///w/a.yaml', '/t/a.trace.json', 'best']);
  assert.deepEqual(traceArguments('file:///w/a.yaml', '/t/a.trace.json', 'stated'), ['file:///w/a.yaml', '/t/a.trace.json', 'stated']);
  assert.deepEqual(traceArguments('file:///w/a.yaml', '/t/a.trace.json'), ['file:///w/a.yaml', '/t/a.trace.json']);
  assert.deepEqual(traceArguments('file:///w/a.yaml', '/t/x.json', 'plan'), ['file:///w/a.yaml', '/t/x.json']);
  assert.deepEqual(traceOutcome({ written: '/t/a.trace.json' }),
    { level: 'info', text: 'HyperParallel: plan trace written to /t/a.trace.json' });
  assert.deepEqual(traceOutcome({ error: 'no plan yet' }),
    { level: 'error', text: 'HyperParallel: the plan trace was not written: no plan yet' });
  assert.equal(traceOutcome(null).level, 'error');
  assert.equal(traceOutcome({ written: 3 }).level, 'error');
});

test('the plan page links "Save as trace…" to the extension command with the document and the plan', () => {
  const html = planHtml({ uri: 'file:///w/my%20search.yaml', which: 'best', stages: [] }, 'P');
  const m = /<a href="command:hyperparallel\.savePlanTrace\?([^"]+)"/.exec(html);
  assert.ok(m, 'a command link');
  assert.deepEqual(JSON.parse(decodeURIComponent(m[1])), ['file:///w/my%20search.yaml', 'best']);
  assert.ok(!planHtml({ error: 'x', uri: 'file:///w/a.yaml' }, 'P').includes('command:'), 'no link without a plan');
});

test('PlanViews: "Save plan as trace" asks where, runs the server command, says what was written', async () => {
  const { stub: s, planStub, Uri } = await import('./vscode-stub');
  const { PlanViews, SAVE_TRACE_PALETTE } = await import('../src/planView');
  s.reset();
  planStub.reset();
  const views = new PlanViews();
  const sent: { command: string; args: unknown[] }[] = [];
  let answer: unknown = { written: '/out/plan.trace.json' };
  views.setRequester(async (command, args) => {
    sent.push({ command, args });
    return answer;
  });
  const doc = s.document('/w/search.yaml', 'x: 1');
  s.activeDocument = doc;
  const run = (...args: unknown[]) => s.commands.get(SAVE_TRACE_PALETTE)?.(...args) as Promise<void>;

  await run(); // the dialog is cancelled: nothing is sent
  assert.equal(planStub.saveDialogs.length, 1);
  assert.equal(planStub.saveDialogs[0].defaultUri?.fsPath, '/w/search.yaml.trace.json');
  assert.deepEqual(planStub.saveDialogs[0].filters, { JSON: ['json'] });
  assert.equal(sent.length, 0);

  planStub.saveTarget = Uri.file('/out/plan.trace.json');
  await run();
  assert.deepEqual(sent, [{ command: 'hpLsp.savePlanTrace', args: [doc.uri.toString(), '/out/plan.trace.json'] }]);
  assert.deepEqual(s.messages.at(-1), { level: 'info', text: 'HyperParallel: plan trace written to /out/plan.trace.json' });

  answer = { error: 'the file has errors' }; // from the panel's link: the panel's document and plan
  s.activeDocument = undefined;
  await run('file:///w/other.yaml', 'stated');
  assert.deepEqual(sent.at(-1), { command: 'hpLsp.savePlanTrace', args: ['file:///w/other.yaml', '/out/plan.trace.json', 'stated'] });
  assert.equal(planStub.saveDialogs.at(-1)?.defaultUri?.fsPath, '/w/other.yaml.trace.json');
  assert.deepEqual(s.messages.at(-1), { level: 'error', text: 'HyperParallel: the plan trace was not written: the file has errors' });

  await run(); // no YAML editor and no document given: a warning, no dialog
  assert.equal(s.messages.at(-1)?.level, 'warning');
  assert.equal(planStub.saveDialogs.length, 3);
  views.dispose();
  assert.ok(!s.commands.has(SAVE_TRACE_PALETTE));
});
