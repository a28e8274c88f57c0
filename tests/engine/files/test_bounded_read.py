"""The bounded reader (engine.files): regular files only, size checked before reading, never a hang.

Device nodes and FIFOs are made inside the test's temporary folder; every test that could hang runs under a
SIGALRM deadline, and reads that could grow memory are measured with tracemalloc."""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import subprocess
import sys
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.document import read_text
from engine.files import ReadFailure, ReadOk, read_bounded

ROOT = Path(__file__).resolve().parents[3]
MB = 1024 * 1024


@contextlib.contextmanager
def deadline(seconds: int) -> Iterator[None]:
    def fail(signum: int, frame: object) -> None:
        raise TimeoutError(f"blocked for more than {seconds} s")

    old = signal.signal(signal.SIGALRM, fail)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def char_device(tmp_path: Path, name: str, major: int, minor: int, fallback: str) -> Path:
    """A character device node inside tmp_path (mknod as root), else a symlink there to the system's node."""
    node = tmp_path / name
    try:
        os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(major, minor))
    except (PermissionError, OSError):
        node.symlink_to(fallback)
    return node


def test_regular_file_is_read(tmp_path: Path) -> None:
    f = tmp_path / "train.yaml"
    f.write_bytes(b"a: 1\n")
    got = read_bounded(str(f), 100)
    assert isinstance(got, ReadOk) and got.data == b"a: 1\n"


def test_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "train.yaml"
    os.mkfifo(fifo)
    with deadline(5):
        got = read_bounded(str(fifo), MB)
    assert isinstance(got, ReadFailure) and got.kind == "not_regular" and "FIFO" in got.reason


@pytest.mark.parametrize("name,major,minor,fallback", [("zero", 1, 5, "/dev/zero"), ("urandom", 1, 9, "/dev/urandom")])
def test_endless_devices_are_refused_without_reading(tmp_path: Path, name: str, major: int, minor: int,
                                                     fallback: str) -> None:
    node = char_device(tmp_path, name, major, minor, fallback)
    tracemalloc.start()
    with deadline(5):
        got = read_bounded(str(node), 10 * MB)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert isinstance(got, ReadFailure) and got.kind == "not_regular" and "character device" in got.reason
    assert peak < MB


def test_sparse_2gb_file_is_refused_by_size(tmp_path: Path) -> None:
    big = tmp_path / "train.yaml"
    with open(big, "wb") as f:
        f.truncate(2 * 1024 * MB)  # sparse: no disk used
    tracemalloc.start()
    with deadline(5):
        got = read_bounded(str(big), 10 * MB)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert isinstance(got, ReadFailure) and got.kind == "too_large" and got.size == 2 * 1024 * MB
    assert peak < MB


def test_proc_file_reporting_size_zero_is_still_bounded() -> None:
    got = read_bounded("/proc/self/status", 16)  # a regular file of st_size 0 with more to read
    assert isinstance(got, ReadFailure) and got.kind == "too_large"


@pytest.mark.parametrize("path", ["/dev/stdin", "/proc/self/fd/0"])
def test_stdin_paths_never_read(path: str) -> None:
    # Whatever stdin is here (a pipe, a tty, /dev/null), it is not a regular file: refused at once.
    proc = subprocess.run([sys.executable, "-c", f"from engine.files import read_bounded; "
                           f"print(read_bounded({path!r}, 1000).kind)"],
                          stdin=subprocess.PIPE, capture_output=True, text=True, timeout=20, cwd=ROOT)
    assert proc.stdout.strip() == "not_regular", proc.stderr


def test_directory_loop_missing_url(tmp_path: Path) -> None:
    loop = tmp_path / "loop.yaml"
    loop.symlink_to(loop)
    assert read_bounded(str(tmp_path), 10).kind == "directory"  # type: ignore[union-attr]
    assert read_bounded(str(loop), 10).kind == "loop"  # type: ignore[union-attr]
    assert read_bounded(str(tmp_path / "nope.yaml"), 10).kind == "missing"  # type: ignore[union-attr]
    assert read_bounded("https://example.com/train.yaml", 10).kind == "url"  # type: ignore[union-attr]


def test_unreadable_file(tmp_path: Path) -> None:
    f = tmp_path / "train.yaml"
    f.write_text("a: 1\n")
    f.chmod(0)
    if os.access(f, os.R_OK):
        pytest.skip("running as root: permissions do not stop a read")
    got = read_bounded(str(f), 100)
    assert isinstance(got, ReadFailure) and got.kind == "unreadable"


def test_read_text_reports_fifo_as_hp004(tmp_path: Path) -> None:
    fifo = tmp_path / "train.yaml"
    os.mkfifo(fifo)
    with deadline(5):
        text, diags = read_text(str(fifo))
    assert text is None and diags[0].code == "HP004" and "FIFO" in diags[0].message
