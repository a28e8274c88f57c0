"""CLI start-up: wall and CPU time of `hp-plan check` and `hp-plan search` on the bundled examples.

Issue 16 targets (2-core machine): `hp-plan check` on an example <= 120 ms wall, `hp-plan search` on the 70B
example <= 200 ms wall. Each command runs as the user runs it (the venv's console script, a fresh process),
once to warm the file cache and write the bytecode caches a normal install writes on first use
(PYTHONDONTWRITEBYTECODE is dropped from the children's environment), then REPEAT times. CPU time is the
child's user + system time: the machine is shared, and wall time stretches under load while CPU time does not.
`--importtime` also prints the modules whose imports cost most (`python -X importtime`, cumulative), to see
what a command loads.
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


def importtime(args: list[str], top: int = 12) -> list[tuple[int, str]]:
    """The `top` imports with the largest cumulative time (µs) of one run of hp-plan ARGS."""
    proc = subprocess.run([sys.executable, "-X", "importtime", HP_PLAN, *args], cwd=ROOT, env=_env(),
                          capture_output=True, text=True, check=False)
    rows = []
    for line in proc.stderr.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[1].strip().isdigit():
            rows.append((int(parts[1]), parts[2].rstrip()))
    return sorted(rows, reverse=True)[:top]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--importtime", action="store_true", help="print each command's costliest imports")
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
            for us, name in importtime(argv):
                print(f"    {us / 1000:>7.1f} ms  {name}")
    return int(worst)


if __name__ == "__main__":
    raise SystemExit(main())
