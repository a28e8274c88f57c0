"""What writing a file (`hp-plan apply -o / --in-place`, engine.files.write_text) does with each kind of target:
docs/files.md. Device nodes and FIFOs are made inside the test's temporary folder."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from engine.files import write_text
from tests.support.files import make_non_regular


def test_new_file_follows_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o027)
    try:
        assert write_text(str(tmp_path / "out.yaml"), "a: 1\n") is None
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "out.yaml").stat().st_mode) == 0o640
    assert (tmp_path / "out.yaml").read_text() == "a: 1\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out.yaml"]  # no temporary file left


def test_regular_file_replaced_atomically_keeping_its_mode(tmp_path: Path) -> None:
    f = tmp_path / "train.yaml"
    f.write_text("a: 1\n")
    f.chmod(0o640)
    inode = f.stat().st_ino
    assert write_text(str(f), "a: 2\r\n") is None
    assert f.read_bytes() == b"a: 2\r\n"
    assert stat.S_IMODE(f.stat().st_mode) == 0o640
    assert f.stat().st_ino != inode  # renamed into place
    assert [p.name for p in tmp_path.iterdir()] == ["train.yaml"]


def test_read_only_file_is_refused(tmp_path: Path) -> None:
    f = tmp_path / "train.yaml"
    f.write_text("a: 1\n")
    f.chmod(0o444)
    failed = write_text(str(f), "a: 2\n")
    assert failed is not None and "read-only" in failed.reason
    assert f.read_text() == "a: 1\n"


def test_symlink_is_written_through(tmp_path: Path) -> None:
    real = tmp_path / "configs" / "train.yaml"
    real.parent.mkdir()
    real.write_text("a: 1\n")
    link = tmp_path / "train.yaml"
    link.symlink_to(real)
    assert write_text(str(link), "a: 2\n") is None
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert real.read_text() == "a: 2\n"
    assert sorted(p.name for p in real.parent.iterdir()) == ["train.yaml"]


def test_hard_links_are_kept(tmp_path: Path) -> None:
    f = tmp_path / "train.yaml"
    f.write_text("a: 1\n# a longer old text than the new one\n")
    other = tmp_path / "backup.yaml"
    os.link(f, other)
    assert write_text(str(f), "a: 2\n") is None
    assert other.read_text() == "a: 2\n" and f.read_text() == "a: 2\n"
    assert f.stat().st_ino == other.stat().st_ino and f.stat().st_nlink == 2


@pytest.mark.parametrize("kind", ["fifo", "chardev", "directory", "loop", "dangling"])
def test_non_regular_targets_are_refused(tmp_path: Path, kind: str) -> None:
    target = tmp_path / "out.yaml"
    make_non_regular(target, kind)
    before = os.lstat(target)
    failed = write_text(str(target), "a: 1\n")
    assert failed is not None and "nothing written" in failed.reason
    after = os.lstat(target)
    assert (after.st_mode, after.st_ino) == (before.st_mode, before.st_ino)
    assert not (tmp_path / "nowhere.yaml").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_an_input_of_the_command_is_never_the_output(tmp_path: Path) -> None:
    """One of `inputs` (here reached through a symlink) is refused and kept; a file that is no input is written."""
    read = tmp_path / "plan.yaml"
    read.write_text("model: {}\n")
    (tmp_path / "link.yaml").symlink_to(read)
    failure = write_text(str(tmp_path / "link.yaml"), "<svg/>", inputs=(str(read),))
    assert failure is not None and "this command reads" in failure.reason and "nothing written" in failure.reason
    assert read.read_text() == "model: {}\n"
    other = tmp_path / "other.svg"
    other.write_text("old")
    assert write_text(str(other), "<svg/>", inputs=(str(read), str(tmp_path / "missing.yaml"))) is None
    assert other.read_text() == "<svg/>"
