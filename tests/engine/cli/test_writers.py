"""Every file hp-plan writes goes through the one safe writer (engine.files.write_text, docs/files.md):
`calibrate -o` and `explain --svg` as `apply` does (device nodes, FIFOs and read-only files refused, symlinks
written through, hard links and the mode kept), and `apply --in-place` refuses to overwrite a save that
landed while it ran (the lost-update check)."""

from __future__ import annotations

import io
import os
import stat
from pathlib import Path

import pytest

from engine.cli import build_parser
from engine.cli.apply import run as apply_run
from engine.files import write_text
from engine.search import search
from tests.support.cli import ROOT, hp_plan
from tests.support.configs import stated_config
from tests.support.files import make_non_regular
from tests.support.plan_traces import ratios_file

LLAMA = ROOT / "examples" / "llama3-70b"
PLAN = ROOT / "examples" / "explain" / "1f1b.yaml"


@pytest.fixture()
def runs(tmp_path: Path) -> Path:
    stated_config(tmp_path, "a.yaml")
    path = tmp_path / "runs.yaml"
    path.write_text("runs:\n  - config: a.yaml\n    step_time_s: 2.5\n    peak_memory_gib: 40\n")
    return path


def calibrate_to(runs: Path, out: Path) -> object:
    return hp_plan("calibrate", str(runs), "-o", str(out), cwd=runs.parent, timeout=120)


@pytest.mark.parametrize("kind", ["fifo", "chardev", "proc_stdout", "directory", "dangling"])
def test_calibrate_output_never_replaces_a_non_regular_file(runs: Path, kind: str) -> None:
    out = runs.parent / "ratios.yaml"
    make_non_regular(out, kind)
    before = os.lstat(out)
    r = calibrate_to(runs, out)
    assert r.returncode == 1 and "nothing written" in r.stderr, r.stdout + r.stderr  # type: ignore[attr-defined]
    after = os.lstat(out)
    assert (after.st_mode, after.st_ino) == (before.st_mode, before.st_ino)
    assert not [p for p in runs.parent.iterdir() if p.name.endswith(".tmp")]


def test_calibrate_output_keeps_links_mode_and_refuses_read_only(runs: Path) -> None:
    real = runs.parent / "keep" / "ratios.yaml"
    real.parent.mkdir()
    real.write_text("# old\n")
    real.chmod(0o640)
    other = runs.parent / "hard.yaml"
    os.link(real, other)
    link = runs.parent / "ratios.yaml"
    link.symlink_to(real)
    r = calibrate_to(runs, link)
    assert r.returncode == 0, r.stdout + r.stderr  # type: ignore[attr-defined]
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert "memory_ratio" in real.read_text() and other.read_text() == real.read_text()  # one inode, both links
    assert stat.S_IMODE(real.stat().st_mode) == 0o640
    before = real.read_text()
    real.chmod(0o440)  # no write bit: refused even for root
    r = calibrate_to(runs, link)
    assert r.returncode == 1 and "read-only" in r.stderr and real.read_text() == before  # type: ignore[attr-defined]


def test_calibrate_new_output_follows_the_umask(runs: Path) -> None:
    out = runs.parent / "fresh.yaml"
    r = calibrate_to(runs, out)
    assert r.returncode == 0, r.stdout + r.stderr  # type: ignore[attr-defined]
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(out.stat().st_mode) == 0o666 & ~umask  # not the 0600 of a temporary file


def test_explain_svg_never_replaces_a_fifo(tmp_path: Path) -> None:
    out = tmp_path / "t.svg"
    os.mkfifo(out)
    r = hp_plan("explain", str(PLAN), "--svg", str(out), timeout=60)
    assert r.returncode == 1 and "nothing written" in r.stderr and stat.S_ISFIFO(os.lstat(out).st_mode)


@pytest.mark.parametrize("target", ["runs.yaml", "a.yaml"])
def test_calibrate_output_never_replaces_the_runs_file_or_a_run_config(runs: Path, target: str) -> None:
    out = runs.parent / target
    before = out.read_text()
    r = calibrate_to(runs, out)
    assert r.returncode == 1 and "this command reads" in r.stderr, r.stderr  # type: ignore[attr-defined]
    assert out.read_text() == before


@pytest.mark.parametrize("flag", ["--svg", "--trace"])
def test_explain_output_never_replaces_the_plan_it_explains(tmp_path: Path, flag: str) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text(PLAN.read_text())
    r = hp_plan("explain", str(plan), flag, str(plan), timeout=60)
    assert r.returncode == 1 and "this command reads" in r.stderr, r.stderr
    assert plan.read_text() == PLAN.read_text()


