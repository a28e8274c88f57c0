"""`hp-plan explain FILE [--json] [--svg OUT] [--trace OUT] [--best] [--tokens N] [cluster flags]` (docs/formats.md §7).

Text: the plan's summary, one row per pipeline stage, what bounds the step, and the timeline as text lanes.
`--svg OUT` also writes the timeline and a memory-per-stage chart as an SVG picture; `--trace OUT` the predicted
step as a Chrome trace (engine.explain.chrome_trace). `--json`: one JSON document, the docs/formats.md §7 `explain` object plus `file`
(and `time_to_train` with --tokens, `svg` with --svg, `trace` with --trace).
Exit 0 when the plan is explained and fits, 1 when the input has errors, nothing could be priced or the plan
does not fit (it is still explained: its memory is the point).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TextIO

from engine.diagnostics import Diagnostic

if TYPE_CHECKING:
    from engine.config.types import Loaded


def load_plan(args: argparse.Namespace, *, best: bool = False
              ) -> tuple[Loaded, Any, list[Diagnostic], list[Diagnostic]]:
    """(Loaded, Explained | None, diagnostics, the errors set aside) for args.file: the file's diagnostics and the
    explanation's; with `best`, the stated strategy's errors are set aside (shown, not blocking). The Loaded
    carries the config and every file the check read (its train.yaml, its ratios file)."""
    from engine.check import check_file
    from engine.cli.plan_flags import cluster_overrides, ratios_request
    from engine.edit.strategy_keys import split_errors
    from engine.explain import explain_config
    from engine.facts import merge

    loaded = check_file(str(args.file), overrides=cluster_overrides(args), ratios=ratios_request(args))
    diags = list(loaded.diagnostics)
    stops, aside = split_errors(diags, loaded.config, str(args.file), best=best)
    if loaded.config is None or stops:
        return loaded, None, diags, aside
    ex, more = explain_config(loaded.config, best=best)
    return loaded, ex, list(merge(tuple(diags), more)), aside


def _write_out(path: str | None, what: str, render: Callable[[Any], str], ex: Any,
               err: TextIO, inputs: tuple[str, ...]) -> tuple[str | None, str | None]:
    """Write `render(ex)` to `path` through the project's one safe writer (atomic; devices, FIFOs, read-only
    files, the files read (`inputs`) and lost updates refused): (the path, None) when written, else (None, the
    reason), said on stderr: not a finding in the plan, so the exit code, not a diagnostic, says the command
    failed."""
    if path is None:
        return None, None
    if not path.strip():
        err.write(f"hp-plan explain: the {what} was not written: the file name is empty\n")
        return None, "the file name is empty"
    from engine.files import write_text

    failure = write_text(path, render(ex), inputs=inputs)
    if failure is None:
        return path, None
    err.write(f"hp-plan explain: the {what} was not written: {failure.reason}\n")
    return None, failure.reason


def _one_output_for_two(svg: str | None, trace: str | None) -> str | None:
    """The file both outputs name (the same spelling after normalising, or one existing file reached two ways),
    else None: the trace would silently replace the SVG written a moment before."""
    if not svg or not trace or not svg.strip() or not trace.strip():
        return None
    from engine.files import same_file

    if os.path.abspath(svg) == os.path.abspath(trace) or same_file(svg, trace):
        return trace
    return None


def run(args: argparse.Namespace, *, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    """Entry point used by engine.cli.main for `explain`."""
    from engine.cli.check import format_line
    from engine.edit.strategy_keys import set_aside_note
    from engine.explain.chrome_trace import render as render_trace
    from engine.explain.svg import render as render_svg
    from engine.explain.terminal import render as render_text
    from engine.explain.tokens import time_to_train
    from engine.jsonout import write_json

    out = stdout or sys.stdout
    err = stderr or sys.stderr
    file = str(args.file)
    as_json = bool(getattr(args, "json", False))
    clash = _one_output_for_two(getattr(args, "svg", None), getattr(args, "trace", None))
    if clash:
        err.write(f"hp-plan explain: --svg and --trace both name {clash}: one would replace the other; name two "
                  "files\n")
        return 2
    loaded, ex, diags, aside = load_plan(args, best=bool(getattr(args, "best", False)))
    config = loaded.config
    read = (file, *loaded.files)  # the plan and every file its check read (train.yaml, ratios): never an output
    written, unwritten = _write_out(getattr(args, "svg", None), "SVG", render_svg, ex, err, read) \
        if ex is not None else (None, None)
    traced, untraced = _write_out(getattr(args, "trace", None), "trace", render_trace, ex, err, read) \
        if ex is not None else (None, None)
    unwritten = unwritten or untraced
    tokens = getattr(args, "tokens", None)
    # an explanation exists only for a config with a model (load_plan)
    seq_len = config.model.seq_len if config is not None and config.model is not None else 0
    ttt = time_to_train(ex.estimate, tokens, seq_len) if ex is not None and tokens else None
    if as_json:
        doc: dict[str, Any] = {"file": file}
        if ex is not None:
            doc.update(ex.to_json())
        else:
            doc.update({"strategy": None, "framework": None, "step_time_s": None, "stages": [], "bound": None,
                        "timeline": []})
        doc["diagnostics"] = [d.to_json() for d in diags]
        doc["set_aside"] = sorted({d.code for d in aside}) if ex is not None else []
        if ttt is not None:
            doc["time_to_train"] = ttt.to_json()
        if written:
            doc["svg"] = written
        if traced:
            doc["trace"] = traced
        write_json(out, doc)
    else:
        for d in diags:
            out.write(format_line(d, file) + "\n")
        note = set_aside_note(aside) if ex is not None else None
        if note:
            out.write(f"hp-plan explain: {note}\n")
        if ex is not None:
            if diags:
                out.write("\n")
            out.write("\n".join(render_text(ex, width=int(getattr(args, "width", 96) or 96))) + "\n")
            if ttt is not None:
                out.write(f"\nTime to train: {ttt.line()}\n")
            for path in (written, traced):
                if path:
                    err.write(f"hp-plan explain: wrote {path}\n")
    if ex is None or unwritten or not ex.estimate.fits or any(
            d.is_error and d.code != "HP520" and d not in aside for d in diags):
        return 1
    return 0
