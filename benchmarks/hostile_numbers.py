"""Hostile numbers, writers' inputs and output errors: wall time and peak RSS of `hp-plan` on each, one fresh
process per case (run by benchmarks/hostile_inputs.py with `--numbers`, and after its other groups).

Groups and targets (every case must end within its time limit, under its memory limit, without HP900):
  * divisor searches: heads 1e11 with 7 kv heads (check); heads = kv = 2^24 with tp 3 (estimate) .... < 5 s
  * experts: 1e18 experts (search, explain --best, compare --best, export --best); 2^24 experts (search)
  * explain: a global batch of 2^30 (explain, explain --json, --svg); --width 10,000,000 ..... < 10 s, < 400 MB
  * out-of-range values: 2^64 layers, a 400-digit width (estimate, explain) ............... HP110, < 5 s
  * calibration inputs: a 128 MiB torchtitan log (calibrate) ................................. < 400 MB RSS
    and a log with tps 0, a peak of 0, a 1e308 s step, tps 1e-300 (a 1.6e304 s step) (calibrate) ....... HP803
    4 MB of blank lines (bare \r, or white space) before the steps ........................................ < 5 s
    64 MiB of junk lines (`x`) before the steps ....................................................... < 20 s
    a step figure past 64 K characters into its line (read whole); a 9 MiB line (skipped, HP814) .......... < 5 s
    1,000 runs (MAX_RUNS) under --rule step / compute / parts, of one config and of 1,000 ............... < 60 s
  * profiler traces (.json.gz, calibrate): one event holding a 64 MiB string (65 KB of gzip) .... HP820, < 10 s
    4 M tiny kernel events (0.7 MB of gzip) ............................................ < 60 s, < 600 MB
    128 MiB of blanks between two events (130 KB of gzip) ........................................ < 30 s
  * output: stdout closed, /dev/full, a reader gone (check) ............................ exit 1, no traceback

`--root DIR` runs another checkout's engine (e.g. an extracted older commit) for before/after figures; a
case that passes its time limit is killed and shown as `> N s`.
Run: `.venv/bin/python benchmarks/hostile_numbers.py [--root DIR]`.
"""

from __future__ import annotations

import argparse
import gzip
import os
import re
import resource
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TextIO

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PLAN = os.path.join(ROOT, "examples", "explain", "1f1b.yaml")
DEEPSEEK = os.path.join(ROOT, "examples", "deepseek-v3")


@dataclass(frozen=True)
class Case:
    group: str
    name: str
    make: Callable[[str], list[str]]  # folder -> hp-plan arguments (files written into the folder)
    limit_s: float
    limit_mb: float | None = None
    stdout: str = "capture"  # capture | closed | full | gone


def _read(path: str) -> str:
    with open(path) as fh:
        return fh.read()


def _plan(folder: str, *subs: tuple[str, str]) -> str:
    text = _read(PLAN)
    for old, new in subs:
        text = text.replace(old, new)
    path = os.path.join(folder, "t.yaml")
    with open(path, "w") as fh:
        fh.write(text)
    return path


def _experts(folder: str, n: str) -> str:
    train = _read(os.path.join(DEEPSEEK, "train.yaml")).replace(
        "  torch_dtype: bfloat16\n", f"  torch_dtype: bfloat16\n  config_overrides:\n    num_experts: {n}\n")
    with open(os.path.join(folder, "train.yaml"), "w") as fh:
        fh.write(train)
    search = _read(os.path.join(DEEPSEEK, "search.yaml")).replace("ep: [8, 16, 32, 64]", "ep: auto")
    path = os.path.join(folder, "search.yaml")
    with open(path, "w") as fh:
        fh.write(search)
    return path


def _runs(folder: str, log_text: str | None = None, log_bytes: int = 0) -> str:
    sys.path.insert(0, ROOT)
    from pathlib import Path

    from tests.support.configs import stated_config

    stated_config(Path(folder), "a.yaml")
    log = os.path.join(folder, "train.log")
    with open(log, "w") as fh:
        if log_text is not None:
            fh.write(log_text)
        line = "step: {i}  loss: 7.9410  memory: 40.40GiB(86.73%)  tps: 5,762  tflops: 316.2  mfu: 31.97%\n"
        i = 0
        while fh.tell() < log_bytes:
            fh.write("".join(line.format(i=i + k) for k in range(2000)))
            i += 2000
    path = os.path.join(folder, "runs.yaml")
    with open(path, "w") as fh:
        fh.write("runs:\n  - config: a.yaml\n    log: train.log\n")
    return path


