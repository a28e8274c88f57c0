"""Tabs libyaml accepts but the trainer's loader (PyYAML's pure-Python safe_load) refuses (D-003):
`hp-plan check` passed them, so `apply` could write a file HyperParallel cannot load. Now an HP001 error at
the tab; tabs inside quoted strings and comments, which both loaders take, stay fine."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from engine.check import check_file

ROOT = Path(__file__).resolve().parents[3]
TRAIN = (ROOT / "examples" / "llama3-70b" / "train.yaml").read_text()


@pytest.mark.parametrize("old,new", [("tp_size: 8", "tp_size: 8\t# c"), ("mode: full", "mode:\tfull"),
                                     ("tp_size: 8", "tp_size: 8\t"), ("tp_size: 8", "tp_size:  \t8")])
def test_tabs_the_trainer_refuses_are_errors_at_the_tab(old: str, new: str) -> None:
    text = TRAIN.replace(old, new)
    with pytest.raises(yaml.YAMLError):
        yaml.safe_load(text)  # the trainer's loader
    loaded = check_file("/nowhere/train.yaml", text=text)
    errors = [d for d in loaded.diagnostics if d.code == "HP001"]
    assert errors and "tab" in errors[0].message
    line = next(i for i, ln in enumerate(text.split("\n")) if new in ln)
    tab = text.split("\n")[line].index("\t")
    assert (errors[0].range.start.line, errors[0].range.start.character) == (line, tab)


@pytest.mark.parametrize("old,new", [("name: llama3-70b", 'name: "llama\t3"'), ("# This is", "# This\tis")])
def test_tabs_both_loaders_accept_stay_fine(old: str, new: str) -> None:
    text = TRAIN.replace(old, new)
    yaml.safe_load(text)
    assert not [d for d in check_file("/nowhere/train.yaml", text=text).diagnostics if d.code == "HP001"]


def test_hp_plan_check_fails_on_a_tab_the_trainer_refuses(tmp_path: Path) -> None:
    (tmp_path / "train.yaml").write_text(TRAIN.replace("mode: full", "mode:\tfull"))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-m", "engine.cli", "check", str(tmp_path / "train.yaml")],
                       capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 1 and "HP001" in r.stdout and "safe_load" in r.stdout, r.stdout
