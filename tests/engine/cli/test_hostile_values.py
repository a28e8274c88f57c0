"""Values that made check/estimate/search fail with HP900 (D-001): an explicit tag the trainer's
loader cannot construct (`tp_size: !!timestamp 5`) and a 28-digit degree. Each is now a positioned
diagnostic, never an internal error; run through the CLI in a subprocess."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.cli import ROOT, hp_plan

LLAMA = ROOT / "examples" / "llama3-70b"
HUGE = "1234567890123456789012345678"


def folder(tmp_path: Path, train_sub: tuple[str, str] | None = None, search_sub: tuple[str, str] | None = None) -> Path:
    train = (LLAMA / "train.yaml").read_text()
    search = (LLAMA / "search.yaml").read_text()
    if train_sub:
        train = train.replace(*train_sub)
    if search_sub:
        search = search.replace(*search_sub)
    (tmp_path / "train.yaml").write_text(train)
    (tmp_path / "search.yaml").write_text(search)
    return tmp_path


@pytest.mark.parametrize("command", ["check", "estimate", "search"])
@pytest.mark.parametrize("value", ["!!timestamp 5", "!!int eight", "!!bool maybe", "!!float x"])
def test_an_impossible_explicit_tag_is_hp007_not_hp900(tmp_path: Path, command: str, value: str) -> None:
    f = folder(tmp_path, train_sub=("tp_size: 8", f"tp_size: {value}"))
    r = hp_plan(command, str(f / "search.yaml"))
    assert "HP900" not in r.stdout + r.stderr and "Traceback" not in r.stderr, r.stdout + r.stderr
    line = next(ln for ln in r.stdout.splitlines() if "HP007" in ln)
    assert "train.yaml:17:12:" in line and "safe_load" in line


def test_a_valid_explicit_tag_is_fine(tmp_path: Path) -> None:
    f = folder(tmp_path, train_sub=("tp_size: 8", "tp_size: !!int 8"))
    r = hp_plan("check", str(f / "search.yaml"))
    assert r.returncode == 0 and "HP007" not in r.stdout, r.stdout


@pytest.mark.parametrize("command", ["check", "estimate", "search"])
@pytest.mark.parametrize("where", ["search", "train"])
def test_a_28_digit_degree_is_a_diagnostic_not_hp900(tmp_path: Path, command: str, where: str) -> None:
    if where == "search":
        f = folder(tmp_path, search_sub=("pp: auto", f"pp: {HUGE}"))
        r = hp_plan(command, str(f / "search.yaml"))
    else:  # the train.yaml alone, its cluster from the flags
        f = folder(tmp_path, train_sub=("pp_size: 4", f"pp_size: {HUGE}"))
        r = hp_plan(command, str(f / "train.yaml"), "--devices", "64", "--device-type", "H100")
    assert "HP900" not in r.stdout + r.stderr and "Traceback" not in r.stderr, r.stdout + r.stderr
    assert r.returncode == 1 and " error HP" in r.stdout
