"""The codebase's shape (issue 17): no function in engine/ or hp_lsp/ longer than about 80 lines, no import cycle
among their modules, and the engine knows nothing of the language server."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("engine", "hp_lsp")
sys.path.insert(0, str(ROOT / "scripts"))

from long_functions import long_functions  # noqa: E402


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))}


def _top_level_imports(path: Path, name: str, known: dict[str, Path]) -> set[str]:
    """The project modules `name` imports when it is loaded: module-level imports only (an import inside a
    function runs later, and one under `if TYPE_CHECKING` never), each resolved to the module it names."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                continue
            if isinstance(node, ast.If | ast.Try):
                visit(node.body + node.orelse + [s for h in getattr(node, "handlers", []) for s in h.body])
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    found.add(sub if sub in known else base)

    visit(tree.body)
    return {m for m in found if m in known and m != name}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle, as the list of modules around it, or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def walk(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt):], nxt]
            if nxt not in state and (found := walk(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := walk(node)):
            return found
    return None


def _graph() -> dict[str, set[str]]:
    known = _modules()
    graph = {name: _top_level_imports(path, name, known) for name, path in known.items()}
    # A package's __init__ re-exporting its submodules is not a cycle with them: Python loads the submodule
    # first. Edges into a module's own parent packages are dropped for the same reason.
    return {n: {m for m in deps if not n.startswith(m + ".") and not m.startswith(n + ".")}
            for n, deps in graph.items()}


def test_no_function_is_longer_than_80_lines() -> None:
    assert long_functions([ROOT / pkg for pkg in PACKAGES], 80) == []


def test_no_import_cycle() -> None:
    assert _cycle(_graph()) is None


def test_the_cycle_finder_finds_one() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_the_engine_never_imports_the_server() -> None:
    # Anywhere in a module, a function's own imports included: the engine is the core both front ends share.
    offenders = [f"{path.relative_to(ROOT)}:{node.lineno}" for path in sorted((ROOT / "engine").rglob("*.py"))
                 for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                 if isinstance(node, ast.Import | ast.ImportFrom)
                 and any(n.split(".")[0] == "hp_lsp" for n in
                         ([a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]))]
    assert offenders == []
