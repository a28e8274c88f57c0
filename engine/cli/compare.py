"""`hp-plan compare FILE_A [FILE_B | --best] [--json] [--tokens N] [cluster flags]` (docs/formats.md §7).

Two complete plans on the same model and cluster: two files, or --best (FILE_A's stated plan, or for a search
config its train.yaml's, against the best the search finds on the same model, cluster and budget). Text: the
terms side by side with the difference, the speedup, the error band. `--json`: the docs/formats.md §7 `compare` object plus
`file`. Exit 0 when both plans are priced, 1 when either cannot be or they train different things, 2 usage.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from dataclasses import replace
from typing import Any, TextIO

from engine.config.types import Config
from engine.diagnostics import Diagnostic, has_errors
from engine.results import Estimate


def _load(path: str, args: argparse.Namespace) -> tuple[Config | None, list[Diagnostic]]:
    from engine.check import check_file
    from engine.cli.plan_flags import cluster_overrides, ratios_request

    loaded = check_file(path, overrides=cluster_overrides(args), ratios=ratios_request(args))
    return loaded.config, list(loaded.diagnostics)


def _of_file_b(diags: Iterable[Diagnostic], file_b: str | None) -> list[Diagnostic]:
    """FILE_B's findings named as FILE_B's (`Diagnostic.file`): printed and written under FILE_A's name they
    pointed at lines FILE_A does not have. FILE_A's keep the document's own `file`."""
    return [d if d.file or not file_b else replace(d, file=file_b) for d in diags]


def _stated_plan(config: Config) -> tuple[Estimate | None, tuple[Diagnostic, ...]]:
    """The plan the files state, found by the one rule `hp-plan search` and the server use
    (engine.search.stated.stated_source: its own, or a search config's train.yaml read on the search
    config's cluster and budget), priced with the validation `estimate_config` gives a stated plan."""
    from engine.cost.strategy_rules import estimate_config
    from engine.search.stated import stated_source

    source = stated_source(config)
    if source is not None and source is not config:
        config = replace(config, stated=source.stated)
    return estimate_config(config)


def _plan(config: Config | None, *, best: bool) -> tuple[Estimate | None, tuple[Diagnostic, ...]]:
    from engine.explain import pick_plan

    if config is None:
        return None, ()
    return pick_plan(config, best=True) if best else pick_plan(config)


def _same(a: Config, b: Config, ea: Estimate, eb: Estimate) -> list[Diagnostic]:
    out = []
    if a.model != b.model:
        out.append(Diagnostic("HP754", "the two files describe different models; compare prices plans of one model"))
    if a.cluster != b.cluster:
        out.append(Diagnostic("HP754", "the two files describe different clusters; compare prices plans on one "
                              "cluster (the cluster flags apply to both)"))
    if ea.strategy.global_batch_size != eb.strategy.global_batch_size:
        out.append(Diagnostic("HP754", f"the plans train different global batch sizes ({ea.strategy.global_batch_size}"
                              f" and {eb.strategy.global_batch_size}); tokens/s compare only at the same one"))
    return out


def _render(cmp: Any, out: TextIO, ttt: tuple[Any, Any] | None) -> None:
    a, b = cmp.a, cmp.b
    out.write(f"a: {a.short()}\nb: {b.short()}\n\n")
    rows = [("term", "a", "b", "b - a")]
    for d in cmp.terms:
        rows.append((d.term, f"{d.a:.4g}", f"{d.b:.4g}", f"{d.delta:+.4g}"))
    widths = [max(len(r[c]) for r in rows) for c in range(4)]
    for j, r in enumerate(rows):
        out.write("  " + "  ".join([r[0].ljust(widths[0])] + [r[c].rjust(widths[c]) for c in (1, 2, 3)]) + "\n")
        if j == 0:
            out.write("  " + "  ".join("-" * w for w in widths) + "\n")
    out.write(f"\nspeedup (tokens/s, b over a, same global batch {a.strategy.global_batch_size}): "
              f"{cmp.speedup:.3f}×  ({'inside' if cmp.within_error else 'outside'} the model's error band)\n")
    if cmp.differences:
        out.write("what makes the difference: " + ", ".join(
            f"{d.term.split('.')[-1]} {d.delta:+.3g}{' s' if d.term.startswith('time') else ' GiB'}"
            for d in cmp.differences[:4]) + "\n")
    if ttt is not None:
        out.write(f"time to train a: {ttt[0].line()}\ntime to train b: {ttt[1].line()}\n")


def run(args: argparse.Namespace, *, stdout: TextIO | None = None) -> int:
    """Entry point used by engine.cli.main for `compare`."""
    from engine.cli.check import format_line
    from engine.explain.compare import compare
    from engine.explain.tokens import time_to_train
    from engine.jsonout import write_json

    out = stdout or sys.stdout
    file = str(args.file)
    best = bool(getattr(args, "best", False))
    file_b = getattr(args, "file_b", None)
    as_json = bool(getattr(args, "json", False))
    if (file_b is None) == (not best):
        msg = "hp-plan compare: give FILE_B or --best (one of the two)"
        if as_json:
            write_json(out, {"file": file, "error": msg, "diagnostics": []})
        print(msg, file=sys.stderr)
        return 2
    ca, diags = _load(file, args)
    cb, more = (ca, []) if best else _load(str(file_b), args)
    diags += _of_file_b(more, file_b)
    ea = eb = None
    if ca is not None and cb is not None and not has_errors(tuple(diags)):
        ea, da = _stated_plan(ca) if best else _plan(ca, best=False)
        eb, db = _plan(cb, best=True) if best else _plan(cb, best=False)
        diags += [d for d in (*da, *(db if best else _of_file_b(db, file_b))) if d not in diags]
    cmp = None
    if ea is not None and eb is not None and ca is not None and cb is not None:
        diags += _same(ca, cb, ea, eb)
        if not any(d.code == "HP754" for d in diags):
            cmp = compare(ea, eb, moe=bool(ca.model and ca.model.is_moe), diagnostics=())
            diags += list(cmp.diagnostics)
    ttt = None
    tokens = getattr(args, "tokens", None)
    if cmp is not None and tokens and ca is not None and ca.model is not None:
        ttt = (time_to_train(cmp.a, tokens, ca.model.seq_len), time_to_train(cmp.b, tokens, ca.model.seq_len))
    if as_json:
        doc: dict[str, Any] = {"file": file, "file_b": file_b}
        if cmp is not None:
            doc.update(cmp.to_json())
        else:
            doc.update({"a": ea.to_json() if ea else None, "b": eb.to_json() if eb else None, "speedup": None,
                        "within_error": None, "differences": []})
        doc["diagnostics"] = [d.to_json() for d in diags]
        if ttt is not None:
            doc["time_to_train"] = {"a": ttt[0].to_json(), "b": ttt[1].to_json()}
        write_json(out, doc)
    else:
        for d in diags:
            out.write(format_line(d, d.file or file) + "\n")
        if cmp is not None:
            if diags:
                out.write("\n")
            _render(cmp, out, ttt)
    return 0 if cmp is not None else 1