def test_apply_output_never_replaces_the_search_config_it_read(tmp_path: Path) -> None:
    for name in ("search.yaml", "train.yaml"):
        (tmp_path / name).write_text((LLAMA / name).read_text())
    r = hp_plan("apply", "search.yaml", "-o", "search.yaml", "--force", cwd=tmp_path, timeout=120)
    assert r.returncode == 1 and "this command reads" in r.stderr, r.stderr
    assert (tmp_path / "search.yaml").read_text() == (LLAMA / "search.yaml").read_text()


@pytest.mark.parametrize("how", ["flag", "config"])
def test_no_output_replaces_the_ratios_file_the_command_priced_with(tmp_path: Path, how: str) -> None:
    """`--ratios R` or the search config's `estimator.ratios_file: R`, and R named as the output: `apply -o` and
    `explain --svg/--trace` had written over the ratios file they had just read (the next run: HP810)."""
    ratios = ratios_file(tmp_path / "ratios.yaml", compute=1.1)
    kept = ratios.read_text()
    (tmp_path / "train.yaml").write_text((LLAMA / "train.yaml").read_text())
    search_text = (LLAMA / "search.yaml").read_text()
    if how == "config":
        search_text += "\nestimator:\n  ratios_file: ratios.yaml\n" if "estimator:" not in search_text else ""
        assert "ratios_file: ratios.yaml" in search_text
    (tmp_path / "search.yaml").write_text(search_text)
    flag = ("--ratios", "ratios.yaml") if how == "flag" else ()
    for cmd in (("apply", "search.yaml", "-o", "ratios.yaml", "--force"), ("explain", "search.yaml", "--svg",
                "ratios.yaml"), ("explain", "search.yaml", "--trace", "ratios.yaml")):
        r = hp_plan(*cmd, *flag, cwd=tmp_path, timeout=120)
        assert r.returncode == 1 and "this command reads" in r.stderr, (cmd, r.stderr)
        assert ratios.read_text() == kept, cmd


def test_no_output_replaces_the_model_config_json_the_train_yaml_names(tmp_path: Path) -> None:
    """`pretrained_model_name_or_path: ./mymodel`: the model's facts come from mymodel/config.json, a file the
    command read. `explain --svg/--trace`, `calibrate -o` and `apply -o` had each replaced it and exited 0."""
    run = ROOT / "benchmarks" / "calibration_runs" / "llama31-8b-8xh100-96g-torchtitan-compile"
    text = (run / "train.yaml").read_text()
    assert "\n  name: llama3.1-8b\n" in text and "pretrained_model_name_or_path" not in text
    (tmp_path / "train.yaml").write_text(text.replace("\n  name: llama3.1-8b\n", "\n  name: llama3.1-8b\n"
                                                      "  pretrained_model_name_or_path: ./mymodel\n"))
    (tmp_path / "search.yaml").write_text((run / "search.yaml").read_text())
    (tmp_path / "mymodel").mkdir()
    model = tmp_path / "mymodel" / "config.json"
    model.write_text('{"model_type": "llama", "num_hidden_layers": 32, "hidden_size": 4096, "intermediate_size": '
                     '14336, "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256}')
    kept = model.read_text()
    (tmp_path / "runs.yaml").write_text("runs:\n  - config: search.yaml\n    step_time_s: 2.5\n")
    out = "mymodel/config.json"
    for cmd in (("explain", "search.yaml", "--svg", out), ("explain", "search.yaml", "--trace", out),
                ("calibrate", "runs.yaml", "-o", out), ("apply", "search.yaml", "--force", "-o", out)):
        r = hp_plan(*cmd, cwd=tmp_path, timeout=120)
        assert r.returncode != 0 and "reads" in r.stderr, (cmd, r.returncode, r.stdout, r.stderr)
        assert model.read_text() == kept, cmd


