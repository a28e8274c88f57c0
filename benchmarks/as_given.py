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
sys.path.insert(0, str(ROOT))

from accuracy import RUNS_DIR, estimate_json  # noqa: E402  (benchmarks/ is the script's own folder)

from engine.cost import constants as K  # noqa: E402

CANDIDATES = (ROOT.parent / "shared" / "reference" / "calibration_runs",
              ROOT.parent.parent / "shared" / "reference" / "calibration_runs")


def _errors(doc: dict[str, Any], expected: dict[str, Any]) -> tuple[float | None, float | None]:
    """Signed step and peak errors of one estimate; the peak less what the allocator does not count
    (RESERVED_GIB), as benchmarks/accuracy.py compares it."""
    tps = expected.get("tokens_per_s_per_device")
    step = expected.get("step_time_s") or (
        expected["global_batch_size"] * expected["seq_len"] / (expected["devices"] * tps) if tps else None)
    peak = expected.get("peak_memory_gib")
    if "step_time_s" not in doc:
        return None, None
    step_e = doc["step_time_s"] / step - 1 if step else None
    peak_e = (doc["peak_memory_gib"] - K.RESERVED_GIB) / peak - 1 if peak else None
    return step_e, peak_e


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:+.1f}%"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", type=Path, help="the reference's calibration_runs folder")
    args = ap.parse_args(argv)
    given = next((d for d in ([args.dir] if args.dir else list(CANDIDATES)) if d is not None and d.is_dir()), None)
    if given is None:
        print("skipped: no ../shared/reference/calibration_runs folder next to the repository (give --dir)")
        return 0
    print(f"{'run':<50} {'step: given':>11} {'ours':>7}  {'peak: given':>11} {'ours':>7}  release unstated (HP536)")
    for folder in sorted(p for p in given.iterdir() if (p / "search.yaml").is_file()):
        expected = json.loads((folder / "expected.json").read_text())
        as_given = estimate_json(folder / "search.yaml")
        ours = estimate_json(RUNS_DIR / folder.name / "search.yaml") if (RUNS_DIR / folder.name).is_dir() else {}
        g_step, g_peak = _errors(as_given, expected)
        o_step, o_peak = _errors(ours, expected) if ours else (None, None)
        said = next((d["message"].split("error band: ", 1)[-1].split(". State", 1)[0]
                     for d in as_given.get("diagnostics", []) if d["code"] == "HP536"), "")
        print(f"{folder.name:<50} {_pct(g_step):>11} {_pct(o_step):>7}  {_pct(g_peak):>11} {_pct(o_peak):>7}  "
              f"{said[:150]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
