"""`hp-plan export FILE --to megatron|torchtitan|mindspeed [--best] [--json] [cluster flags]`.

Prints the plan (the stated one; for a search config with searched dimensions, or with --best, the search's
best) as the target stack's arguments: Megatron-LM / MindSpeed-LLM flags one per line, or a torchtitan TOML
fragment (engine.explain.export has the mapping of every key; docs/explain.md the same table). Settings the
target cannot express are HP753 warnings on stderr (in `diagnostics` with --json). Exit 0 when exported; 1
when nothing could be exported or the input has errors (a plan over the budget is still printed, HP520).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, TextIO


def run(args: argparse.Namespace, *, stdout: TextIO | None = None, stderr: TextIO | None = None) -> int:
    """Entry point used by engine.cli.main for `export`."""
    from engine.check import check_file
    from engine.cli.check import format_line
    from engine.cli.plan_flags import cluster_overrides
    from engine.edit.strategy_keys import set_aside_note, split_errors
    from engine.explain import pick_plan
    from engine.explain.export import export
    from engine.jsonout import write_json

    out = stdout or sys.stdout
    err = stderr or sys.stderr
    file = str(args.file)
    as_json = bool(getattr(args, "json", False))
    loaded = check_file(file, overrides=cluster_overrides(args))
    diags = list(loaded.diagnostics)
    config = loaded.config
    exported = None
    est = None
    best = bool(getattr(args, "best", False))
    stops, aside = split_errors(diags, config, file, best=best)
    if config is not None and config.model is not None and not stops:
        est, more = pick_plan(config, best=best)
        diags += [d for d in more if d not in diags]
        if est is not None:
            exported = export(est.strategy, config.model, est.priced_run(config.run), str(args.to),
                              config.cluster.device if config.cluster is not None else None)
            diags += list(exported.diagnostics)
    # HP520 (does not fit) included: exported, but exit 1; the stated strategy's errors --best set aside are not
    errors = [d for d in diags if d.is_error and d not in aside]
    aside = aside if exported is not None else []
    if as_json:
        doc: dict[str, Any] = {"file": file, "to": str(args.to),
                               "strategy": est.strategy.to_json() if est is not None else None,
                               "text": exported.text if exported else None,
                               "args": list(exported.args) if exported else []}
        doc["diagnostics"] = [d.to_json() for d in diags]
        doc["set_aside"] = sorted({d.code for d in aside})
        write_json(out, doc)
    else:
        for d in diags:
            err.write(format_line(d, file) + "\n")
        note = set_aside_note(aside)
        if note:
            err.write(f"hp-plan export: {note}\n")
        if exported is not None:
            out.write(exported.text)
    return 0 if exported is not None and not errors else 1
