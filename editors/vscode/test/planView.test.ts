import { strict as assert } from 'node:assert';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { test } from 'node:test';
import { PlanData, escapeHtml, planHtml, safeSvg } from '../src/planView';

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
  views.setRequester(async (uri) => {
    asked.push(uri);
    return { ...serverLikeData(), uri };
  });
  s.activeDocument = doc;
  await s.commands.get(SHOW_PLAN_PALETTE)?.();
  assert.deepEqual(asked, [doc.uri.toString()]);
  assert.equal(planStub.panels.length, 1);
  const panel = planStub.panels[0];
  assert.deepEqual(panel.options, { enableScripts: false, localResourceRoots: [] });
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
