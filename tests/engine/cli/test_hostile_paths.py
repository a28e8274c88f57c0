"""`hp-plan check` on a search config whose train_yaml is something that must never be read (D-002): a
FIFO, /dev/stdin, /proc/self/fd/0, a device node, a 2 GB sparse file. Each run is a subprocess with a 20 s timeout and a stdin pipe that is never written, so a blocking read shows up as a timeout, not a hang."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.cli import ROOT, hp_plan
from tests.support.files import make_non_regular

LLAMA = ROOT / "examples" / "llama3-70b"


def search_config(folder: Path, train_yaml: str) -> Path:
    text = (LLAMA / "search.yaml").read_text().replace("train_yaml: ./train.yaml", f"train_yaml: {train_yaml}")
    path = folder / "search.yaml"
    path.write_text(text)
    return path


def check(path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with subprocess.Popen([sys.executable, "-m", "engine.cli", "check", str(path)], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env) as proc:
        try:
            out, err = proc.communicate(timeout=20)  # stdin stays open and empty: a read of it would block
        except subprocess.TimeoutExpired:
            proc.kill()
            raise AssertionError("hp-plan check blocked reading train_yaml") from None
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def make_target(folder: Path, kind: str) -> str:
    if kind == "fifo":
        os.mkfifo(folder / "train.yaml")
        return "./train.yaml"
    if kind == "device":
        node = folder / "zero"
        try:
            os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 5))
        except OSError:
            node.symlink_to("/dev/zero")
        return "./zero"
    if kind == "sparse":
        with open(folder / "train.yaml", "wb") as f:
            f.truncate(2 * 1024**3)
        return "./train.yaml"
    return kind  # an absolute path


@pytest.mark.parametrize("kind", ["fifo", "/dev/stdin", "/proc/self/fd/0", "device", "sparse"])
def test_check_refuses_linked_file_that_is_no_regular_file(tmp_path: Path, kind: str) -> None:
    path = search_config(tmp_path, make_target(tmp_path, kind))
    r = check(path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "HP009" in r.stdout, r.stdout
    want = "too large" if kind == "sparse" else "regular file"
    assert want in r.stdout, r.stdout
    assert "Traceback" not in r.stderr


def test_check_refuses_fifo_given_on_the_command_line(tmp_path: Path) -> None:
    fifo = tmp_path / "train.yaml"
    os.mkfifo(fifo)
    r = check(fifo)
    assert r.returncode == 1 and "HP004" in r.stdout and "FIFO" in r.stdout, r.stdout + r.stderr


# -- hp-plan apply: where it writes (docs/files.md) --------------------------------------------------------
FLAGS = ("--devices", "64", "--device-type", "H100")


def apply(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return hp_plan("apply", *args, *FLAGS, cwd=cwd, timeout=120)


@pytest.mark.parametrize("kind", ["chardev", "fifo", "proc_stdout"])
def test_apply_output_never_replaces_a_non_regular_file(tmp_path: Path, kind: str) -> None:
    (tmp_path / "train.yaml").write_text((LLAMA / "train.yaml").read_text())
    out = tmp_path / "out.yaml"
    make_non_regular(out, kind)
    before = os.lstat(out)
    r = apply("train.yaml", "-o", str(out), cwd=tmp_path)
    assert r.returncode == 1 and "nothing written" in r.stderr, r.stderr
    after = os.lstat(out)
    assert (after.st_mode, after.st_ino) == (before.st_mode, before.st_ino)
    assert r.stdout == ""


def test_apply_in_place_writes_through_a_symlink_and_refuses_read_only(tmp_path: Path) -> None:
    real = tmp_path / "configs" / "train.yaml"
    real.parent.mkdir()
    real.write_text((LLAMA / "train.yaml").read_text())
    link = tmp_path / "train.yaml"
    link.symlink_to(real)
    r = apply("train.yaml", "--in-place", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert link.is_symlink() and real.read_text() != (LLAMA / "train.yaml").read_text()
    real.write_text((LLAMA / "train.yaml").read_text())
    real.chmod(0o444)
    r = apply("train.yaml", "--in-place", cwd=tmp_path)
    assert r.returncode == 1 and "read-only" in r.stderr, r.stderr
    assert real.read_text() == (LLAMA / "train.yaml").read_text()


def test_apply_in_place_on_a_file_with_a_bom_keeps_it(tmp_path: Path) -> None:
    original = b"\xef\xbb\xbf" + (LLAMA / "train.yaml").read_bytes()
    (tmp_path / "train.yaml").write_bytes(original)
    r = apply("train.yaml", "--in-place", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    written = (tmp_path / "train.yaml").read_bytes()
    assert written.startswith(b"\xef\xbb\xbf#") and written != original


def test_check_refuses_a_fifo_model_config_json(tmp_path: Path) -> None:
    """A local model folder whose config.json is a FIFO: the model reader goes through the same bounded reader."""
    (tmp_path / "model").mkdir()
    os.mkfifo(tmp_path / "model" / "config.json")
    text = (LLAMA / "train.yaml").read_text().replace("meta-llama/Llama-3.1-70B", str(tmp_path / "model"))
    (tmp_path / "train.yaml").write_text(text)
    r = check(tmp_path / "train.yaml")
    assert "FIFO" in r.stdout and "HP900" not in r.stdout, r.stdout
