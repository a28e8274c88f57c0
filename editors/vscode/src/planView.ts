/**
 * The plan view: a webview panel with the server's explain data for one document (docs/formats.md §7): what
 * bounds the step, one row per pipeline stage, and the picture the server draws (the pipeline timeline and
 * the memory-per-stage chart as SVG, engine/explain/svg.py). It opens from the "▸ Plan view" code lens or
 * "HyperParallel: Show plan", and refreshes when its document is saved. Its "Save as trace…" link (or
 * "HyperParallel: Save plan as trace…") writes the plan's predicted step as a Chrome trace through the server
 * (hpLsp.savePlanTrace, the file `hp-plan explain --trace` writes), to a path picked in a save dialog.
 *
 * Offline by construction: the page is one HTML string with the SVG inline, no script (the webview runs
 * with scripts disabled) and a Content-Security-Policy of `default-src 'none'`, so nothing is fetched from
 * the network or the disk. No chart library: the server's SVG is the same picture `hp-plan explain --svg`
 * writes, so the editor and the CLI cannot disagree, and the extension bundle stays free of drawing code.
 */
import * as vscode from 'vscode';

/** The server command (hp_lsp/features/plan.py) and this extension's palette command. */
export const SHOW_PLAN = 'hpLsp.showPlan';
export const SHOW_PLAN_PALETTE = 'hyperparallel.showPlan';
/** The server command that writes the trace, and this extension's command (its own id: the language client
 * registers the server's command ids itself, so one of ours with the same id would clash). */
export const SAVE_TRACE = 'hpLsp.savePlanTrace';
export const SAVE_TRACE_PALETTE = 'hyperparallel.savePlanTrace';
/** After a save the search runs again; the view asks until the best plan is no longer stale. */
export const STALE_RETRY_MS = 1500;
export const STALE_RETRIES = 40;

export interface PlanStage {
  stage: number;
  layers: number;
  memory_gib: Record<string, number>;
  time_s: Record<string, number>;
  total_gib?: number;
}

export interface PlanData {
  uri?: string;
  error?: string;
  which?: string;
  stale?: boolean;
  strategy?: Record<string, unknown>;
  framework?: string;
  schedule?: string;
  step_time_s?: number;
  tokens_per_s?: number;
  mfu?: number;
  budget_gib?: number;
  bound?: string;
  bound_detail?: string;
  stages?: PlanStage[];
  svg?: string;
}

/** The running client's workspace/executeCommand: a server command and its arguments. */
export type ServerCommand = (command: string, args: unknown[]) => Promise<unknown>;

/** Where the trace goes unless the user picks another place: next to the document, `<file>.trace.json`. */
export function defaultTracePath(documentPath: string): string {
  return `${documentPath}.trace.json`;
}

/** hpLsp.savePlanTrace's arguments: the document, the absolute target path, and the plan shown (best or
 * stated) when known, so the trace is of the plan on screen. */
export function traceArguments(uri: string, path: string, which?: string): unknown[] {
  return which === 'best' || which === 'stated' ? [uri, path, which] : [uri, path];
}

/** The message for the server's answer: `{"written": path}` or `{"error": why}` (anything else is an error). */
export function traceOutcome(result: unknown): { level: 'info' | 'error'; text: string } {
  const answer = (result && typeof result === 'object' ? result : {}) as { written?: unknown; error?: unknown };
  if (typeof answer.written === 'string') {
    return { level: 'info', text: `HyperParallel: plan trace written to ${answer.written}` };
  }
  const why = typeof answer.error === 'string' ? answer.error : 'no answer from the server';
  return { level: 'error', text: `HyperParallel: the plan trace was not written: ${why}` };
}

/** The panel's "Save as trace…" link: a command URI (the one command the webview may run), no script. */
function saveTraceLink(uri: string | undefined, which: string | undefined): string {
  if (!uri) {
    return '';
  }
  const args = encodeURIComponent(JSON.stringify(which ? [uri, which] : [uri]));
  return `<p><a href="command:${SAVE_TRACE_PALETTE}?${escapeHtml(args)}" title="Write the plan's predicted step ` +
    `as a Chrome trace (chrome://tracing, Perfetto)">Save as trace…</a></p>`;
}

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
}

