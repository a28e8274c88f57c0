"""CLI start-up: wall and CPU time of `hp-plan check` and `hp-plan search` on the bundled examples.

D-016's targets (2-core machine): `hp-plan check` on an example <= 120 ms wall, `hp-plan search` on the 70B
example <= 200 ms wall. Each command runs as the user runs it (the venv's console script, a fresh process),
once to warm the file cache and write the bytecode caches a normal install writes on first use
(PYTHONDONTWRITEBYTECODE is dropped from the children's environment), then REPEAT times. CPU time is the
child's user + system time: the machine is shared, and wall time stretches under load while CPU time does not.
`--importtime` also prints each command's import budget (`python -X importtime` self times, the least of five
runs): the standard library with site, PyYAML, numpy and the engine, and the engine's costliest modules.
Run: `.venv/bin/python benchmarks/cli_speed.py [--repeat N] [--importtime]`.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HP_PLAN = os.path.join(os.path.dirname(sys.executable), "hp-plan")
CASES = (
    ("hp-plan check examples/llama3-70b/search.yaml", ["check", "examples/llama3-70b/search.yaml"], 0.120),
    ("hp-plan check examples/deepseek-v3/train.yaml", ["check", "examples/deepseek-v3/train.yaml"], 0.120),
    ("hp-plan search examples/llama3-70b/search.yaml", ["search", "examples/llama3-70b/search.yaml"], 0.200),
)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def time_command(args: list[str], repeat: int) -> tuple[list[float], list[float]]:
    """(wall seconds, child CPU seconds) of `repeat` runs of hp-plan ARGS, after one warm-up run."""
    env = _env()
    subprocess.run([HP_PLAN, *args], cwd=ROOT, env=env, capture_output=True, check=False)
    walls, cpus = [], []
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run([HP_PLAN, *args], cwd=ROOT, env=env, capture_output=True, check=False)
        walls.append(time.perf_counter() - t0)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return walls, cpus


def importtime(args: list[str], runs: int = 5) -> dict[str, int]:
    """Each module's self import time (µs, `python -X importtime`), the least over `runs` runs of hp-plan ARGS
    (the least is the figure load does not inflate)."""
    best: dict[str, int] = {}
    for _ in range(runs):
        proc = subprocess.run([sys.executable, "-X", "importtime", HP_PLAN, *args], cwd=ROOT, env=_env(),
                              capture_output=True, text=True, check=False)
        for line in proc.stderr.splitlines():
            parts = line.split("|")
            self_us = parts[0].rsplit(":", 1)[-1].strip()
            if len(parts) == 3 and self_us.isdigit():
                name = parts[2].strip()
                best[name] = min(best.get(name, int(self_us)), int(self_us))
    return best


def budget(best: dict[str, int], top: int = 8) -> list[str]:
    """The import budget: totals for the standard library (site included), PyYAML, numpy and the engine, then
    the engine's `top` costliest modules."""
    groups: dict[str, int] = {}
    for name, us in best.items():
        root = name.split(".")[0]
        key = root if root in ("yaml", "numpy", "engine") else "stdlib + site"
        groups[key] = groups.get(key, 0) + us
    lines = [f"    imports {sum(best.values()) / 1000:.1f} ms (self times, least of 5 runs): "
             + ", ".join(f"{k} {v / 1000:.1f}" for k, v in sorted(groups.items(), key=lambda kv: -kv[1]))]
    engine = sorted(((us, n) for n, us in best.items() if n.split(".")[0] == "engine"), reverse=True)[:top]
    lines.append("    engine's costliest: " + ", ".join(f"{n} {us / 1000:.1f}" for us, n in engine))
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--importtime", action="store_true", help="print each command's import budget")
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (wall times stretch under load; CPU "
          "time does not)")
    print(f"{'command':<50} {'median':>8} {'min':>8} {'cpu':>8} {'target':>7}")
    worst = 0
    for title, argv, target in CASES:
        walls, cpus = time_command(argv, args.repeat)
        med = statistics.median(walls)
        flag = "ok" if med <= target else "ok (cpu)" if statistics.median(cpus) <= target else "SLOW"
        worst |= flag == "SLOW"
        print(f"{title:<50} {med * 1000:>6.0f}ms {min(walls) * 1000:>6.0f}ms {statistics.median(cpus) * 1000:>6.0f}ms "
              f"{target * 1000:>5.0f}ms {flag}")
        if args.importtime:
            print("\n".join(budget(importtime(argv))))
    return int(worst)


if __name__ == "__main__":
    raise SystemExit(main())