def _trace_runs(folder: str, write: Callable[[TextIO], None]) -> str:
    """A RUNS file of one run profiled by `t.json.gz`, its text written by `write`."""
    sys.path.insert(0, ROOT)
    from pathlib import Path

    from tests.support.configs import stated_config

    stated_config(Path(folder), "a.yaml")
    with gzip.open(os.path.join(folder, "t.json.gz"), "wt", compresslevel=6) as fh:
        write(fh)
    path = os.path.join(folder, "runs.yaml")
    with open(path, "w") as fh:
        fh.write("runs:\n  - config: a.yaml\n    trace: t.json.gz\n")
    return path


STEP = '{"ph":"X","cat":"user_annotation","name":"ProfilerStep#1","ts":0,"dur":2400000,"pid":"h"}'
TINY = ',{"ph":"X","cat":"kernel","name":"k","ts":1,"dur":1,"pid":0}'


def _huge_string(fh: TextIO) -> None:
    """One event whose name is 64 MiB: each 1 MiB read decoded the value again from its start (quadratic)."""
    fh.write('{"traceEvents":[{"ph":"X","cat":"kernel","ts":1,"dur":1,"pid":0,"name":"')
    for _ in range(64):
        fh.write("a" * (1 << 20))
    fh.write('"}]}')


def _tiny_events(fh: TextIO) -> None:
    """4 M kernel events of 60 bytes in one step: a tuple, two list slots and a dict call each (~1 GB, 30 s)."""
    fh.write('{"traceEvents":[' + STEP)
    for _ in range(400):
        fh.write(TINY * 10_000)
    fh.write("]}")


def _blanks(fh: TextIO) -> None:
    """128 MiB of blanks between two events: skipped a Python step per character (17 s)."""
    fh.write('{"traceEvents":[' + STEP)
    for _ in range(128):
        fh.write(" \n" * (1 << 19))
    fh.write(TINY + "]}")


def _many_runs(folder: str, n: int, configs: int = 1) -> str:
    """A RUNS file of `n` runs over `configs` copies of one stated config, the step times 0.01% apart."""
    sys.path.insert(0, ROOT)
    from pathlib import Path

    from tests.support.configs import stated_config

    text = stated_config(Path(folder), "a.yaml").read_text()
    for k in range(1, configs):
        with open(os.path.join(folder, f"a{k}.yaml"), "w") as fh:
            fh.write(text)
    path = os.path.join(folder, "runs.yaml")
    with open(path, "w") as fh:
        fh.write("runs:\n" + "".join(f"  - config: a{i % configs or ''}.yaml\n    step_time_s: {2.4 + 1e-4 * i:.4f}\n"
                                     for i in range(n)))
    return path


HEADS = ("num_attention_heads: 32", "num_attention_heads: 100000000000")
GBS = (("global_batch_size: 16", "global_batch_size: 1073741824"), ("  micro_batch_num: 8\n", ""))
BEST = ("--best",)


def _tt(tps: str, mem: str) -> str:
    return "".join(f"step: {i}  memory: {mem}GiB(50%)  tps: {tps}\n" for i in range(1, 7))