const MEMORY = ['parameters', 'gradients', 'optimizer', 'activations', 'buffers', 'reserved'];
const TIMES = ['forward', 'backward', 'recompute', 'comm', 'idle'];

function num(x: unknown, digits: number): string {
  return typeof x === 'number' && Number.isFinite(x) ? x.toFixed(digits) : '–';
}

/** Only an `<svg …>…</svg>` document is put on the page (the server's; anything else is dropped). */
export function safeSvg(svg: unknown): string {
  if (typeof svg !== 'string') {
    return '';
  }
  const s = svg.trim();
  if (!s.startsWith('<svg') || !s.endsWith('</svg>') || /<script|<foreignObject|\son\w+\s*=|javascript:/i.test(s)) {
    return '';
  }
  return s;
}

function stageTable(stages: PlanStage[]): string {
  const head = ['stage', 'layers', ...MEMORY.map((k) => `${k} GiB`), 'total GiB', ...TIMES.map((k) => `${k} s`)];
  const rows = stages.map((r) => {
    const total = r.total_gib ?? MEMORY.reduce((a, k) => a + (r.memory_gib[k] ?? 0), 0);
    const cells = [String(r.stage), String(r.layers), ...MEMORY.map((k) => num(r.memory_gib[k], 2)), num(total, 2),
      ...TIMES.map((k) => num(r.time_s[k], 3))];
    return `<tr>${cells.map((c) => `<td>${escapeHtml(c)}</td>`).join('')}</tr>`;
  });
  return `<table><thead><tr>${head.map((h) => `<th>${escapeHtml(h)}</th>`).join('')}</tr></thead>` +
    `<tbody>${rows.join('')}</tbody></table>`;
}

/** The whole page for one plan (a pure function: the tests render it without VS Code). */
export function planHtml(data: PlanData, title: string): string {
  const csp = "default-src 'none'; img-src data:; style-src 'unsafe-inline';";
  const head = `<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">` +
    `<meta http-equiv="Content-Security-Policy" content="${csp}">` +
    `<meta name="viewport" content="width=device-width, initial-scale=1"><title>${escapeHtml(title)}</title>` +
    `<style>body{font-family:var(--vscode-font-family,sans-serif);color:var(--vscode-foreground);padding:8px 16px}` +
    `.pic{background:#fff;border-radius:4px;padding:4px;overflow-x:auto}.pic svg{max-width:100%;height:auto}` +
    `table{border-collapse:collapse;margin:8px 0}td,th{padding:2px 8px;text-align:right;` +
    `border-bottom:1px solid var(--vscode-panel-border,#8884)}th{font-weight:600}.note{opacity:.8}</style></head><body>`;
  if (data.error) {
    return `${head}<h2>${escapeHtml(title)}</h2><p>No plan to show: ${escapeHtml(data.error)}</p></body></html>`;
  }
  const summary = `${escapeHtml(data.which ?? 'plan')} plan on ${escapeHtml(data.framework ?? '')}: step ` +
    `${num(data.step_time_s, 3)} s · ${num(data.tokens_per_s, 0)} tokens/s · MFU ${num((data.mfu ?? NaN) * 100, 1)}%` +
    ` · ${escapeHtml(data.schedule ?? '')}`;
  const stale = data.stale ? '<p class="note">The best plan is from an earlier version; it refreshes when the ' +
    'search of the saved file finishes.</p>' : '';
  return `${head}<h2>${escapeHtml(title)}</h2><p>${summary}</p>` +
    `<p><b>Bound: ${escapeHtml(data.bound ?? '')}</b> — ${escapeHtml(data.bound_detail ?? '')}</p>${stale}` +
    `${saveTraceLink(data.uri, data.which)}<div class="pic">${safeSvg(data.svg)}</div>` +
    `${stageTable(data.stages ?? [])}</body></html>`;
}

/** One panel per document; reused when shown again. */
export class PlanViews implements vscode.Disposable {
  private readonly panels = new Map<string, vscode.WebviewPanel>();
  private readonly disposables: vscode.Disposable[] = [];
  private requester: ServerCommand | undefined;

  constructor() {
    this.disposables.push(
      vscode.commands.registerCommand(SHOW_PLAN_PALETTE, () => this.showActive()),
      vscode.commands.registerCommand(SAVE_TRACE_PALETTE, (uri?: unknown, which?: unknown) =>
        this.saveTrace(typeof uri === 'string' ? uri : undefined, typeof which === 'string' ? which : undefined)),
      vscode.workspace.onDidSaveTextDocument((doc) => this.saved(doc.uri.toString())),
    );
  }

