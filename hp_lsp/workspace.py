"""Which search config references which train.yaml, found on disk without parsing every YAML file.

A train.yaml takes its cluster from a search config in the workspace that references it (`train_yaml:`).
Scanning is cheap and bounded: the train.yaml's own folder and the workspace roots (one level deep), at
most MAX_ENTRIES entries per folder and MAX_FILES YAML files, each under MAX_BYTES, matched with a regex;
references are cached by the file's modification time and listings by the folder's, so a check that finds
nothing new stats the folders instead of listing them again.

The regex is a pre-check, not the rule: it finds which files name a train.yaml without parsing every YAML
file of the workspace; whether a file is a search config is engine.config.kind's rule, applied when the
file found is read (hp_lsp.analysis.cluster_from_search_config refuses a file that is not one).
"""

from __future__ import annotations

import itertools
import os
import re
import threading
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field

from engine.config.resolve import train_yaml_path
from engine.files import ReadOk, read_bounded

MAX_FILES = 200
MAX_BYTES = 256 * 1024
MAX_ENTRIES = 5000  # entries read from one folder: the first listing of a huge data folder stays bounded
MAX_FOLDERS = 256  # folder listings kept
_TRAIN_YAML_RE = re.compile(r"""^train_yaml:[ \t]*(?:"([^"\n]*)"|'([^'\n]*)'|([^\s#][^#\n]*?))[ \t]*(?:#.*)?$""", re.M)


def referenced_train_yaml(search_path: str, text: str) -> str | None:
    """The absolute path a search config's `train_yaml:` names (relative to the config), or None."""
    m = _TRAIN_YAML_RE.search(text)
    if not m:
        return None
    ref = next(g for g in m.groups() if g is not None).strip()
    if not ref or "\0" in ref:  # a NUL names no file (the check says HP009 at the key)
        return None
    return train_yaml_path(search_path, ref)


def same_path(a: str, b: str) -> bool:
    """Whether two paths name one file, links resolved. Never raises: a path holding a NUL names no file, and one
    stray YAML file in a folder with such a reference had stopped every check of the folder's train.yaml files."""
    if "\0" in a or "\0" in b:
        return False
    try:
        return os.path.normcase(os.path.realpath(a)) == os.path.normcase(os.path.realpath(b))
    except (OSError, ValueError):
        return os.path.normcase(os.path.normpath(a)) == os.path.normcase(os.path.normpath(b))


@dataclass(frozen=True, slots=True)
class Listing:
    """One folder's YAML files and subfolders, as listed at the folder's modification time."""

    mtime_ns: int
    yaml_files: tuple[str, ...]
    subdirs: tuple[str, ...]


def list_folder(folder: str, mtime_ns: int) -> Listing:
    """Read one folder, at most MAX_ENTRIES entries (a data folder of 200,000 files must not cost a check
    each time it is scanned: the rest of its entries are not looked at)."""
    files: list[str] = []
    subdirs: list[str] = []
    try:
        with os.scandir(folder) as it:
            entries = sorted(itertools.islice(it, MAX_ENTRIES), key=lambda e: e.name)
    except OSError:
        return Listing(mtime_ns, (), ())
    for e in entries:
        if e.name.startswith("."):
            continue
        try:  # a symlink loop or a vanished entry raises here
            is_file = e.is_file()
            is_dir = not is_file and e.is_dir(follow_symlinks=False)
        except OSError:
            continue
        if is_file and e.name.endswith((".yaml", ".yml")):
            files.append(e.path)
        elif is_dir and e.name not in ("node_modules", "__pycache__"):
            subdirs.append(e.path)
    return Listing(mtime_ns, tuple(files), tuple(subdirs))


@dataclass(slots=True)
class SearchConfigIndex:
    """Cache of `train_yaml:` references by file path and mtime, and of folder listings by the folder's
    mtime (adding or removing an entry changes it), so a check stats the scanned folders instead of listing
    them again. The check threads fill both and the loop forgets entries (a watched file changed): one
    lock guards them."""

    _cache: dict[str, tuple[float, str | None]] = field(default_factory=dict)
    _listings: dict[str, Listing] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def _reference(self, path: str) -> str | None:
        try:
            st = os.stat(path)
        except OSError:
            with self._lock:
                self._cache.pop(path, None)
            return None
        with self._lock:
            hit = self._cache.get(path)
        if hit is not None and hit[0] == st.st_mtime:
            return hit[1]
        got = read_bounded(path, MAX_BYTES)  # regular files only, size checked first (engine.files)
        ref = referenced_train_yaml(path, got.data.decode("utf-8", errors="replace")) if isinstance(got, ReadOk) else None
        with self._lock:
            self._cache[path] = (st.st_mtime, ref)
        return ref

    def listing(self, folder: str) -> Listing:
        """The folder's listing, re-read only when its modification time moved."""
        try:
            mtime_ns = os.stat(folder).st_mtime_ns
        except OSError:
            return Listing(0, (), ())
        with self._lock:
            hit = self._listings.get(folder)
        if hit is not None and hit.mtime_ns == mtime_ns:
            return hit
        fresh = list_folder(folder, mtime_ns)
        with self._lock:
            if len(self._listings) >= MAX_FOLDERS:
                self._listings.clear()
            self._listings[folder] = fresh
        return fresh

    def yaml_files(self, folder: str, depth: int) -> Iterator[str]:
        listing = self.listing(folder)
        yield from listing.yaml_files
        if depth > 0:
            for sub in listing.subdirs:
                yield from self.yaml_files(sub, depth - 1)

    def forget(self, path: str) -> None:
        with self._lock:
            self._cache.pop(path, None)
            self._listings.pop(os.path.dirname(path), None)

    def referencing(self, train_path: str, roots: Iterable[str], open_texts: Mapping[str, str]) -> str | None:
        """The first search config (open buffers first, then disk) whose train_yaml is `train_path`."""
        for path, text in sorted(open_texts.items()):
            ref = referenced_train_yaml(path, text)
            if ref and same_path(ref, train_path):
                return path
        seen = 0
        folders = [os.path.dirname(os.path.abspath(train_path)), *roots]
        visited: set[str] = set()
        for folder in folders:
            for path in self.yaml_files(folder, 0 if folder == folders[0] else 1):
                if path in visited or path in open_texts:
                    continue
                visited.add(path)
                seen += 1
                if seen > MAX_FILES:
                    return None
                ref = self._reference(path)
                if ref and same_path(ref, train_path):
                    return path
        return None
