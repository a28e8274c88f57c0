"""Does calibrating on one run improve the prediction of the other runs of the same stack?

    .venv/bin/python benchmarks/calibration.py            # the step rule (the default of hp-plan calibrate)
    .venv/bin/python benchmarks/calibration.py --rule compute

Runs: the six published runs of [CAL] §10 (benchmarks/calibration_runs/ or the [CAL] data folder, measured figure
from each `expected.json`) and the Megatron cases of [CAL] §1-§5 (benchmarks/cases/*.yaml, published
step from each file's header, written by benchmarks/accuracy.py). A stack is (framework, device type) as the
configs price them (engine.calibrate.stack). For every stack with two or more runs and every run in it as the
anchor: a RUNS file naming the anchor is calibrated through `engine.calibrate.result.calibrate` (the code
`hp-plan calibrate` runs), the ratios file written, and every other run of the stack priced with it through
`engine.check.check_file(..., ratios=...)` + `estimate_config` (the code `hp-plan estimate --ratios` runs).

Printed per stack: median |e| of the other runs uncalibrated and calibrated, over all (anchor, target) pairs,
and the worst anchor; e = (predicted − measured) / measured of the step time.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from engine.calibrate.attach import RatiosRequest  # noqa: E402
from engine.calibrate.fit import DEFAULT_RULE, RULES  # noqa: E402
from engine.calibrate.result import calibrate  # noqa: E402
from engine.calibrate.stack import stack_of  # noqa: E402
from engine.check import check_file  # noqa: E402
from engine.cost import estimate_config  # noqa: E402

RUNS_DIR = ROOT / "benchmarks" / "calibration_runs"  # the [CAL] §10 runs, copied as published
CASES_DIR = ROOT / "benchmarks" / "cases"
_PUBLISHED = re.compile(r"published step ([0-9.]+) s")


@dataclass(frozen=True)
class Run:
    id: str
    config: Path
    step_time_s: float


def _measured_step(folder: Path) -> float | None:
    exp = json.loads((folder / "expected.json").read_text())
    if exp.get("step_time_s"):
        return float(exp["step_time_s"])
    tps = exp.get("tokens_per_s_per_device")
    if tps:
        return float(exp["global_batch_size"]) * float(exp["seq_len"]) / (float(exp["devices"]) * float(tps))
    return None


def published_runs() -> list[Run]:
    """Every run with a measured step time: §10's folders, then the committed Megatron cases."""
    out: list[Run] = []
    for folder in sorted(RUNS_DIR.iterdir()) if RUNS_DIR.is_dir() else []:
        step = _measured_step(folder)
        if step is not None:
            out.append(Run(folder.name, folder / "search.yaml", step))
    for path in sorted(CASES_DIR.glob("*.yaml")):
        m = _PUBLISHED.search(path.read_text().splitlines()[0])
        if m:
            out.append(Run(path.stem, path, float(m.group(1))))
    return out


def _price(config: Path, ratios: Path | None) -> tuple[float | None, tuple[str, str]]:
    req = RatiosRequest(str(ratios), "benchmark", explicit=True) if ratios is not None else None
    loaded = check_file(str(config), ratios=req)
    if loaded.config is None:
        return None, ("", "")
    est, _ = estimate_config(loaded.config)
    return (est.step_time_s if est is not None else None), stack_of(loaded.config)


def _calibrate_on(run: Run, folder: Path, rule: str) -> Path | None:
    runs = folder / f"{run.id}.runs.yaml"
    runs.write_text(f"runs:\n  - config: {run.config}\n    step_time_s: {run.step_time_s!r}\n")
    cal = calibrate(str(runs), rule=rule)
    if not cal.ok:
        return None
    out = folder / f"{run.id}.ratios.yaml"
    out.write_text(cal.ratios_text())
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rule", choices=RULES, default=DEFAULT_RULE)
    args = ap.parse_args(argv)
    stacks: dict[tuple[str, str], list[tuple[Run, float]]] = {}
    for run in published_runs():
        pred, stack = _price(run.config, None)
        if pred is not None:
            stacks.setdefault(stack, []).append((run, pred))
    print(f"rule: {args.rule}; e = (predicted - measured) / measured of the step time; anchors calibrate, "
          "targets are the other runs of the same framework and device type\n")
    head = f"{'stack':<22} {'runs':>4}  {'uncal med|e|':>12} {'calib med|e|':>12}  {'worst anchor':>12}  per anchor"
    print(head)
    print("-" * len(head))
    all_u: list[float] = []
    all_c: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        for (framework, device), runs in sorted(stacks.items()):
            if len(runs) < 2:
                print(f"{framework + ' / ' + device:<22} {len(runs):>4}  (one run: nothing to predict)")
                continue
            pairs_u: list[float] = []
            pairs_c: list[float] = []
            per_anchor: list[str] = []
            worst = 0.0
            for anchor, _ in runs:
                ratios = _calibrate_on(anchor, Path(tmp), args.rule)
                if ratios is None:
                    per_anchor.append(f"{anchor.id}: not calibrated")
                    continue
                eu, ec = [], []
                for target, uncal in runs:
                    if target is anchor:
                        continue
                    cal, _ = _price(target.config, ratios)
                    if cal is None:
                        continue
                    eu.append(abs(uncal / target.step_time_s - 1))
                    ec.append(abs(cal / target.step_time_s - 1))
                pairs_u += eu
                pairs_c += ec
                mc = statistics.median(ec)
                worst = max(worst, mc)
                per_anchor.append(f"{anchor.id} {100 * statistics.median(eu):.0f}->{100 * mc:.0f}%")
            all_u += pairs_u
            all_c += pairs_c
            mu, mc = statistics.median(pairs_u), statistics.median(pairs_c)
            shown = "; ".join(per_anchor) if len(per_anchor) <= 3 else "; ".join(per_anchor[:3]) + "; ..."
            print(f"{framework + ' / ' + device:<22} {len(runs):>4}  {100 * mu:>11.1f}% {100 * mc:>11.1f}%  "
                  f"{100 * worst:>11.1f}%  {shown}")
    if all_u:
        print(f"\nall pairs: median |e| uncalibrated {100 * statistics.median(all_u):.1f}% -> calibrated "
              f"{100 * statistics.median(all_c):.1f}% over {len(all_c)} (anchor, target) pairs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
