"""`hp-plan calibrate` refuses a measurement no run can have, at its line, and writes nothing: a peak of 0,
-5 or NaN (it halved every later memory estimate), a step of 0 ms, `tps: 0` (HP900), a 1e308-second step
(HP900), a 1e-300 s step or peak (fitted). Logs are streamed in bounded memory and read once per change
(engine.calibrate.logs)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.calibrate import logs
from tests.support.cli import ROOT, hp_plan


def _strict(text: str) -> dict:
    def refuse(name: str) -> None:
        raise ValueError(f"not strict JSON: {name}")

    return json.loads(text, parse_constant=refuse)


def torchtitan(tps: str, memory: str, n: int = 6) -> str:
    return "".join(f"step: {i}  loss: 7.9  memory: {memory}GiB(50%)  tps: {tps}\n" for i in range(1, n + 1))


def megatron(ms: str, reserved: str = "40000.0") -> str:
    rows = [f" iteration {i}/ 100 | elapsed time per iteration (ms): {ms} |\n" for i in range(1, 7)]
    return "".join(rows) + f"[Rank 0] (after 5 iterations) memory (MB) | max reserved: {reserved}\n"


LOGS = {
    "peak_zero": ("t.log", torchtitan("5000", "0"), "peak memory (GiB) must be a positive finite number, got 0",
                  1),
    "peak_huge": ("t.log", torchtitan("5000", "9" * 400), "peak memory (GiB) must be a positive finite number, "
                  "got inf", 1),
    "tps_zero": ("t.log", torchtitan("0", "40"), "tokens/s per device must be a positive finite number, got 0", 1),
    "step_zero_ms": ("m.log", megatron("0.0"), "step time (s) must be a positive finite number, got 0", 1),
    "reserved_zero": ("m.log", megatron("2500.0", "0.0"), "peak memory (GiB) must be a positive finite number", 7),
    "csv_peak_negative": ("c.csv", "step,step_time_ms,peak_memory_gib\n1,2000,-5\n2,2000,40\n3,2000,40\n",
                          "CSV row 2: peak memory (GiB) must be a positive finite number, got -5", 2),
    "csv_peak_nan": ("c.csv", "step,step_time_ms,peak_memory_gib\n1,2000,40\n2,2000,nan\n3,2000,40\n",
                     "CSV row 3: peak memory (GiB) must be a positive finite number, got nan", 3),
    "csv_step_1e308": ("c.csv", "step_time_s\n1e308\n1e308\n1e308\n",
                       "CSV row 2: step time (s) 1e+308 is beyond any run (at most 1e+06)", 2),
    # under any run: a step under a microsecond, a peak under about a mebibyte (a 1e-300 s step was fitted)
    "csv_step_1e-300": ("c.csv", "step_time_s\n1e-300\n1e-300\n1e-300\n",
                        "CSV row 2: step time (s) 1e-300 is below any run (at least 1e-06)", 2),
    "peak_tiny": ("t.log", torchtitan("5000", "0.0001"), "peak memory (GiB) 0.0001 is below any run (at least 0.001)",
                  1),
}


@pytest.mark.parametrize("case", sorted(LOGS))
def test_an_impossible_log_value_is_refused_at_its_line_and_nothing_is_written(runs_dir: Path, case: str) -> None:
    name, text, message, line = LOGS[case]
    (runs_dir / name).write_text(text)
    runs = runs_dir / "runs.yaml"
    runs.write_text(f"runs:\n  - config: a.yaml\n    log: {name}\n")
    out = runs_dir / "ratios.yaml"
    r = hp_plan("calibrate", str(runs), "-o", str(out), "--json", timeout=120)
    assert r.returncode == 1, r.stdout + r.stderr
    doc = _strict(r.stdout)
    (d,) = [d for d in doc["diagnostics"] if d["severity"] == "error"]
    assert d["code"] == "HP803" and message in d["message"] and f"(log line {line})" in d["message"], d
    assert d["range"]["start"]["line"] == 2  # at the run's `log:` value in the RUNS file
    assert doc["written"] is None and not out.exists()


@pytest.mark.parametrize("entry, message", [
    ("step_time_s: 0", "runs.0.step_time_s must be >= 1e-06, got 0"),
    ("step_time_s: 1.0e-300", "runs.0.step_time_s must be >= 1e-06, got 1e-300"),  # no step is under 1 µs
    ("step_time_s: 1.0e+308", "runs.0.step_time_s must be at most 1e+06, got 1e+308"),
    ("peak_memory_gib: -5", "runs.0.peak_memory_gib must be >= 0.001, got -5"),
    ("peak_memory_gib: 1.0e-300", "runs.0.peak_memory_gib must be >= 0.001, got 1e-300"),  # nor a peak under 1 MiB
    ("peak_memory_gib: .nan", "runs.0.peak_memory_gib must be a number"),
    ("tokens_per_s_per_device: 0", "runs.0.tokens_per_s_per_device must be > 0, got 0"),
])
def test_an_impossible_runs_value_is_refused_at_the_value(runs_dir: Path, entry: str, message: str) -> None:
    measured = "" if entry.startswith(("step", "tokens")) else "    step_time_s: 2.5\n"
    runs = runs_dir / "runs.yaml"
    runs.write_text(f"runs:\n  - config: a.yaml\n{measured}    {entry}\n")
    out = runs_dir / "ratios.yaml"
    r = hp_plan("calibrate", str(runs), "-o", str(out), timeout=120)
    assert r.returncode == 1 and message in r.stdout, r.stdout + r.stderr
    assert "HP900" not in r.stdout and not out.exists()


def test_a_log_is_read_once_per_change(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "train.log"
    log.write_text(torchtitan("5000", "40"))
    reads: list[str] = []
    real = logs.stream_lines
    monkeypatch.setattr(logs, "stream_lines", lambda fd, path, *a: reads.append(path) or real(fd, path, *a))
    first = logs.read_log(str(log))
    assert logs.read_log(str(log)) == first and len(reads) == 1  # unchanged: not read again
    log.write_text(torchtitan("6000", "40"))
    os.utime(log, ns=(1, 1))  # a new size and mtime: read again
    assert logs.read_log(str(log)).steady.value == pytest.approx(6000) and len(reads) == 2
    log.write_text(torchtitan("0", "40"))
    for _ in range(2):  # a refused log is kept as refused
        with pytest.raises(logs.LogError):
            logs.read_log(str(log))
    assert len(reads) == 3


def test_a_64_mib_log_is_read_in_bounded_memory(tmp_path: Path) -> None:
    """Read whole, a log took ~18x its size (a 128 MiB log peaked at 2.3 GB); streamed, memory grows with the
    steps kept (two machine numbers each), not with the text."""
    log = tmp_path / "big.log"
    line = "step: {i}  loss: 7.9410  memory: 82.40GiB(86.73%)  tps: 5,762  tflops: 316.2  mfu: 31.97%  " + "x" * 60
    with log.open("w") as fh:
        i = 0
        while fh.tell() < 64 << 20:
            fh.write("".join(line.format(i=i + k) + "\n" for k in range(1000)))
            i += 1000
    probe = ("import resource, sys\nfrom engine.calibrate.logs import read_log\nbase = resource.getrusage("
             "resource.RUSAGE_SELF).ru_maxrss\nr = read_log(sys.argv[1])\nprint(r.steady.used, (resource.getrusage("
             "resource.RUSAGE_SELF).ru_maxrss - base) // 1024)")
    out = subprocess.run([sys.executable, "-c", probe, str(log)], capture_output=True, text=True, cwd=ROOT,
                         timeout=300, check=True).stdout.split()
    used, grew_mib = int(out[0]), int(out[1])
    assert used > 300_000
    assert grew_mib < 64, f"reading a 64 MiB log grew the process by {grew_mib} MiB"
