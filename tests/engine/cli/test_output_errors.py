"""`hp-plan` when its output cannot be written or it is interrupted: stdout closed (`>&-`), full (/dev/full),
or gone (`| head -1`) ends the command with exit 1 and at most one line on stderr, and Ctrl-C exits 130; never a
traceback. Every --json document is strict JSON (engine.jsonout): parsed here with a parser that refuses
NaN and Infinity."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.jsonout import dumps
from tests.support.cli import ROOT, hp_plan

PLAN = ROOT / "examples" / "explain" / "1f1b.yaml"
SEARCH = ROOT / "examples" / "llama3-70b" / "search.yaml"
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def _shell(command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["sh", "-c", command], capture_output=True, text=True, cwd=ROOT, env=ENV, timeout=300)


CLI = f"{sys.executable} -m engine.cli"


@pytest.mark.parametrize("args", [f"check {PLAN}", f"estimate {PLAN} --json", f"explain {PLAN}", "--help",
                                  "--version"])
@pytest.mark.parametrize("redirect, reason", [(">&-", "standard output is closed"),
                                              ("> /dev/full", "No space left on device")])
def test_unwritable_stdout_is_one_line_and_exit_1(args: str, redirect: str, reason: str) -> None:
    r = _shell(f"{CLI} {args} {redirect}")
    assert r.returncode == 1, r.stderr
    assert r.stderr == f"hp-plan: cannot write the output: {reason}\n"


@pytest.mark.parametrize("args", [["check", str(PLAN)], ["search", str(PLAN), "--json"], ["--help"]])
def test_a_reader_that_went_away_is_no_news(args: list[str]) -> None:
    """`| head -1`: the pipe's reader is gone (closed here before the command writes, so every write fails
    with EPIPE): exit 1, nothing on stderr."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        r = subprocess.run([sys.executable, "-m", "engine.cli", *args], stdout=write_end, stderr=subprocess.PIPE,
                           text=True, cwd=ROOT, env=ENV, timeout=300)
    finally:
        os.close(write_end)
    assert (r.returncode, r.stderr) == (1, "")


def _wait_for_numpy(pid: int) -> None:
    """Until the process has loaded numpy (the search command is under way), as its memory map shows."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with open(f"/proc/{pid}/maps") as fh:
            if "_multiarray_umath" in fh.read():
                return
        time.sleep(0.01)


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="needs /proc")
def test_ctrl_c_during_a_command_exits_130_without_a_traceback() -> None:
    for delay in (0.0, 0.2, 0.6):
        proc = subprocess.Popen([sys.executable, "-m", "engine.cli", "search", str(SEARCH)], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, cwd=ROOT, env=ENV)
        _wait_for_numpy(proc.pid)
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
        assert proc.returncode in (130, -signal.SIGINT, 0), err  # 0: it finished first
        assert b"Traceback" not in err and b"KeyboardInterrupt" not in err, err


def test_importing_the_cli_leaves_the_callers_ctrl_c_alone() -> None:
    probe = "import signal\nimport engine.cli\nprint(signal.getsignal(signal.SIGINT) is signal.default_int_handler)"
    r = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=ROOT, env=ENV, timeout=60)
    assert r.stdout.strip() == "True"


def _strict(text: str) -> object:
    def refuse(name: str) -> None:
        raise ValueError(f"not strict JSON: {name}")

    return json.loads(text, parse_constant=refuse)


def test_dumps_writes_non_finite_numbers_as_null() -> None:
    doc = {"budget_gib": float("inf"), "rows": [(1.0, float("nan")), {"x": -float("inf")}], "n": 3}
    assert _strict(dumps(doc)) == {"budget_gib": None, "rows": [[1.0, None], {"x": None}], "n": 3}


@pytest.mark.parametrize("args", [["check", str(PLAN)], ["estimate", str(PLAN)], ["explain", str(PLAN)],
                                  ["search", str(PLAN)], ["compare", str(PLAN), "--best"],
                                  ["estimate", str(PLAN), "--tokens", "1e18"], ["apply", str(PLAN), "--dry-run"]])
def test_every_json_document_is_strict(args: list[str]) -> None:
    r = hp_plan(*args, "--json", timeout=300)
    assert r.returncode in (0, 1), r.stderr
    _strict(r.stdout)


def test_calibrate_json_is_strict_for_a_log_with_an_infinite_peak(tmp_path: Path) -> None:
    from tests.support.configs import stated_config

    stated_config(tmp_path, "a.yaml")
    (tmp_path / "t.log").write_text("".join(f"step: {i}  memory: {'9' * 400}GiB(50%)  tps: 5000\n"
                                            for i in range(1, 7)))
    (tmp_path / "runs.yaml").write_text("runs:\n  - config: a.yaml\n    log: t.log\n")
    r = hp_plan("calibrate", str(tmp_path / "runs.yaml"), "--json", timeout=120)
    doc = _strict(r.stdout)
    assert r.returncode == 1 and isinstance(doc, dict) and doc["diagnostics"][0]["code"] == "HP803"