CASES: tuple[Case, ...] = (
    Case("divisors", "heads 1e11, kv 7: check", lambda d: ["check", _plan(d, HEADS, (
        "num_key_value_heads: 8", "num_key_value_heads: 7"))], 20),
    Case("divisors", "heads=kv=2^24, tp 3: estimate", lambda d: ["estimate", _plan(d, (
        "num_attention_heads: 32", "num_attention_heads: 16777216"), ("num_key_value_heads: 8",
        "num_key_value_heads: 16777216"), ("  tp: 2", "  tp: 3"))], 20),
    Case("experts", "1e18 experts: search", lambda d: ["search", _experts(d, "1000000000000000000")], 20),
    Case("experts", "1e18 experts: explain --best", lambda d: ["explain", _experts(d, "1" + "0" * 18), *BEST], 20),
    Case("experts", "1e18 experts: compare --best", lambda d: ["compare", _experts(d, "1" + "0" * 18), *BEST], 20),
    Case("experts", "1e18 experts: export --best", lambda d: ["export", _experts(d, "1" + "0" * 18), *BEST, "--to",
                                                              "megatron"], 20),
    Case("experts", "2^24 experts: search", lambda d: ["search", _experts(d, "16777216"), "--top", "1"], 120),
    Case("explain", "batch 2^30: explain", lambda d: ["explain", _plan(d, *GBS)], 20, 1500),
    Case("explain", "batch 2^30: explain --json", lambda d: ["explain", _plan(d, *GBS), "--json"], 20, 1500),
    Case("explain", "batch 2^30: explain --svg", lambda d: ["explain", _plan(d, *GBS), "--svg",
                                                             os.path.join(d, "t.svg")], 20, 1500),
    Case("explain", "--width 10,000,000", lambda d: ["explain", PLAN, "--width", "10000000"], 20, 1500),
    Case("range", "2^64 layers: estimate", lambda d: ["estimate", _plan(d, (
        "num_hidden_layers: 32", "num_hidden_layers: 18446744073709551616"))], 20),
    Case("range", "400-digit width: explain", lambda d: ["explain", _plan(d, (
        "hidden_size: 4096", "hidden_size: " + "9" * 400))], 20),
    Case("calibrate", "128 MiB log: calibrate", lambda d: ["calibrate", _runs(d, log_bytes=128 << 20)], 120, 3000),
    Case("calibrate", "log tps 0: calibrate", lambda d: ["calibrate", _runs(d, _tt("0", "40"))], 20),
    Case("calibrate", "log peak 0: calibrate", lambda d: ["calibrate", _runs(d, _tt("5000", "0"))], 20),
    Case("calibrate", "log 1e308 s step", lambda d: ["calibrate", _runs(d, "step_time_s\n1e308\n1e308\n1e308\n")],
         20),
    # a quote opened and never closed: each line was joined to the row so far and scanned again (quadratic: 9,000
    # lines took 14 s, a Megatron log with such a banner line 49 s)
    Case("calibrate", "CSV quote never closed", lambda d: ["calibrate", _runs(
        d, "step_time_s,note\n1.0,\"open\n" + "1.0,x\n" * 200_000)], 20),
    Case("calibrate", "log banner with an open quote", lambda d: ["calibrate", _runs(d, "note,\"unclosed\n" + "x,1\n" * 200_000
                                                                                   + _tt("5000", "40"))], 20),
    Case("trace", "event with a 64 MiB string", lambda d: ["calibrate", _trace_runs(d, _huge_string)], 10),
    Case("trace", "4 M tiny events", lambda d: ["calibrate", _trace_runs(d, _tiny_events)], 60, 600),
    Case("trace", "128 MiB of blanks", lambda d: ["calibrate", _trace_runs(d, _blanks)], 30),
    Case("calibrate", "log tps 1e-300: calibrate", lambda d: ["calibrate", _runs(d, _tt("1e-300", "40"))], 20),
    # blank lines: 1.8 us each through every format's matching (4 MB of bare \r took 7 s, the 512 MiB limit ~15 min)
    Case("calibrate", "4 MB of bare \\r, then steps", lambda d: ["calibrate", _runs(d, "\r" * 4_000_000
                                                                                 + _tt("5000", "40"))], 20),
    Case("calibrate", "4 MB of blank-space lines", lambda d: ["calibrate", _runs(d, "  \n" * 1_400_000
                                                                            + _tt("5000", "40"))], 20),
    # junk lines: ~0.6 us each through every format's matching (32 MiB of `x` lines took 10.5 s, the 512 MiB limit
    # ~3 minutes); dropped by C code once no format reads every line (Sieve)
    Case("calibrate", "64 MiB of junk lines, then steps", lambda d: ["calibrate", _runs(d, "x\n" * (32 << 20)
                                                                                     + _tt("5000", "40"))], 20),
    # lines were cut at 64 K characters: a step cell straddling the cut read 2.457 as 2.0, silently
    Case("calibrate", "CSV step cell past 64 K chars", lambda d: ["calibrate", _runs(
        d, "note,step_time_s\n" + ("y" * (64 * 1024 - 3) + ",2.457\n") * 30)], 20),
    Case("calibrate", "a 9 MiB line, then steps", lambda d: ["calibrate", _runs(d, "x" * (9 << 20) + "\n"
                                                                              + _tt("5000", "40"))], 20),
    # leave-one-out refitted every run once per run under step / compute: 1,000 runs took 20-31 s
    Case("calibrate", "1,000 runs: --rule step", lambda d: ["calibrate", _many_runs(d, 1000), "--rule", "step"], 60),
    Case("calibrate", "1,000 runs: --rule compute", lambda d: ["calibrate", _many_runs(d, 1000), "--rule",
                                                                "compute"], 60),
    Case("calibrate", "1,000 runs: --rule parts", lambda d: ["calibrate", _many_runs(d, 1000)], 60),
    Case("calibrate", "1,000 runs, 1,000 configs: step", lambda d: ["calibrate", _many_runs(d, 1000, 1000), "--rule",
                                                                     "step"], 60),
    Case("output", "stdout closed: check", lambda d: ["check", PLAN], 20, stdout="closed"),
    Case("output", "stdout /dev/full: check", lambda d: ["check", PLAN], 20, stdout="full"),
    Case("output", "reader gone: search --json", lambda d: ["search", PLAN, "--json"], 20, stdout="gone"),
)


