"""Which search config references which train.yaml, found on disk without parsing every YAML file.

A train.yaml takes its cluster from a search config in the workspace that references it (`train_yaml:`).
Scanning is cheap and bounded: the train.yaml's own folder and the workspace roots (one level deep), at
most MAX_FILES files, each under MAX_BYTES, matched with a regex and cached by modification time.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from engine.config.resolve import train_yaml_path
from engine.files import ReadOk, read_bounded

MAX_FILES = 200
MAX_BYTES = 256 * 1024
_TRAIN_YAML_RE = re.compile(r"""^train_yaml:[ \t]*(?:"([^"\n]*)"|'([^'\n]*)'|([^\s#][^#\n]*?))[ \t]*(?:#.*)?$""", re.M)


def referenced_train_yaml(search_path: str, text: str) -> str | None:
    """The absolute path a search config's `train_yaml:` names (relative to the config), or None."""
    m = _TRAIN_YAML_RE.search(text)
    if not m:
        return None
    ref = next(g for g in m.groups() if g is not None).strip()
    if not ref:
        return None
    return train_yaml_path(search_path, ref)


def same_path(a: str, b: str) -> bool:
    return os.path.normcase(os.path.realpath(a)) == os.path.normcase(os.path.realpath(b))


def _yaml_files(folder: str, depth: int) -> Iterable[str]:
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:
        return
    subdirs = []
    for e in entries:
        if e.name.startswith("."):
            continue
        try:  # a symlink loop or a vanished entry raises here
            is_file = e.is_file()
            is_dir = not is_file and e.is_dir(follow_symlinks=False)
        except OSError:
            continue
        if is_file and e.name.endswith((".yaml", ".yml")):
            yield e.path
        elif is_dir and depth > 0 and e.name not in ("node_modules", "__pycache__"):
            subdirs.append(e.path)
    for d in subdirs:
        yield from _yaml_files(d, depth - 1)


@dataclass(slots=True)
class SearchConfigIndex:
    """Cache of `train_yaml:` references by file path and mtime."""

    _cache: dict[str, tuple[float, str | None]] = field(default_factory=dict)

    def _reference(self, path: str) -> str | None:
        try:
            st = os.stat(path)
        except OSError:
            self._cache.pop(path, None)
            return None
        hit = self._cache.get(path)
        if hit is not None and hit[0] == st.st_mtime:
            return hit[1]
        got = read_bounded(path, MAX_BYTES)  # regular files only, size checked first (engine.files)
        ref = referenced_train_yaml(path, got.data.decode("utf-8", errors="replace")) if isinstance(got, ReadOk) else None
        self._cache[path] = (st.st_mtime, ref)
        return ref

    def forget(self, path: str) -> None:
        self._cache.pop(path, None)

    def referencing(self, train_path: str, roots: Iterable[str], open_texts: dict[str, str]) -> str | None:
        """The first search config (open buffers first, then disk) whose train_yaml is `train_path`."""
        for path, text in sorted(open_texts.items()):
            ref = referenced_train_yaml(path, text)
            if ref and same_path(ref, train_path):
                return path
        seen = 0
        folders = [os.path.dirname(os.path.abspath(train_path)), *roots]
        visited: set[str] = set()
        for folder in folders:
            for path in _yaml_files(folder, 0 if folder == folders[0] else 1):
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
