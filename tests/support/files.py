"""Paths that are not regular files, for the tests that a write or a read refuses them without touching
them (engine.files)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

NON_REGULAR = ("fifo", "chardev", "directory", "loop", "dangling", "proc_stdout")


def make_non_regular(path: Path, kind: str) -> None:
    """Make `path` a `kind` of NON_REGULAR: a FIFO, a private /dev/null (mknod needs root: the test is
    skipped without), a directory, a symlink to itself, a symlink to a missing file beside it, or a symlink to
    the process's stdout (a pipe under pytest)."""
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "chardev":
        try:
            os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
        except OSError:
            pytest.skip("mknod needs root")
    elif kind == "directory":
        path.mkdir()
    elif kind == "loop":
        path.symlink_to(path)
    elif kind == "dangling":
        path.symlink_to(path.parent / "nowhere.yaml")
    elif kind == "proc_stdout":
        path.symlink_to("/proc/self/fd/1")
    else:
        raise ValueError(f"unknown kind {kind!r}; one of {', '.join(NON_REGULAR)}")