  /** The running client's way to ask the server (set when a client is created). */
  setRequester(requester: ServerCommand | undefined): void {
    this.requester = requester;
  }

  /** Show what the server returned for hpLsp.showPlan (the code lens path, through the middleware); while
   * the best plan is stale (its search is still running), ask again a little later. */
  show(result: unknown, attempt = 0): void {
    const data = (result && typeof result === 'object' ? result : { error: 'no answer from the server' }) as PlanData;
    const uri = data.uri;
    if (!uri) {
      void vscode.window.showWarningMessage(`HyperParallel: ${data.error ?? 'no plan to show'}`);
      return;
    }
    let panel = this.panels.get(uri);
    const title = `Plan: ${decodeURIComponent(uri.split('/').pop() ?? uri)}`;
    if (!panel) {
      panel = vscode.window.createWebviewPanel('hpLsp.planView', title, vscode.ViewColumn.Beside,
        { enableScripts: false, enableCommandUris: [SAVE_TRACE_PALETTE], localResourceRoots: [] });
      this.panels.set(uri, panel);
      panel.onDidDispose(() => this.panels.delete(uri));
    }
    panel.webview.html = planHtml(data, title);
    panel.reveal(undefined, true);
    if (data.stale && this.requester && attempt < STALE_RETRIES) {
      setTimeout(() => void this.request(uri, attempt + 1), STALE_RETRY_MS);
    }
  }

  /** The active editor's YAML document, or a warning and nothing. */
  private activeYaml(): string | undefined {
    const doc = vscode.window.activeTextEditor?.document;
    if (!doc || doc.languageId !== 'yaml') {
      void vscode.window.showWarningMessage('HyperParallel: open a train.yaml or a search config first.');
      return undefined;
    }
    return doc.uri.toString();
  }

  private async showActive(): Promise<void> {
    const uri = this.activeYaml();
    if (uri) {
      await this.request(uri);
    }
  }

  /** "Save as trace…": pick the target (default `<file>.trace.json`), have the server write it, say where. */
  private async saveTrace(uri = this.activeYaml(), which?: string): Promise<void> {
    if (!uri) {
      return;
    }
    if (!this.requester) {
      void vscode.window.showWarningMessage('HyperParallel: the server is not running yet.');
      return;
    }
    const source = vscode.Uri.parse(uri);
    const target = await vscode.window.showSaveDialog({
      defaultUri: source.scheme === 'file' ? vscode.Uri.file(defaultTracePath(source.fsPath)) : undefined,
      filters: { JSON: ['json'] },
      saveLabel: 'Save trace',
      title: 'Save the plan as a Chrome trace',
    });
    if (!target) {
      return; // cancelled
    }
    try {
      const outcome = traceOutcome(await this.requester(SAVE_TRACE, traceArguments(uri, target.fsPath, which)));
      void (outcome.level === 'info' ? vscode.window.showInformationMessage(outcome.text)
        : vscode.window.showErrorMessage(outcome.text));
    } catch (err) {
      void vscode.window.showErrorMessage(`HyperParallel: ${err instanceof Error ? err.message : String(err)}`);
    }
  }

  private async request(uri: string, attempt = 0): Promise<void> {
    if (attempt > 0 && !this.panels.has(uri)) {
      return; // closed meanwhile
    }
    if (!this.requester) {
      void vscode.window.showWarningMessage('HyperParallel: the server is not running yet.');
      return;
    }
    try {
      const result = (await this.requester(SHOW_PLAN, [uri])) as PlanData;
      if (result && typeof result === 'object' && !result.uri) {
        result.uri = uri;
      }
      this.show(result, attempt);
    } catch (err) {
      void vscode.window.showErrorMessage(`HyperParallel: ${err instanceof Error ? err.message : String(err)}`);
    }
  }

  private saved(uri: string): void {
    if (this.panels.has(uri)) {
      void this.request(uri);
    }
  }

  dispose(): void {
    for (const p of this.panels.values()) {
      p.dispose();
    }
    this.panels.clear();
    for (const d of this.disposables) {
      d.dispose();
    }
  }
}
