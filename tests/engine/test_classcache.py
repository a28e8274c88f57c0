"""engine.classcache: dataclass methods from the bytecode cache behave exactly as freshly compiled ones, a second
process compiles none of them, and an unwritable or corrupt cache only costs the compiles (issue 16)."""

from __future__ import annotations

import dataclasses
import inspect
import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

from engine import classcache

pytestmark = pytest.mark.skipif(classcache.STATE is None, reason="no bytecode cache tag here")

ROOT = Path(__file__).resolve().parents[2]


def _make(cached: bool) -> type:
    """One frozen, slotted, ordered dataclass with defaults, a factory and a keyword-only field, defined in an
    engine module (so the cache applies), its methods compiled by the builtin `exec` or through the cache."""
    module = types.ModuleType("engine.test_classcache_module")
    module.__dict__.update(dataclass=dataclasses.dataclass, field=dataclasses.field)
    sys.modules[module.__name__] = module
    saved = vars(dataclasses).pop("exec")
    if cached:
        dataclasses.exec = saved  # type: ignore[attr-defined]
    try:
        exec(compile(
            "@dataclass(frozen=True, slots=True, order=True)\n"
            "class Point:\n"
            "    x: int\n"
            "    y: float = 2.5\n"
            "    tags: tuple = field(default_factory=tuple)\n"
            "    label: str = field(default='p', kw_only=True)\n",
            "<test>", "exec", dont_inherit=True), module.__dict__)
    finally:
        dataclasses.exec = saved  # type: ignore[attr-defined]
        del sys.modules[module.__name__]
    return module.Point  # type: ignore[no-any-return]


def test_cached_methods_match_compiled_ones() -> None:
    assert dataclasses.exec is classcache.cached_exec  # type: ignore[attr-defined]
    fresh = _make(cached=False)
    state = classcache.STATE
    assert state is not None
    before = state.hits
    cached = _make(cached=True)
    again = _make(cached=True)
    assert state.hits >= before + 7  # the second class's seven methods came from the cache
    for cls in (cached, again):
        assert str(inspect.signature(cls)) == str(inspect.signature(fresh)) == \
            "(x: int, y: float = 2.5, tags: tuple = <factory>, *, label: str = 'p') -> None"
        for name in ("__init__", "__repr__", "__eq__", "__hash__", "__setattr__", "__delattr__", "__lt__"):
            assert getattr(cls, name).__code__.co_code == getattr(fresh, name).__code__.co_code, name
        a, b = cls(1), cls(1, 3.0, (1,), label="q")
        assert repr(b) == repr(fresh(1, 3.0, (1,), label="q")) == "Point(x=1, y=3.0, tags=(1,), label='q')"
        assert a == cls(1) and a != b and a < b and hash(a) == hash(cls(1))
        with pytest.raises(dataclasses.FrozenInstanceError):
            a.x = 3  # type: ignore[misc]
        assert dataclasses.replace(a, x=4).x == 4 and dataclasses.asdict(b)["label"] == "q"


def test_other_packages_compile_as_before() -> None:
    state = classcache.STATE
    assert state is not None
    before = (state.hits, state.compiled)

    @dataclasses.dataclass(frozen=True)
    class Local:  # defined in tests.*: not an engine class, so the cache is not consulted
        a: int

    assert (state.hits, state.compiled) == before
    assert Local(1) == Local(1)


def _run(code: str, prefix: Path) -> str:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(prefix)
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                          check=True)
    return proc.stdout.strip()


COUNT = ("import engine.classcache as c, engine.check, engine.search, engine.cli.search; "
         "print(c.STATE.compiled, c.STATE.hits, c.cache_path())")


def test_second_process_compiles_nothing(tmp_path: Path) -> None:
    compiled, hits, path = _run(COUNT, tmp_path).split()
    assert int(compiled) > 300 and int(hits) == 0  # the search path's ~390 methods, none cached yet
    assert path.startswith(str(tmp_path)) and os.path.getsize(path) > 0
    compiled, hits, _ = _run(COUNT, tmp_path).split()
    assert int(compiled) == 0 and int(hits) > 300
    # the engine's classes read from the cache have the signatures their annotations give
    sig = _run("import inspect, engine.specs as s; print(inspect.signature(s.ModelSpec))", tmp_path)
    assert sig.startswith("(name: 'str', num_layers: 'int'") and sig.endswith("-> None") and "_type_" not in sig


def test_corrupt_cache_is_recompiled_and_rewritten(tmp_path: Path) -> None:
    _, _, path = _run(COUNT, tmp_path).split()
    good = Path(path).read_bytes()
    for bad in (b"not marshal data", b"\0\0\0\0" + good[4:]):  # garbage; another bytecode version's file
        Path(path).write_bytes(bad)
        assert classcache.read(path) == {}
        compiled, hits, _ = _run(COUNT, tmp_path).split()
        assert int(compiled) > 300 and int(hits) == 0
        assert len(classcache.read(path)) == int(compiled)


def test_unwritable_cache_only_costs_compiles(tmp_path: Path) -> None:
    blocker = tmp_path / "file"  # a file where the cache's folder would go: every write fails
    blocker.write_text("")
    assert _run(COUNT, blocker).split()[:2] == _run(COUNT, blocker).split()[:2]  # compiled each time, no error
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "hp-plan"), "check",
                           "examples/llama3-70b/search.yaml"], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPYCACHEPREFIX": str(blocker)}, check=False)
    assert proc.returncode == 0 and proc.stderr == "" and "parallelism resolved" in proc.stdout


def test_hp_plan_writes_the_cache_before_its_fast_exit(tmp_path: Path) -> None:
    """`python -m engine.cli` ends with os._exit (engine.cli.console): the exit handlers, the cache's save
    among them, run first, and the output is complete."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "engine.cli", "check", "--json", "examples/deepseek-v3/train.yaml"],
                          cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    assert proc.returncode == 0 and proc.stderr == ""
    assert json.loads(proc.stdout)["kind"] == "train"
    path = _run("import engine.classcache as c; print(c.cache_path())", tmp_path)
    assert len(classcache.read(path)) > 200  # the check path's methods
