"""`hp-plan apply FILE [-o OUT | --in-place] [--dry-run] [--json] [cluster flags]` (docs/formats.md §3).

Search FILE (a train.yaml, or a search config and the train.yaml it names), then write the best strategy
into that train.yaml with round-trip edits (engine.edit.plan_edits): comments, key order, quoting and
layout stay byte-identical, only the changed tokens and the missing keys differ.

Where the result goes:
* default: the edited train.yaml on stdout (nothing on disk changes);
* `-o OUT`: written to OUT; `--in-place`: the train.yaml itself is replaced (atomically); symlinks are
  written through, read-only files and anything but a regular file are refused, mode, owner and hard links
  are kept, a new file follows the umask (engine.files.write_text, docs/files.md);
* `--dry-run`: a unified diff on stdout, nothing written (whatever else is asked);
* `--json`: one JSON document (best estimate, changed keys, edits, the diff or new text, diagnostics).
The summary (best strategy, what changed, where it went) goes to stderr, so stdout stays the file or diff.

Errors in the input block apply, except errors on the strategy keys of the train.yaml (a tp that does not
divide the heads, an FSDP shard that does not divide dp*cp): the search ignores the stated degrees, and
writing its strategy is the repair. Nothing is written unless the edited text reads back as the strategy
twice, by the edit module's own PyYAML read-back (batch rule included) and by the project's reader
(engine.check) on the strategy's device count, without an error on a strategy key or any new error.
When the files state a plan, stderr first says `stated … → best …` with the gain in tokens/s
(engine.search.gain); if the stated plan fits and the gain is below HP611's threshold (1 + the two plans'
error band, engine.cost.band.pair_spread: about 1.08× for Megatron on A100) nothing is rewritten unless `--force`.
Exit codes: 0 written (or nothing to change, or a gain below the threshold), 1 errors in the input, no strategy fits or the edit was
refused, 2 usage.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TextIO

from engine.cli.check import format_line
from engine.config.types import ClusterOverrides, Config
from engine.diagnostics import Diagnostic
from engine.document import DEFAULT_MAX_BYTES
from engine.edit import EditResult, plan_edits
from engine.edit.strategy_keys import blocking, repairable
from engine.files import ReadFailure, read_bounded, same_file, write_text
from engine.jsonout import write_json
from engine.results import Estimate, SearchResult
from engine.search.written import written_plan
from engine.specs import PipelineLayout, Strategy


@dataclass(frozen=True, slots=True)
class Planned:
    """The edit of one train.yaml, checked: `error` is the reason nothing may be written."""

    path: str
    old_text: str
    result: EditResult
    error: str | None = None
    notes: tuple[str, ...] = ()


def _read_text(path: str) -> str:
    """The train.yaml's text through the bounded reader (regular files only, size checked first); raises
    OSError with the reason. Decoding bytes keeps CRLF line breaks as they are, so the edits (and the
    written file) keep them too."""
    got = read_bounded(path, DEFAULT_MAX_BYTES)
    if isinstance(got, ReadFailure):
        raise OSError(got.reason)
    return got.data.decode("utf-8")


def _with_world(overrides: ClusterOverrides | None, world: int) -> ClusterOverrides:
    """The user's cluster flags with the strategy's device count, so the re-read derives the same dp."""
    base = overrides or ClusterOverrides()
    return dataclasses.replace(base, devices=world, num_nodes=None, explicit=True)




def reader_mismatch(path: str, new_text: str, strategy: Strategy, overrides: ClusterOverrides | None,
                    old_errors: set[tuple[str, str]], layout: PipelineLayout | None = None
                    ) -> tuple[str | None, tuple[str, ...]]:
    """Re-read the edited train.yaml with the project's reader (engine.check) on the strategy's device count:
    (the first field that differs from `strategy`, an error on a strategy key, or an error the edit
    introduced; None when it reads back clean; notes)."""
    from engine.check import check_file

    loaded = check_file(path, text=new_text, overrides=_with_world(overrides, strategy.world_size))
    new_errors = [d for d in loaded.diagnostics if d.is_error and (
        (d.code, d.message) not in old_errors or repairable(d, path, path))]
    if new_errors:
        d = new_errors[0]
        return f"the edited file has an error the original had not: {d.code} {d.message}", ()
    stated = loaded.config.stated if loaded.config is not None else None
    if stated is None:
        return None, ("the project's reader derives no complete strategy from the edited file (only the edit's "
                      "own read-back checked it)",)
    want, got = strategy.to_json(), stated.to_json()
    for key, value in want.items():
        if got.get(key) != value:
            return f"the edited file reads back {key} = {got.get(key)!r}, not {value!r}", ()
    if layout is not None and loaded.config is not None and loaded.config.run.pipeline_layout != layout:
        return "the edited file does not read back the pipeline layout the plan needs", ()
    return None, ()


def plan(path: str, best: Estimate, overrides: ClusterOverrides | None = None, text: str | None = None) -> Planned:
    """Edits writing the priced plan `best` into the train.yaml at `path` (or `text` standing for it), both
    checks done: its strategy with the recompute modules and the pipeline layout the search chose for it
    (engine.edit.plan_edits, as the editor writes a plan), read back by the project's reader on the trainer's
    strategy (offloaded layers written off: [HP] §8.6, the trainer runs no offload)."""
    from engine.check import check_file

    strategy = best.strategy.for_trainer()
    try:
        old = _read_text(path) if text is None else text
    except (OSError, UnicodeDecodeError) as e:
        reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        return Planned(path, "", EditResult.refused("", reason), f"cannot read {path}: {reason}")
    result = plan_edits(old, best, path=path)
    if not result.ok:
        return Planned(path, old, result, result.error)
    if not result.edits:
        return Planned(path, old, result)
    before = check_file(path, text=old, overrides=_with_world(overrides, strategy.world_size))
    problem, notes = reader_mismatch(path, result.new_text, strategy, overrides,
                                     {(d.code, d.message) for d in before.diagnostics if d.is_error},
                                     best.pipeline_layout)
    return Planned(path, old, result, f"{path}: {problem}" if problem else None, notes)


def _shown(path: str) -> str:
    """The path as a diff header shows it: relative to the working directory when below it."""
    rel = os.path.relpath(path) if os.path.isabs(path) else path
    return path if rel.startswith("..") else rel


def unified_diff(path: str, old: str, new: str) -> str:
    path = _shown(path)
    lines = difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                 fromfile=f"a/{path}", tofile=f"b/{path}")
    out = []
    for line in lines:
        out.append(line if line.endswith(("\n", "\r")) else line + "\n\\ No newline at end of file\n")
    return "".join(out)


def _show(value: Any) -> str:
    if value is None:
        return "(absent)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_show(v)}" for k, v in value.items()) + "}"
    if isinstance(value, str) and any(c in value for c in "\r\n"):
        return repr(value)  # a block scalar's `8\n`: one line per changed key
    return str(value)


def describe(res: EditResult) -> list[str]:
    """One line per changed key: `accelerator.tp_size: 8 -> 4`; the batch as HyperParallel's writer logs it
    ([HP] §4.5)."""
    lines = []
    for path, before, after in res.values:
        if path.endswith("global_batch_size") and before is not None and after is not None:
            lines.append(f"{path}: {before} in the train yaml, {after} in the search: writing the searched value")
        elif after is None:
            lines.append(f"{path}: {_show(before)} -> (removed)")
        else:
            lines.append(f"{path}: {_show(before)} -> {_show(after)}")
    return lines


def refuse(message: str, doc: dict[str, Any], diagnostics: list[Diagnostic], *, file: str, as_json: bool,
           out: TextIO, err: TextIO) -> int:
    """Nothing is written: the JSON document (its "error" set), or the diagnostics and the reason on stderr."""
    if as_json:
        write_json(out, doc)
    else:
        for d in diagnostics:
            err.write(format_line(d, file) + "\n")
        err.write(f"hp-plan apply: nothing written: {message}\n")
    return 1


def emit(planned: Planned, *, output: str | None, in_place: bool, dry_run: bool, as_json: bool,
         best: Estimate | None, file: str, diagnostics: list[Diagnostic], out: TextIO, err: TextIO,
         read: tuple[str, ...] = ()) -> int:
    """Write or print the planned edit as the flags ask; returns the exit code. `read`: the files the check read
    (Loaded.files: the train.yaml, the ratios file), which the output never replaces but for the train.yaml edited
    in place."""
    res = planned.result
    doc: dict[str, Any] = {
        "file": file,
        "train_yaml": planned.path,
        "best": best.to_json() if best is not None else None,
        "strategy": (best.strategy.to_json() if best is not None else None),
        "changed": list(res.changed),
        "changes": [{"path": p, "before": b, "after": a} for p, b, a in res.values],
        "edits": [{"range": e.range.to_json(), "newText": e.new_text} for e in res.edits],
        "written": None,
        "error": planned.error,
        "diagnostics": [d.to_json() for d in diagnostics],
    }
    if planned.error:
        return refuse(planned.error, doc, diagnostics, file=file, as_json=as_json, out=out, err=err)
    offload = best.offload_note() if best is not None else None  # Megatron's --cpu-offloading-num-layers route
    doc["notes"] = [*planned.notes, *([offload] if offload else [])]
    for note in doc["notes"]:
        err.write(f"hp-plan apply: note: {note}\n")
    target = planned.path if in_place else output
    if not as_json:
        for line in describe(res):
            err.write(f"  {line}\n")
    summary = f"{len(res.changed)} key{'s' if len(res.changed) != 1 else ''} changed"
    if dry_run:
        diff = unified_diff(planned.path, planned.old_text, res.new_text)
        doc["diff"] = diff
        if as_json:
            write_json(out, doc)
        else:
            out.write(diff)
            err.write(f"hp-plan apply: dry run, nothing written: {summary}\n")
        return 0
    if target is None:
        doc["new_text"] = res.new_text
        if as_json:
            write_json(out, doc)
        else:
            out.write(res.new_text)
            err.write(f"hp-plan apply: {summary}; printed (use -o OUT or --in-place to write it)\n")
        return 0
    if in_place and not res.edits:
        if as_json:
            write_json(out, doc)
        else:
            err.write(f"hp-plan apply: {planned.path} already states the best strategy; nothing written\n")
        return 0
    # What was read and edited must still be there: a save meanwhile is refused, not overwritten (a lost update).
    same = in_place or same_file(target, planned.path)
    # the search config and the ratios files read: never the output (the train.yaml edited is, with -i)
    others = tuple(p for p in (file, *read) if not same_file(p, planned.path))
    failed = write_text(target, res.new_text, expected=planned.old_text if same else None, inputs=others)
    if failed is not None:
        doc["error"] = failed.reason
        if as_json:
            write_json(out, doc)
        else:
            err.write(f"hp-plan apply: {doc['error']}\n")
        return 1
    doc["written"] = target
    if as_json:
        write_json(out, doc)
    else:
        err.write(f"hp-plan apply: wrote {target}: {summary}\n")
    return 0


def below_threshold(config: Config, best: Estimate, *, force: bool, as_json: bool, out: TextIO, err: TextIO,
                    file: str, diagnostics: list[Diagnostic]) -> int | None:
    """Print stated → best with the gain in tokens/s (engine.search.gain); when the stated plan fits and the
    gain is below Gain.threshold (the error band's threshold HP611 itself uses) and `force` is off, nothing is
    rewritten: returns the exit code (0) after saying so. None: go on and write."""
    from engine.search import stated_estimate
    from engine.search.gain import describe, gain

    stated = stated_estimate(config)
    if stated is None or stated.strategy == best.strategy:  # the same plan: the edit is empty, emit says so
        return None
    g = gain(stated, best)
    if not as_json:
        err.write(f"hp-plan apply: {describe(stated, best)}\n")
    if not stated.fits or g.worth_it or force:
        return None
    if as_json:
        write_json(out, {"file": file, "train_yaml": None, "best": best.to_json(), "strategy": None,
                         "stated": stated.to_json(), "gain": g.ratio, "threshold": g.threshold,
                         "changed": [], "edits": [], "written": None, "error": None,
                         "diagnostics": [d.to_json() for d in diagnostics if not d.is_error]})
    else:
        err.write(f"hp-plan apply: nothing written: the gain {g.ratio:.2f}× is below the {g.threshold:.2f}× "
                  "threshold (the cost model's error band for these two plans); use --force to rewrite anyway\n")
    return 0


def run(args: argparse.Namespace, *, stdout: TextIO | None = None, stderr: TextIO | None = None,
        search_fn: Callable[..., SearchResult] | None = None) -> int:
    """Run `hp-plan apply` on parsed arguments (file, output, in_place, dry_run, json, cluster flags)."""
    from engine.check import check_file
    from engine.cli.plan_flags import cluster_overrides, ratios_request

    out = stdout or sys.stdout
    err = stderr or sys.stderr
    file = str(args.file)
    as_json = bool(getattr(args, "json", False))
    output = getattr(args, "output", None)
    in_place = bool(getattr(args, "in_place", False))
    dry_run = bool(getattr(args, "dry_run", False))
    overrides = cluster_overrides(args)

    def fail(message: str, diags: list[Diagnostic], best: Estimate | None = None) -> int:
        doc = {"file": file, "train_yaml": None, "best": best.to_json() if best else None, "strategy": None,
               "changed": [], "edits": [], "written": None, "error": message,
               "diagnostics": [d.to_json() for d in diags]}
        return refuse(message, doc, diags, file=file, as_json=as_json, out=out, err=err)

    loaded = check_file(file, overrides=overrides, ratios=ratios_request(args))
    diags = list(loaded.diagnostics)
    config = loaded.config
    if config is None:
        return fail(f"{file} cannot be read", diags)
    train_path = file if config.kind == "train" else config.train_yaml
    if train_path is None:
        return fail(f"{file} names no train_yaml, so there is no train.yaml to write the strategy into", diags)
    stops = blocking(diags, config, file)
    if stops:
        # name the file that holds them: the train.yaml a search config reads carries its own errors (`d.file`)
        where = sorted({d.file or file for d in stops})
        return fail(f"{' and '.join(where)} {'has' if len(where) == 1 else 'have'} errors apply cannot repair (it "
                    "rewrites only the strategy keys)", diags)
    from engine.search import search

    # The text the edit starts from, read before the search: a save that lands while the search runs is then
    # found at the write (engine.files' lost-update check), not silently overwritten.
    try:
        snapshot: str | None = _read_text(train_path)
    except (OSError, UnicodeDecodeError):
        snapshot = None  # plan() reads again and says why it cannot
    result = (search_fn or search)(config, top=1)
    diags += list(result.diagnostics)
    if result.best is None:
        return fail("no strategy fits" if result.evaluated else "the search could not run (see above)", diags)
    # The plan the trainer runs as written (engine.search.written): the best, unless it offloads what no key states.
    written = written_plan(config, result, lambda c: (search_fn or search)(c, top=1))
    b = written.estimate
    if b is None:
        return fail(written.why or "no strategy fits", diags, result.best)
    held = below_threshold(config, b, force=bool(getattr(args, "force", False)), as_json=as_json,
                           out=out, err=err, file=file, diagnostics=diags)
    if held is not None:
        return held
    planned = plan(train_path, b, overrides, text=snapshot)
    if written.why:
        planned = dataclasses.replace(planned, notes=(written.why, *planned.notes))
    notes = [d for d in diags if not d.is_error]
    if not as_json:
        err.write(f"hp-plan apply: best {b.short()}: step {b.step_time_s:.3f} s, "
                  f"peak {b.peak_memory_gib:.1f} GiB of {b.budget_gib:.1f}, MFU {b.mfu:.1%}; {b.calibration_note()}\n")
    return emit(planned, output=output, in_place=in_place, dry_run=dry_run, as_json=as_json, best=b,
                file=file, diagnostics=notes if not planned.error else diags, out=out, err=err,
                read=loaded.files)
