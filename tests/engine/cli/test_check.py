"""`hp-plan check` end to end, in a subprocess: the console script when installed, else `python -m engine.cli`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import ROOT
from tests.support.cli import hp_plan as hp_plan_module
from tests.support.cli import hp_plan_script as hp_plan

CORPUS = ROOT / "tests" / "corpus"
LLAMA = ROOT / "examples" / "llama3-70b"


def test_clean_example_exits_zero() -> None:
    r = hp_plan("check", str(LLAMA / "search.yaml"))
    assert r.returncode == 0, r.stdout + r.stderr
    # the one note: the train.yaml's gradient clipping is read by HyperParallel and not priced (HP112)
    assert r.stdout.strip().endswith("0 errors, 0 warnings, 1 note")
    assert "HP112" in r.stdout and "training.max_grad_norm" in r.stdout
    assert "Traceback" not in r.stderr


def test_compiler_style_lines_are_one_based() -> None:
    path = str(CORPUS / "typo_tp_sise.yaml")
    r = hp_plan("check", path)
    assert r.returncode == 1
    assert f"{path}:4:3: error HP101: unknown key 'tp_sise' in accelerator; did you mean 'tp_size'?" in r.stdout
    assert "1 error" in r.stdout.splitlines()[-1]


def test_json_is_zero_based_and_complete() -> None:
    path = str(CORPUS / "typo_tp_sise.yaml")
    r = hp_plan_module("check", path, "--json")
    assert r.returncode == 1
    doc = json.loads(r.stdout)
    assert doc["file"] == path
    (d,) = [d for d in doc["diagnostics"] if d["code"] == "HP101"]
    assert d["severity"] == "error" and d["path"] == "accelerator.tp_sise"
    assert d["range"] == {"start": {"line": 3, "character": 2}, "end": {"line": 3, "character": 9}}
    assert d["data"]["replace_key"] == "tp_size"


def test_diagnostics_in_the_referenced_train_yaml_name_their_file(tmp_path: Path) -> None:
    (tmp_path / "train.yaml").write_text("model:\n  pretrained_model_name_or_path: meta-llama/Llama-3.1-8B\n"
                                         "accelerator:\n  tp_size: 3\n")
    s = tmp_path / "search.yaml"
    s.write_text("train_yaml: ./train.yaml\ncluster: {num_nodes: 1, device_type: H100}\n")
    r = hp_plan("check", str(s))
    assert r.returncode == 1
    assert f"{tmp_path / 'train.yaml'}:4:12: error HP403:" in r.stdout
    doc = json.loads(hp_plan("check", str(s), "--json").stdout)
    (d,) = [d for d in doc["diagnostics"] if d["code"] == "HP403"]
    assert d["file"] == str(tmp_path / "train.yaml")


@pytest.mark.parametrize("name", ["binary.yaml", "latin1.yaml", "alias_bomb.yaml", "python_tag.yaml", "tabs.yaml"])
def test_hostile_inputs_never_trace(name: str) -> None:
    r = hp_plan("check", str(CORPUS / name))
    assert r.returncode == 1
    assert "Traceback" not in r.stdout + r.stderr
    doc = json.loads(hp_plan("check", str(CORPUS / name), "--json").stdout)
    assert doc["diagnostics"] and all(d["code"] != "HP900" for d in doc["diagnostics"])


def test_missing_file() -> None:
    r = hp_plan("check", "no/such/file.yaml", "--json")
    assert r.returncode == 1
    doc = json.loads(r.stdout)
    assert [d["code"] for d in doc["diagnostics"]] == ["HP004"]


def test_cluster_flags_win_over_the_file() -> None:
    r = hp_plan("check", str(LLAMA / "train.yaml"), "--devices", "1000", "--device-type", "h100")
    assert r.returncode == 1
    assert "HP412" in r.stdout
    r = hp_plan("check", str(LLAMA / "train.yaml"), "--devices", "1024", "--device-type", "H100", "--json")
    doc = json.loads(r.stdout)
    assert r.returncode == 0 and doc["stated"]["dp"] == 32 and doc["kind"] == "train"


def test_unknown_device_flag_names_known_devices() -> None:
    r = hp_plan("check", str(LLAMA / "train.yaml"), "--devices", "8", "--device-type", "H1OO")
    assert r.returncode == 1 and "known devices:" in r.stdout and "H100" in r.stdout


@pytest.mark.parametrize("args", [["check"], ["check", "x.yaml", "--devices", "-3"], ["frobnicate", "x"], []])
def test_usage_errors_exit_two(args: list[str]) -> None:
    r = hp_plan(*args)
    assert r.returncode == 2
    assert "Traceback" not in r.stderr


def test_usage_error_with_json_still_prints_one_document() -> None:
    r = hp_plan("check", "--json")
    assert r.returncode == 2
    assert "error" in json.loads(r.stdout)


def test_help_says_positions_are_one_based() -> None:
    r = hp_plan("check", "--help")
    assert r.returncode == 0 and "1-based" in r.stdout and "0-based" in r.stdout


def test_main_in_process_reports_unavailable_subcommand(monkeypatch: pytest.MonkeyPatch, capsys) -> None:  # type: ignore[no-untyped-def]
    import importlib

    from engine import cli

    real = importlib.import_module

    def fake(name: str, *a, **k):  # type: ignore[no-untyped-def]
        if name == "engine.cli.apply":
            raise ModuleNotFoundError(name, name=name)
        return real(name, *a, **k)

    monkeypatch.setattr(cli.importlib, "import_module", fake)
    assert cli.main(["apply", "x.yaml", "--dry-run"]) == 2
    assert "not available yet" in capsys.readouterr().err


def test_main_turns_a_crash_into_hp900(monkeypatch: pytest.MonkeyPatch, capsys) -> None:  # type: ignore[no-untyped-def]
    from engine import cli
    from engine.cli import check

    def boom(args):  # type: ignore[no-untyped-def]
        raise RuntimeError("boom")

    monkeypatch.setattr(check, "run", boom)
    assert cli.main(["check", "x.yaml", "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["diagnostics"][0]["code"] == "HP900"
