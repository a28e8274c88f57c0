"""List functions in engine/ and hp_lsp/ longer than a limit (default 72 lines), longest
first; exit 1 when any is found. A function that long does several things: cut it where its comments say so.

    .venv/bin/python scripts/long_functions.py [--limit 72] [paths...]
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path


def long_functions(paths: list[Path], limit: int) -> list[tuple[int, str]]:
    """(length, "file:line name") for every function or method longer than `limit` lines, longest first."""
    found: list[tuple[int, str]] = []
    for root in paths:
        for path in sorted(root.rglob("*.py")) if root.is_dir() else [root]:
            tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
            for node in ast.walk(tree):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    length = (node.end_lineno or node.lineno) - node.lineno + 1
                    if length > limit:
                        found.append((length, f"{path}:{node.lineno} {node.name}"))
    return sorted(found, reverse=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="*", type=Path, default=[Path("engine"), Path("hp_lsp")])
    ap.add_argument("--limit", type=int, default=72)
    args = ap.parse_args()
    found = long_functions(args.paths, args.limit)
    for length, where in found:
        print(f"{length:4d}  {where}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