def _stdout(kind: str) -> tuple[int | None, list[int]]:
    """The child's stdout for `kind` and the descriptors to close after the start."""
    if kind == "full":
        fd = os.open("/dev/full", os.O_WRONLY)
        return fd, [fd]
    if kind == "gone":
        r, w = os.pipe()
        os.close(r)
        return w, [w]
    return (subprocess.PIPE if kind == "capture" else None), []


def run(case: Case, root: str) -> dict[str, object]:
    """One case in a fresh process: wall seconds, peak RSS (MB), exit code and the codes it printed."""
    with tempfile.TemporaryDirectory(prefix="hp-numbers-") as folder:
        args = case.make(folder)
        env = {**os.environ, "PYTHONPATH": root, "PYTHONDONTWRITEBYTECODE": "1"}
        out, close = _stdout(case.stdout)
        kwargs: dict[str, object] = {"stdout": out} if case.stdout != "closed" else {"pass_fds": ()}
        pre = (lambda: os.close(1)) if case.stdout == "closed" else None
        t0 = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "engine.cli", *args], cwd=folder, env=env,
                                stderr=subprocess.PIPE, preexec_fn=pre, start_new_session=True,
                                **kwargs)  # type: ignore[call-overload]
        for fd in close:
            os.close(fd)
        killed = False
        try:
            stdout, stderr = proc.communicate(timeout=case.limit_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            stdout, stderr = proc.communicate()
            killed = True
        wall = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # the largest child so far (see main)
    text = (stdout or b"").decode(errors="replace") + stderr.decode(errors="replace")
    codes = sorted(set(re.findall(r"\bHP\d{3}\b", text)))
    return {"wall_s": wall, "rss_mb": rss, "rc": proc.returncode, "killed": killed, "codes": codes,
            "traceback": "Traceback" in text, "first": stderr.decode(errors="replace").strip()[:70]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", default=ROOT, help="the checkout whose engine runs (default: this one)")
    ap.add_argument("--group", help="only this group")
    ap.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:  # one case per process, so RUSAGE_CHILDREN is that case's own peak
        print(repr(run(CASES[args.child], args.root)))
        return 0
    print(f"{'group':<10}{'case':<34}{'wall s':>9}{'RSS MB':>9}{'exit':>6}  codes / stderr")
    ok = True
    for i, case in enumerate(CASES):
        if args.group and case.group != args.group:
            continue
        proc = subprocess.run([sys.executable, __file__, "--child", str(i), "--root", args.root],
                              capture_output=True, text=True, timeout=900)
        r = eval(proc.stdout) if proc.returncode == 0 else {"wall_s": 0, "rss_mb": 0, "rc": None, "killed": False,
                                                             "codes": [], "traceback": True,
                                                             "first": proc.stderr[-70:]}
        wall = f"> {case.limit_s:g}" if r["killed"] else f"{r['wall_s']:.2f}"
        met = not r["killed"] and not r["traceback"] and "HP900" not in r["codes"] and (
            case.limit_mb is None or r["rss_mb"] < case.limit_mb)
        ok &= met
        shown = ",".join(r["codes"]) or r["first"]
        print(f"{case.group:<10}{case.name:<34}{wall:>9}{r['rss_mb']:>9.0f}{r['rc']!s:>6}  {shown}"
              f"{'' if met else '  MISS'}{'  (traceback)' if r['traceback'] else ''}")
    print(f"load average: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