def test_explain_refuses_one_file_for_both_the_svg_and_the_trace(tmp_path: Path) -> None:
    """`--svg X --trace X` had said "wrote X" twice and left only the trace; also through a link to X."""
    plan = tmp_path / "plan.yaml"
    plan.write_text(PLAN.read_text())
    (tmp_path / "out").write_text("kept\n")
    (tmp_path / "link").symlink_to(tmp_path / "out")
    for other in ("out", "./out", "link"):
        r = hp_plan("explain", "plan.yaml", "--svg", "out", "--trace", other, cwd=tmp_path, timeout=60)
        assert r.returncode == 2 and "both name" in r.stderr, (other, r.stderr)
        assert (tmp_path / "out").read_text() == "kept\n"
    r = hp_plan("explain", "plan.yaml", "--svg", "a.svg", "--trace", "a.json", cwd=tmp_path, timeout=60)
    assert r.returncode == 0 and (tmp_path / "a.svg").read_text().startswith("<svg")
    assert (tmp_path / "a.json").read_text().lstrip().startswith(("{", "["))


def test_write_text_refuses_a_file_changed_since_it_was_read(tmp_path: Path) -> None:
    f = tmp_path / "train.yaml"
    f.write_text("a: 1\n")
    failed = write_text(str(f), "a: 2\n", expected="a: 0\n")
    assert failed is not None and "changed since it was read" in failed.reason
    assert f.read_text() == "a: 1\n" and [p.name for p in tmp_path.iterdir()] == ["train.yaml"]
    os.link(f, tmp_path / "hard.yaml")  # the in-place route checks too
    assert write_text(str(f), "a: 2\n", expected="a: 0\n") is not None and f.read_text() == "a: 1\n"
    assert write_text(str(f), "a: 2\n", expected="a: 1\n") is None and f.read_text() == "a: 2\n"
    f.unlink()
    failed = write_text(str(f), "a: 3\n", expected="a: 2\n")
    assert failed is not None and "removed since it was read" in failed.reason and not f.exists()


def test_apply_in_place_refuses_a_save_that_lands_while_it_searches(tmp_path: Path) -> None:
    train = tmp_path / "train.yaml"
    train.write_text((LLAMA / "train.yaml").read_text())
    saved = train.read_text().replace("max_grad_norm: 1.0", "max_grad_norm: 0.5")

    def search_while_someone_saves(config: object, **kw: object) -> object:
        result = search(config, **kw)  # type: ignore[arg-type]
        train.write_text(saved)  # another editor saves meanwhile
        return result

    args = build_parser("apply").parse_args(["apply", str(train), "--in-place", "--devices", "64", "--device-type",
                                             "H100"])
    out, err = io.StringIO(), io.StringIO()
    code = apply_run(args, stdout=out, stderr=err, search_fn=search_while_someone_saves)
    assert code == 1 and "changed since it was read" in err.getvalue(), err.getvalue()
    assert train.read_text() == saved  # the other save is kept
    assert "hp-plan apply: wrote" not in err.getvalue()


def test_explain_with_an_empty_output_name_says_so() -> None:
    """`--svg ''` (a shell variable left empty) exited 0 and wrote nothing, without a word."""
    r = hp_plan("explain", str(PLAN), "--svg", "", timeout=60)
    assert r.returncode == 1 and "the file name is empty" in r.stderr


def test_apply_names_the_file_that_holds_the_errors(tmp_path: Path) -> None:
    """An error in the train.yaml a search config names: the refusal named the search config."""
    for name in ("search.yaml", "train.yaml"):
        (tmp_path / name).write_text((LLAMA / name).read_text())
    train = tmp_path / "train.yaml"
    train.write_text(train.read_text() + "extra: {a:\t1}\n")  # a tab between tokens: the trainer's loader stops
    r = hp_plan("apply", "search.yaml", "--force", cwd=tmp_path, timeout=120)
    assert r.returncode == 1 and "train.yaml has errors apply cannot repair" in r.stderr, r.stderr
    assert "search.yaml has errors" not in r.stderr


def test_a_change_of_a_block_scalar_stays_on_one_line(tmp_path: Path) -> None:
    """`tp_size: |` with `8` below: its value `8\\n` broke the change line in two (`...: 8` then ` -> 1`)."""
    for name in ("search.yaml", "train.yaml"):
        (tmp_path / name).write_text((LLAMA / name).read_text())
    train = tmp_path / "train.yaml"
    text = train.read_text()
    assert "  tp_size: 8\n" in text
    train.write_text(text.replace("  tp_size: 8\n", "  tp_size: |\n    8\n"))
    r = hp_plan("apply", "search.yaml", "--force", "-o", "out.yaml", cwd=tmp_path, timeout=120)
    changed = [line for line in r.stderr.splitlines() if "accelerator.tp_size" in line]
    assert changed and all(" -> " in line for line in changed), r.stderr
    assert "'8\\n' -> " in changed[0]
