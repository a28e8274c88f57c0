"""The one bounded reader for every file the engine or the server reads from disk (a config, the train.yaml a
search config links, the target of "apply").

Why a module of its own: a path in a user's YAML is hostile input. `train_yaml: /dev/stdin` made the language
server read its own protocol input, a FIFO blocked `open()` for ever, and `/dev/zero` or a 2 GB sparse file
grew memory at disk speed (D-002). So a read here:

* opens only regular files: the path is stat'ed first (device nodes are never opened: opening some has side
  effects), then opened with O_NONBLOCK (a FIFO swapped in between cannot block the open) and fstat'ed
  again, so what is read is the regular file that was checked;
* checks the size before reading and reads at most `max_bytes + 1` bytes (a file that grows while it is read,
  or a /proc file that reports size 0, still cannot exceed the bound);
* never raises: every failure is a `ReadFailure` whose `reason` is a sentence for a diagnostic or a
  "not applied" answer (missing, a directory, a symlink loop, unreadable, not a regular file, too large, a URL).

It does no I/O beyond that one file and runs wherever it is called: callers on an event loop must call it from
a worker thread (the language server does).
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
from collections.abc import Iterable
from dataclasses import dataclass

_URL_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
# A URL joined onto a folder and normalised (`/work/cfg/https:/host/train.yaml`): said so when it is missing.
_JOINED_URL_RE = re.compile(r"(?:^|/)((?:https?|ftp|s3|hdfs|gs|obs|file):/+[^/].*)$")


@dataclass(frozen=True, slots=True)
class ReadFailure:
    """Why nothing was read. `kind` is one of: url, missing, directory, loop, unreadable, not_regular,
    too_large; `size` is the file's size when `kind` is too_large (None when it was only seen growing)."""

    path: str
    kind: str
    reason: str
    size: int | None = None


@dataclass(frozen=True, slots=True)
class ReadOk:
    path: str
    data: bytes


