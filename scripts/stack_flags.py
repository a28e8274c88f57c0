"""List the flags Megatron-LM's argparse accepts at one commit, for engine/catalog/data/megatron_flags.txt.

Usage: python scripts/stack_flags.py MEGATRON_LM_GIT_DIR REV

Reads, without importing anything of it, the literal `add_argument("--x")` flags of
megatron/training/arguments.py and the flags its ArgumentGroupFactory generates from config dataclasses
(`--field-name`; `--no-` / `--disable-` for a bool that defaults to True; the field's `argparse_meta`
arg_names where it names its own). MindSpeed's own flags are its `add_argument` literals under mindspeed/
(`git grep`), added to Megatron's at the release MindSpeed pins.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from typing import NamedTuple

ARGUMENTS = "megatron/training/arguments.py"


class Field(NamedTuple):
    """One dataclass field as ArgumentGroupFactory sees it."""

    name: str
    annotation: str
    default: str  # the source text of its default ("" for none)
    init: bool  # False for field(init=False): no flag


class Repo(NamedTuple):
    """A Megatron-LM git directory read at one revision."""

    path: str
    rev: str

    def git(self, *args: str) -> str:
        return subprocess.run(["git", "-C", self.path, *args], capture_output=True, text=True, check=True).stdout

    def show(self, path: str) -> str:
        return self.git("show", f"{self.rev}:{path}")

    def class_def(self, name: str) -> ast.ClassDef | None:
        """The class `name` defined under megatron/ at the revision (the first file that defines it)."""
        for hit in self.git("grep", "-l", f"^class {name}\\b", self.rev, "--", "megatron").split():
            for node in ast.walk(ast.parse(self.show(hit.split(":", 1)[1]))):
                if isinstance(node, ast.ClassDef) and node.name == name:
                    return node
        return None

    def fields(self, name: str) -> list[Field]:
        """The annotated fields of dataclass `name`, its bases' first."""
        cls = self.class_def(name)
        if cls is None:
            return []
        out: list[Field] = []
        for base in cls.bases:
            if isinstance(base, ast.Name):
                out += self.fields(base.id)
        for st in cls.body:
            if isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name):
                v = st.value
                no_init = isinstance(v, ast.Call) and any(k.arg == "init" and ast.unparse(k.value) == "False"
                                                          for k in v.keywords)
                out.append(Field(st.target.id, ast.unparse(st.annotation), ast.unparse(v) if v is not None else "",
                                 not no_init))
        return out


def literal_flags(tree: ast.AST) -> set[str]:
    """Every `--flag` string literal passed to an `add_argument` call."""
    return {a.value for node in ast.walk(tree)
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument"
            for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith("--")}


def _list_names(fn: ast.FunctionDef) -> dict[str, set[str]]:
    """Names bound to list literals inside `fn` (the `exclude=` lists passed by name)."""
    return {st.targets[0].id: {str(e.value) for e in st.value.elts if isinstance(e, ast.Constant)}
            for st in ast.walk(fn)
            if isinstance(st, ast.Assign) and isinstance(st.targets[0], ast.Name) and isinstance(st.value, ast.List)}


def _excluded(call: ast.Call, lists: dict[str, set[str]]) -> set[str]:
    """The field names an ArgumentGroupFactory call excludes."""
    for k in call.keywords:
        if k.arg == "exclude":
            if isinstance(k.value, ast.List):
                return {str(e.value) for e in k.value.elts if isinstance(e, ast.Constant)}
            if isinstance(k.value, ast.Name):
                return lists.get(k.value.id, set())
    return set()


def field_flags(f: Field) -> set[str]:
    """The flags ArgumentGroupFactory generates for one field."""
    named = re.findall(r"['\"]arg_names['\"]:\s*\[([^\]]*)\]", f.default)
    if named:
        return set(re.findall(r"['\"](--[a-z0-9-]+)['\"]", named[0]))
    dashed = f.name.replace("_", "-")
    if f.annotation == "bool" and (f.default == "True" or "default=True" in f.default):
        return {f"--no-{dashed}", f"--disable-{dashed}"}
    return {f"--{dashed}"}


def factory_flags(repo: Repo, tree: ast.AST) -> set[str]:
    """The flags of every ArgumentGroupFactory(ConfigClass, exclude=...) call in the argument functions."""
    flags: set[str] = set()
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef):
            continue
        lists = _list_names(fn)
        for call in ast.walk(fn):
            if not (isinstance(call, ast.Call) and getattr(call.func, "id", "") == "ArgumentGroupFactory"):
                continue
            cls = call.args[0]
            if not isinstance(cls, ast.Name):
                continue
            excluded = _excluded(call, lists)
            for f in repo.fields(cls.id):
                if f.init and f.name not in excluded and not f.name.startswith("_"):
                    flags |= field_flags(f)
    return flags


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    repo = Repo(argv[0], argv[1])
    tree = ast.parse(repo.show(ARGUMENTS))
    for flag in sorted(literal_flags(tree) | factory_flags(repo, tree)):
        print(flag)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
