"""A bytecode cache for the methods `@dataclass` writes, so a fresh process does not recompile them (issue 16).

Why: `dataclasses` writes the source of every generated method (`__init__`, `__repr__`, `__eq__`, `__hash__`,
and a frozen class's `__setattr__` / `__delattr__`) and compiles it with `exec` at every import: on Python
3.11 and 3.12 one compile per method, on 3.13 one per class. The engine's ~70 typed frozen dataclasses on the
`hp-plan search` path make 393 such compiles on 3.11: ~29 ms of CPU per process (measured on the 2-core dev
machine; benchmarks/cli_speed.py), a fifth of the command's start-up.

What: `install()` gives the dataclasses module its own `exec` (a module global, found before the builtin).
For a class of the engine or hp_lsp packages it looks the compiled code up by its exact source text before
compiling it; for any other class, and for anything but source text, it is the builtin. The code objects live
beside the engine's bytecode, in `engine/__pycache__/dataclass-methods-<format>.<tag>.marshal` (or under
PYTHONPYCACHEPREFIX), read once per process (1-2 ms) and written back at exit only when a method was compiled
that was not there, under the rules `.pyc` files follow: nothing is written when PYTHONDONTWRITEBYTECODE is
set or the folder cannot be written. A code object compiled from a text is the same whatever process
compiled it, so the classes behave exactly as without the cache (tests/engine/test_classcache.py compares
them).
"""

import atexit
import contextlib
import dataclasses
import importlib.util
import marshal
import os
import sys
from types import CodeType
from typing import Any

PACKAGES = ("engine.", "hp_lsp.")
# Above this many entries the file is rewritten with this process's methods only, so the texts of classes
# since edited do not pile up in a developer's checkout (the engine and server together use ~570).
MAX_ENTRIES = 4000
# In the file's name: a change to how the code is compiled must not read an older file's code objects.
FORMAT = 2


class _State:
    """The process's cache: the code read from the file, the texts used, and whether any was compiled."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.codes: dict[str, CodeType] | None = None
        self.used: dict[str, CodeType] = {}
        self.compiled = 0
        self.hits = 0

    def load(self) -> dict[str, CodeType]:
        if self.codes is None:
            self.codes = read(self.path)
        return self.codes

    def code(self, text: str) -> CodeType:
        codes = self.load()
        code = codes.get(text)
        if code is None:
            code = _compile(text)
            codes[text] = code
            self.compiled += 1
        else:
            self.hits += 1
        self.used[text] = code
        return code

    def save(self) -> None:
        if not self.compiled or sys.dont_write_bytecode:
            return
        on_disk = read(self.path)
        merged = {**on_disk, **self.used} if len(on_disk) + len(self.used) <= MAX_ENTRIES else dict(self.used)
        write(self.path, merged)


STATE: _State | None = None


def _compile(text: str) -> CodeType:
    """What `exec(text)` in dataclasses.py compiles: no `from __future__` flag of this module or any caller
    (under `annotations` the generated signatures would read '_type_x' instead of the field types)."""
    return compile(text, "<string>", "exec", dont_inherit=True)


def cache_path() -> str:
    """Where the cache lives: engine's `__pycache__`, or its mirror under sys.pycache_prefix."""
    here = os.path.dirname(os.path.abspath(__file__))
    folder = os.path.join(here, "__pycache__")
    if sys.pycache_prefix:
        folder = os.path.join(sys.pycache_prefix, here.lstrip(os.sep), "__pycache__")
    return os.path.join(folder, f"dataclass-methods-{FORMAT}.{sys.implementation.cache_tag}.marshal")


def read(path: str) -> dict[str, CodeType]:
    """The cache file's {source text: code}; empty when missing, unreadable, not a cache, or written by an
    interpreter of another bytecode version (the file starts with the magic number a `.pyc` starts with)."""
    try:
        with open(path, "rb") as fh:
            raw = fh.read()  # whole: marshal.load(fh) reads in small pieces, 7 ms instead of 1
        if raw[:4] != importlib.util.MAGIC_NUMBER:
            return {}
        data = marshal.loads(memoryview(raw)[4:])
    except (OSError, EOFError, ValueError, TypeError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, CodeType)}


def write(path: str, codes: dict[str, CodeType]) -> None:
    """Write atomically (a temporary file renamed over the old one); any OS error leaves no cache."""
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(tmp, "wb") as fh:
            fh.write(importlib.util.MAGIC_NUMBER + marshal.dumps(codes))
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def cached_exec(source: Any, globals: dict[str, Any] | None = None, locals: dict[str, Any] | None = None) -> None:
    """The dataclasses module's `exec`: the builtin, with the compile of an engine class's method source
    looked up in the cache. Compiled without inheriting this module's `from __future__` flags (it has none;
    dataclasses.py has none either), so the code is what the builtin would have compiled."""
    if isinstance(source, str):
        module = (globals or {}).get("__name__")
        if STATE is not None and isinstance(module, str) and module.startswith(PACKAGES):
            source = STATE.code(source)
        else:
            source = _compile(source)
    exec(source, globals, locals)


def install() -> None:
    """Give dataclasses the caching `exec` (once; on implementations that have a bytecode cache tag)."""
    global STATE
    if STATE is not None or sys.implementation.cache_tag is None:
        return
    STATE = _State(cache_path())
    dataclasses.exec = cached_exec  # type: ignore[attr-defined]
    atexit.register(STATE.save)