def _kind_of_mode(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _fmt_size(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1_000_000 else f"{n / 1e3:.1f} KB"


def _os_failure(path: str, exc: OSError) -> ReadFailure:
    if exc.errno == errno.ENOENT:
        url = _JOINED_URL_RE.search(path)
        if url:
            return ReadFailure(path, "url", f"{url.group(1)} is a URL; only local files are read (nothing is "
                                            "downloaded)")
        return ReadFailure(path, "missing", f"{path} does not exist")
    if exc.errno == errno.ELOOP:
        return ReadFailure(path, "loop", f"{path} is a symlink loop (too many levels of symbolic links)")
    if exc.errno == errno.EISDIR:
        return ReadFailure(path, "directory", f"{path} is a directory, not a file")
    if exc.errno == errno.ENOTDIR:
        return ReadFailure(path, "missing", f"{path} does not exist (a part of the path is not a directory)")
    return ReadFailure(path, "unreadable", f"cannot read {path}: {exc.strerror or exc}")


def check_regular(path: str, mode: int) -> ReadFailure | None:
    """None when `mode` (from stat) is a regular file, else why `path` is refused."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return ReadFailure(path, "directory", f"{path} is a directory, not a file")
    return ReadFailure(path, "not_regular", f"{path} is {_kind_of_mode(mode)}; only regular files are read")


def too_large(path: str, size: int | None, max_bytes: int) -> ReadFailure:
    shown = f"{_fmt_size(size)} > {_fmt_size(max_bytes)}" if size is not None else f"over {_fmt_size(max_bytes)}"
    return ReadFailure(path, "too_large", f"{path} is too large to read: {shown}", size)


def read_bounded(path: str, max_bytes: int) -> ReadOk | ReadFailure:
    """The bytes of the regular file at `path` (symlinks followed), at most `max_bytes` of them; else why not."""
    if _URL_RE.match(path):
        return ReadFailure(path, "url", f"{path} is a URL; only local files are read (nothing is downloaded)")
    try:
        before = os.stat(path)
    except OSError as exc:
        return _os_failure(path, exc)
    except ValueError:  # an embedded NUL byte
        return ReadFailure(path, "missing", f"invalid path {path!r}")
    refused = check_regular(path, before.st_mode)
    if refused is not None:
        return refused
    if before.st_size > max_bytes:
        return too_large(path, before.st_size, max_bytes)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        return _os_failure(path, exc)
    try:
        now = os.fstat(fd)
        refused = check_regular(path, now.st_mode)
        if refused is not None:  # swapped for something else between the stat and the open
            return refused
        if now.st_size > max_bytes:
            return too_large(path, now.st_size, max_bytes)
        chunks: list[bytes] = []
        left = max_bytes + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as exc:
        return _os_failure(path, exc)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > max_bytes:
        return too_large(path, None, max_bytes)
    return ReadOk(path, data)


# -- writing -------------------------------------------------------------------------------------------------
# What `hp-plan apply -o OUT / --in-place` does with what it finds at the target (docs/files.md):
#   * nothing there: a new regular file, created with mode 0666 less the umask (like any editor's "save"),
#     and never over a file that appears meanwhile (linked into place, not renamed);
#   * a symlink: written through to the file it points to; the link itself stays;
#   * a regular file: refused when read-only (no write bit, or no write access); else replaced atomically
#     (a temporary file in the same folder, its mode and owner set to the target's, fsync'ed, renamed over
#     it), or, when it has other hard links or its owner cannot be kept, rewritten in place so every link
#     (and the owner) sees the new text;
#   * anything else (a directory, FIFO, character or block device, socket, a dangling symlink or a symlink
#     loop): refused, nothing written;
#   * with `expected` (the bytes the caller read and edited, as `apply --in-place` does): refused, nothing
#     written, when the file no longer holds them (another program saved it meanwhile: a lost update). The
#     file is compared again just before the rename (or the in-place rewrite), so the window left is the
#     rename itself.
# Every file the project writes goes through write_text: `apply -o/--in-place`, `calibrate -o`, `explain --svg`.


@dataclass(frozen=True, slots=True)
class WriteFailure:
    path: str
    reason: str


def _create_new(path: str, data: bytes) -> WriteFailure | None:
    folder = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(folder, f".{os.path.basename(path)}.hp-plan-{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
    except OSError as exc:
        return WriteFailure(path, f"cannot create {path}: {exc.strerror or exc}")
    try:
        _write_all(fd, data)
        os.fsync(fd)
        os.close(fd)
        fd = -1
        os.link(tmp, path)  # fails (EEXIST) rather than replace a file created meanwhile
    except OSError as exc:
        return WriteFailure(path, f"cannot create {path}: {exc.strerror or exc}")
    finally:
        if fd >= 0:
            os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
    return None


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _changed(path: str, expected: bytes | None) -> WriteFailure | None:
    """None when `path` still holds `expected` (or nothing is expected); else the lost-update refusal."""
    if expected is None:
        return None
    now = read_bounded(path, len(expected))
    if isinstance(now, ReadOk) and now.data == expected:
        return None
    return WriteFailure(path, f"{path} changed since it was read (another program wrote it); nothing written: "
                              "run the command again on the new contents")


def _rewrite_in_place(path: str, data: bytes, expected: bytes | None = None) -> WriteFailure | None:
    """Overwrite the file's contents (same inode: hard links and owner kept). Not atomic: used only where a
    rename would split links or change the owner."""
    try:
        fd = os.open(path, os.O_WRONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        return WriteFailure(path, f"cannot write {path}: {exc.strerror or exc}")
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return WriteFailure(path, f"{path} is no longer a regular file; nothing written")
        changed = _changed(path, expected)
        if changed is not None:
            return changed
        _write_all(fd, data)
        os.ftruncate(fd, len(data))
        os.fsync(fd)
    except OSError as exc:
        return WriteFailure(path, f"cannot write {path}: {exc.strerror or exc}")
    finally:
        os.close(fd)
    return None


def _replace_atomic(real: str, st: os.stat_result, data: bytes, expected: bytes | None) -> WriteFailure | None:
    folder = os.path.dirname(real)
    tmp = os.path.join(folder, f".{os.path.basename(real)}.hp-plan-{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600)
    except OSError:
        return _rewrite_in_place(real, data, expected)  # the folder is not writable but the file is
    try:
        try:
            if (st.st_uid, st.st_gid) != (os.geteuid(), os.getegid()):
                os.fchown(fd, st.st_uid, st.st_gid)
        except OSError:  # the owner cannot be kept through a rename: keep the inode instead
            os.close(fd)
            fd = -1
            return _rewrite_in_place(real, data, expected)
        os.fchmod(fd, stat.S_IMODE(st.st_mode))
        _write_all(fd, data)
        os.fsync(fd)
        os.close(fd)
        fd = -1
        changed = _changed(real, expected)  # last look before the rename: a save meanwhile is not lost
        if changed is not None:
            return changed
        os.replace(tmp, real)
        tmp = ""
    except OSError as exc:
        return WriteFailure(real, f"cannot write {real}: {exc.strerror or exc}")
    finally:
        if fd >= 0:
            os.close(fd)
        if tmp:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
    return None


def file_identity(path: str) -> tuple[int, int] | None:
    """(device, inode) of the file at `path` (links followed): what makes two paths one file; None where it cannot
    be stat'ed (missing, or a name holding a NUL)."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return st.st_dev, st.st_ino


def same_file(a: str, b: str) -> bool:
    """Whether two paths name one existing file (a symlink or another spelling of its path counts); False where
    either cannot be stat'ed."""
    ident = file_identity(a)
    return ident is not None and ident == file_identity(b)


def _input_at(path: str, inputs: Iterable[str]) -> str | None:
    """The input that is the file at `path` (same_file), or None."""
    return next((name for name in inputs if name and same_file(path, name)), None)


def write_text(path: str, text: str, *, expected: str | None = None, inputs: Iterable[str] = ()) -> WriteFailure | None:
    """Write `text` (UTF-8, line breaks as given) to `path` with the semantics above; None when written.
    `expected`: the text the caller read from `path` and edited; the write is refused when the file holds
    anything else by then. `inputs`: the files the command read, none of which its output may replace
    (`explain plan.yaml --svg plan.yaml`, `calibrate runs.yaml -o runs.yaml` and `apply search.yaml -o
    search.yaml` each destroyed the file they had just read)."""
    data = text.encode("utf-8", errors="surrogatepass")
    before = expected.encode("utf-8", errors="surrogatepass") if expected is not None else None
    if "\0" in path:  # no file system holds such a name; every os call would raise ValueError
        return WriteFailure(path, f"{path!r} holds a NUL character, which no file name can; nothing written")
    try:
        st = os.stat(path)
    except OSError as exc:
        if before is not None and exc.errno == errno.ENOENT:
            return WriteFailure(path, f"{path} was removed since it was read; nothing written")
        if exc.errno == errno.ELOOP:
            return WriteFailure(path, f"{path} is a symlink loop; nothing written")
        if exc.errno != errno.ENOENT:
            return WriteFailure(path, f"cannot write {path}: {exc.strerror or exc}")
        if os.path.islink(path):
            return WriteFailure(path, f"{path} is a symlink to {os.readlink(path)}, which does not exist; nothing "
                                      "written")
        return _create_new(path, data)
    if not stat.S_ISREG(st.st_mode):
        what = "a directory" if stat.S_ISDIR(st.st_mode) else _kind_of_mode(st.st_mode)
        return WriteFailure(path, f"{path} is {what}, not a regular file; nothing written")
    read = _input_at(path, inputs)
    if read is not None:
        return WriteFailure(path, f"{path} is a file this command reads ({read}); nothing written: name another "
                                  "output")
    real = os.path.realpath(path)
    if not st.st_mode & 0o222 or not os.access(real, os.W_OK):
        return WriteFailure(path, f"{path} is read-only; nothing written (make it writable first)")
    if st.st_nlink > 1:
        return _rewrite_in_place(real, data, before)
    return _replace_atomic(real, st, data, before)
