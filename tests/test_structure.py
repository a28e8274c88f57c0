"""The codebase's shape: no function in engine/, hp_lsp/, benchmarks/ or scripts/ longer than 72 lines, the
import contracts of pyproject.toml (the layers, no cycle in any package, the engine without the server) held by
import-linter over every import, and no module name repeating (docs/decisions.md D-016, D-017)."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from collections import defaultdict
from pathlib import Path

import pytest
from importlinter.cli import lint_imports

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("engine", "hp_lsp")
sys.path.insert(0, str(ROOT / "scripts"))

from long_functions import long_functions  # noqa: E402

# Names a module may share with another: Python's own package markers, and `types` (each package's dataclasses).
SHARED_NAMES = frozenset({"__init__", "__main__", "types"})
# Folders whose modules are named after what they front, so each repeats a name on purpose: one module per
# `hp-plan` subcommand, one code table per diagnostic family, one builder per LSP feature.
MIRRORS = ("engine/cli", "engine/codes", "hp_lsp/features")


def test_no_function_is_longer_than_72_lines() -> None:
    assert long_functions([ROOT / d for d in (*PACKAGES, "benchmarks", "scripts")], 72) == []


def test_the_import_contracts_hold(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    assert lint_imports(config_filename=str(ROOT / "pyproject.toml"), no_cache=True, no_logo=True) == 0


def test_the_contracts_count_type_only_imports() -> None:
    options = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    assert options["exclude_type_checking_imports"] is False
    assert {c["type"] for c in options["contracts"]} >= {"layers", "acyclic_siblings", "forbidden"}


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / "pkg" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    config = tmp_path / "contracts.toml"
    config.write_text('[tool.importlinter]\nroot_packages = ["pkg"]\nexclude_type_checking_imports = false\n'
                      '[[tool.importlinter.contracts]]\nname = "acyclic"\ntype = "acyclic_siblings"\n'
                      'ancestors = ["pkg"]\n', encoding="utf-8")
    return config


@pytest.mark.parametrize("back", [
    "def f():\n    from pkg import a\n",  # deferred: runs only when f is called
    "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.a import X\n",  # type-only
])
def test_the_tool_sees_deferred_and_type_only_cycles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     back: str) -> None:
    config = _package(tmp_path, {"__init__.py": "", "a.py": "from pkg import b\nX = 1\n", "b.py": back})
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    assert lint_imports(config_filename=str(config), no_cache=True, no_logo=True) == 1


def test_no_module_name_repeats() -> None:
    homes: dict[str, list[str]] = defaultdict(list)
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            rel = path.relative_to(ROOT)
            name = rel.parent.name if path.name == "__init__.py" else path.stem
            if path.name != "__init__.py" and str(rel.parent) in MIRRORS:
                continue
            homes[name].append(str(rel))
    assert {n: h for n, h in homes.items() if len(h) > 1 and n not in SHARED_NAMES} == {}


def test_the_architecture_names_every_module() -> None:
    # docs/architecture.md is the map a newcomer reads first: a module it does not name is one nobody can find.
    lines = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8").splitlines()

    def named(rel: Path) -> bool:
        folder = "" if len(rel.parts) == 1 else f"{rel.parent.as_posix()}/"
        return any(f"`{rel.as_posix()}`" in line or (folder in line and f"`{rel.name}`" in line) for line in lines)

    unnamed = [f"{pkg}/{rel}" for pkg in PACKAGES for path in sorted((ROOT / pkg).rglob("*.py"))
               for rel in [path.relative_to(ROOT / pkg)]
               if not (path.name == "__init__.py" and len(rel.parts) > 1) and not named(rel)]
    assert unnamed == []


def test_one_end_to_end_client_fixture() -> None:
    # D-019: tests/e2e/conftest.py starts every end-to-end server; a module says how with its `lsp` marker.
    defined = [f"{path.relative_to(ROOT)}" for path in sorted((ROOT / "tests").rglob("*.py"))
               if "pytest_lsp.fixture(" in path.read_text(encoding="utf-8") and path.name != "test_structure.py"]
    assert defined == ["tests/e2e/conftest.py"]


# How a dependency that no module imports is used: the tools pyproject.toml configures or that type-check.
_USED_AS_TOOL = {"ruff": "[tool.ruff]", "mypy": "[tool.mypy]", "types-pyyaml": "[tool.mypy]",
                 "pytest": "[tool.pytest.ini_options]", "pytest-asyncio": "asyncio_mode = "}
_IMPORT_NAMES = {"pyyaml": "yaml", "import-linter": "importlinter", "pytest-lsp": "pytest_lsp"}


def _imported(folders: tuple[str, ...]) -> set[str]:
    names: set[str] = set()
    for folder in folders:
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    names |= {a.name.split(".")[0] for a in node.names}
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    names.add(node.module.split(".")[0])
    return names


def test_every_declared_dependency_is_used() -> None:
    """A runtime dependency is imported by engine/ or hp_lsp/; a development one by the tests, benchmarks or
    scripts, or it is a tool pyproject.toml configures (the linters, the type checker, pytest's plugins)."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    project = tomllib.loads(text)["project"]

    def name(spec: str) -> str:
        match = re.match(r"[A-Za-z0-9_.-]+", spec)
        assert match is not None, spec
        return match.group(0).lower()

    runtime, dev = _imported(PACKAGES), _imported(("tests", "benchmarks", "scripts"))
    unused = [d for d in map(name, project["dependencies"]) if _IMPORT_NAMES.get(d, d) not in runtime]
    for extra in project["optional-dependencies"].values():
        unused += [d for d in map(name, extra) if _IMPORT_NAMES.get(d, d).replace("-", "_") not in dev | runtime
                   and _USED_AS_TOOL.get(d, "\0") not in text]
    assert unused == []
