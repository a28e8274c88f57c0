"""`hp-plan search FILE [--json] [--top K] [cluster flags]` (docs/formats.md §3).

On a terminal: the per-dimension summary, a ranked table of the top K (strategy, peak GiB, step s, tokens/s,
MFU), the counts (evaluated, fitting, over budget, refused by reason) and the diagnostics; a progress bar on
stderr when the search takes more than a moment and stderr is a terminal. `--json`: one JSON document, the
`search` object of docs/formats.md §3 (plus `file`), diagnostics of the file and of the search together.
Exit 0 when a strategy fits and the file has no error, 1 otherwise (2, usage, is argparse's).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from typing import TextIO

from engine.diagnostics import has_errors
from engine.jsonout import write_json
from engine.results import MFU_LABEL, SearchResult
from engine.search.distinct import describe

# The bar appears only when the search has run this long (a quick search prints nothing extra).
PROGRESS_AFTER_S = 0.3


class ProgressBar:
    """A one-line bar on a terminal stream, shown once the search has run PROGRESS_AFTER_S."""

    def __init__(self, stream: TextIO, width: int = 30) -> None:
        self.stream = stream
        self.width = width
        self.t0 = time.monotonic()
        self.shown = False

    def __call__(self, fraction: float) -> None:
        if time.monotonic() - self.t0 < PROGRESS_AFTER_S and not self.shown:
            return
        self.shown = True
        done = int(self.width * min(max(fraction, 0.0), 1.0))
        self.stream.write(f"\rsearching [{'#' * done}{'.' * (self.width - done)}] {fraction:4.0%}")
        self.stream.flush()

    def close(self) -> None:
        if self.shown:
            self.stream.write("\r" + " " * (self.width + 20) + "\r")
            self.stream.flush()


def render(result: SearchResult, summary: Sequence[str], out: TextIO) -> None:
    """The terminal report."""
    if summary:
        out.write("parallelism resolved:\n")
        for line in summary:
            out.write(f"  {line}\n")
    if result.top:
        rows = [("#", "strategy", "peak GiB", "step s", "tokens/s", MFU_LABEL, "")]
        eq = result.equivalent
        for i, e in enumerate(result.top, 1):
            mark = "equivalent" if i - 1 < len(eq) and eq[i - 1] else ""
            var = result.variants[i - 1] if i - 1 < len(result.variants) else {}
            rows.append((str(i), e.short() + (f"  [also {describe(var)}]" if var else ""),
                         f"{e.peak_memory_gib:.1f}", f"{e.step_time_s:.3f} {e.step_band}",
                         f"{e.tokens_per_s:,.0f}", f"{e.mfu:.1%}", mark))
        widths = [max(len(r[c]) for r in rows) for c in range(len(rows[0]))]
        out.write("\n")
        for j, r in enumerate(rows):
            cells = [r[0].rjust(widths[0]), r[1].ljust(widths[1])] + [r[c].rjust(widths[c]) for c in range(2, 6)]
            cells.append(r[6])
            out.write("  ".join(cells).rstrip() + "\n")
            if j == 0:
                out.write("  ".join("-" * w for w in widths[:6]) + "\n")
        best = result.top[0]
        n_eq = sum(1 for x in eq if x)
        if n_eq > 1 and result.band is not None:
            wider = (f", up to {result.reach:.0%} where the fastest plan's lead rests on what no run checked (its "
                     "band's basis says what)" if result.reach > result.band else "")
            out.write(f"\n{n_eq} plans are equivalent: within {result.band:.0%} of the fastest step time{wider} (the "
                      "cost model's error band between two plans; each step's own band, the range a measured step should "
                      "fall in about four times out of five, is the ± after it); among them the simplest ranks first (fewer and smaller tp/cp/pp/vpp/ep, "
                      "then memory headroom)\n")
        out.write(f"\nbest: {best.short()} (budget {best.budget_gib:.1f} GiB)\n")
        out.write(f"priced for {best.priced_for}\n")
        if best.offload_note() is not None:
            out.write(f"{best.offload_note()}\n")
    out.write(f"\nevaluated {result.evaluated:,} strategies in {result.elapsed_s * 1000:.0f} ms: "
              f"{result.feasible:,} fit, {result.over_budget:,} over the budget"
              + (f", {result.unpriced:,} bounded out (slower than the top {len(result.top)}; memory not priced)"
                 if result.unpriced else "") + "\n")
    if result.refused:
        out.write("refused before pricing:\n")
        for reason, n in sorted(result.refused.items(), key=lambda kv: (-kv[1], kv[0])):
            out.write(f"  {n:>9,}  {reason}\n")


def _add_time_to_train(doc: dict[str, object], args: argparse.Namespace, config: object,
                       result: SearchResult) -> None:
    """`--tokens N`: each ranked estimate of the JSON document gets its `time_to_train`."""
    tokens = getattr(args, "tokens", None)
    model = getattr(config, "model", None)
    if tokens is None or model is None:
        return
    from engine.explain.tokens import time_to_train

    ests = ([("best", result.best)] if result.best is not None else []) + [(i, e) for i, e in enumerate(result.top)]
    for key, est in ests:
        target = doc["best"] if key == "best" else doc["top"][key]  # type: ignore[index]
        target["time_to_train"] = time_to_train(est, tokens, model.seq_len).to_json()  # type: ignore[index]


def run(args: argparse.Namespace, *, stdout: TextIO | None = None, stderr: TextIO | None = None,
        search_fn: Callable[..., SearchResult] | None = None) -> int:
    """Run `hp-plan search` on parsed arguments (file, json, top, cluster flags); returns the exit code."""
    from engine.check import check_file
    from engine.cli.check import format_line
    from engine.cli.plan_flags import cluster_overrides, ratios_request
    from engine.document import Reads
    from engine.search import compare_stated, search

    out = stdout or sys.stdout
    err = stderr or sys.stderr
    file = str(args.file)
    top = int(getattr(args, "top", None) or 10)
    as_json = bool(getattr(args, "json", False))
    reads = Reads()  # the search config's train.yaml is its source and the stated plan's file: read once
    loaded = check_file(file, overrides=cluster_overrides(args), ratios=ratios_request(args), reads=reads)
    config = loaded.config
    file_diags = list(loaded.diagnostics)
    result: SearchResult | None = None
    if config is not None:
        bar = ProgressBar(err) if (not as_json and err.isatty()) else None
        try:
            result = (search_fn or search)(config, top=top, progress=bar)
        finally:
            if bar is not None:
                bar.close()
    from engine.facts import merge

    # Each fact once, whichever stage found it (engine.facts): HP402 from the check, not HP600 again.
    diags = list(merge(file_diags, result.diagnostics if result is not None else (),
                       compare_stated(config, result, reads=reads).diagnostics
                       if result is not None and config is not None else ()))
    ok = result is not None and result.best is not None and not has_errors(diags)
    if as_json:
        doc: dict[str, object] = {"file": file}
        if result is not None:
            doc.update(result.to_json())
            _add_time_to_train(doc, args, config, result)
        else:
            doc.update({"best": None, "top": [], "evaluated": 0, "feasible": 0, "elapsed_s": 0.0,
                        "dimensions": {}})
        doc["diagnostics"] = [d.to_json() for d in diags]
        write_json(out, doc)
        return 0 if ok else 1
    for d in diags:
        out.write(format_line(d, file) + "\n")
    if result is not None and config is not None and (result.evaluated or result.best is not None):
        if diags:
            out.write("\n")
        render(result, config.summary_lines(), out)
        tokens = getattr(args, "tokens", None)
        if tokens is not None and result.best is not None and config.model is not None:
            from engine.explain.tokens import time_to_train

            out.write(f"time to train (best): {time_to_train(result.best, tokens, config.model.seq_len).line()}\n")
        if result.best is not None:
            out.write(f"{result.best.calibration_note()}\n")
    if result is not None and result.best is None and not diags:
        out.write("no strategy fits\n")
    return 0 if ok else 1
