"""The tests' own layout (D-019): a test module imports shared helpers from a plain support module
(tests/support/, or a package's helpers.py / shapes.py), never from a conftest.py (pytest's file for
fixtures and hooks, which it loads itself) nor from another test module (one test file would then depend on
another's contents, and renaming or moving a test would break tests elsewhere). Fixtures stay fixtures.
Checked over the engine, editor and language-server test trees."""

from __future__ import annotations

import ast

import pytest

from tests.support.cli import ROOT

TREES = ("tests/engine", "tests/emacs", "tests/vim", "tests/nvim", "tests/hp_lsp", "tests/e2e", "tests/support")


def imported_test_modules(source: str) -> list[tuple[int, str]]:
    """(line, module) of every import of a `conftest` or `test_*` module in `source`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            names = [node.module] if node.module else [a.name for a in node.names]
            modules = ["." * node.level + (n or "") for n in names]
        elif isinstance(node, ast.Import):
            modules = [a.name for a in node.names]
        else:
            continue
        for module in modules:
            last = module.rsplit(".", 1)[-1]
            if last == "conftest" or last.startswith("test_"):
                found.append((node.lineno, module))
    return found


@pytest.mark.parametrize("source", [
    "from tests.engine.search.conftest import make\n",
    "from .conftest import make\n",
    "from .test_space import loop_space\n",
    "from . import test_space\n",
    "import tests.engine.cli.test_check\n",
])
def test_the_check_sees_each_form_of_import(source: str) -> None:
    assert imported_test_modules(source)


def test_no_test_imports_from_conftest_or_another_test_module() -> None:
    offenders = [f"{path.relative_to(ROOT)}:{line}: {module}"
                 for tree in TREES for path in sorted((ROOT / tree).rglob("*.py"))
                 for line, module in imported_test_modules(path.read_text(encoding="utf-8"))]
    assert not offenders, "move the shared helper to tests/support/ (or a plain module):\n" + "\n".join(offenders)
