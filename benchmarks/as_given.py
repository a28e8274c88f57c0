"""The shown runs priced from their files as the reference gives them, beside this repository's copies.

`benchmarks/calibration_runs/` holds the runs of [CAL] §10-§12 with what their recipes and releases ran stated
in their search configs (the release, FP8 parameters, gradient width, overlaps), each with its source. The
reference's own files (`../shared/reference/calibration_runs/`) state less: they are what a run looks like when
it is written from a public table row. A held-out row written that way is priced from the stacks' defaults and
the current release, so this prints, per run, the signed step and peak errors both ways and what the estimate
says of the unstated release (HP536: the older releases that move a figure beyond its band). The reference
folder is not part of the repository: the benchmark skips with a message when it is absent.

    .venv/bin/python benchmarks/as_given.py [--dir DIR]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]  # the engine, and accuracy.py beside this script

from accuracy import RUNS_DIR, estimate_json, expected_step, peak_error  # noqa: E402

CANDIDATES = (ROOT.parent / "shared" / "reference" / "calibration_runs",
              ROOT.parent.parent / "shared" / "reference" / "calibration_runs")


def errors(doc: dict[str, Any], expected: dict[str, Any]) -> tuple[str, str]:
    """The signed step and peak errors of one estimate as printed: "-" where the run published none, "NOT
    PRICED" where the estimate has no figures (its diagnostics say why)."""
    if "step_time_s" not in doc:
        return "NOT PRICED", "NOT PRICED"
    step, peak = expected_step(expected), expected.get("peak_memory_gib")
    return (_pct(doc["step_time_s"] / step - 1 if step else None),
            _pct(peak_error(doc["peak_memory_gib"], peak) if peak else None))


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:+.1f}%"


def unstated_release(doc: dict[str, Any]) -> str:
    """What HP536 found, from its data: each older release's figures that moved, against the current price."""
    data = next((d.get("data") or {} for d in doc.get("diagnostics", []) if d["code"] == "HP536"), None)
    if data is None:
        return ""
    step, peak = doc["step_time_s"], doc["peak_memory_gib"]
    moves = [(p["since"], p["step_time_s"] / step - 1, p["peak_memory_gib"] / peak - 1) for p in data.get("prices", [])]
    return "; ".join(f"before {since}: step {100 * ds:+.0f}%, peak {100 * dp:+.0f}%"
                     for since, ds, dp in moves if max(abs(ds), abs(dp)) >= 0.005)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", type=Path, help="the reference's calibration_runs folder")
    args = ap.parse_args(argv)
    if args.dir is not None and not args.dir.is_dir():
        ap.error(f"--dir {args.dir}: no such folder")
    given = args.dir or next((d for d in CANDIDATES if d.is_dir()), None)
    if given is None:
        print("skipped: no ../shared/reference/calibration_runs folder next to the repository (give --dir)")
        return 0
    print(f"{'run':<50} {'step: given':>11} {'ours':>7}  {'peak: given':>11} {'ours':>7}  release unstated (HP536)")
    for folder in sorted(p for p in given.iterdir() if (p / "search.yaml").is_file()):
        if not (folder / "expected.json").is_file():
            print(f"{folder.name:<50} no expected.json: nothing to compare")
            continue
        expected = json.loads((folder / "expected.json").read_text())
        as_given = estimate_json(folder / "search.yaml")
        g_step, g_peak = errors(as_given, expected)
        o_step, o_peak = (errors(estimate_json(RUNS_DIR / folder.name / "search.yaml"), expected)
                          if (RUNS_DIR / folder.name / "search.yaml").is_file() else ("-", "-"))
        print(f"{folder.name:<50} {g_step:>11} {o_step:>7}  {g_peak:>11} {o_peak:>7}  {unstated_release(as_given)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
