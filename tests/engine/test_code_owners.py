"""Every diagnostic code records the modules that raise it (`RAISED_BY` in its family's table under
engine/codes/), and this scan of the literal emitters keeps the record true: a code raised from a module its
table does not name, or named for a module that no longer raises it, fails here. Codes whose fact has one home
(HP005 too large, HP422 a refused pipeline layout, HP530 a schedule the framework does not run) have exactly
one; a fact the reader (HP4xx) and the cost model (HP5xx) both state is judged by one module, which every
emitter of its two codes asks (engine.degree_facts)."""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

from engine.codes import RAISED_BY

ROOT = Path(__file__).resolve().parents[2]
_CODE = re.compile(r"HP\d{3}")


def _codes_in(node: ast.AST) -> set[str]:
    """Codes written as a string literal in an emitter's argument, or in a conditional choosing the code."""
    values = [node]
    if isinstance(node, ast.IfExp):
        values = [node.body, node.orelse]
    return {v.value for v in values if isinstance(v, ast.Constant) and isinstance(v.value, str)
            and _CODE.fullmatch(v.value)}


def emitters() -> dict[str, set[str]]:
    """code -> modules with a call that passes its literal (`Diagnostic("HP403", …)`, `ctx.emit("HP403", …)`,
    `Problem("HP503", …)`, `positioned(config, "HP520", …)`), or that pick it in a conditional expression."""
    found: dict[str, set[str]] = defaultdict(set)
    for path in sorted([*ROOT.glob("engine/**/*.py"), *ROOT.glob("hp_lsp/**/*.py")]):
        rel = path.relative_to(ROOT)
        if rel.parts[:2] == ("engine", "codes"):
            continue
        module = ".".join(rel.with_suffix("").parts).removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                for arg in node.args[:3]:
                    for code in _codes_in(arg):
                        found[code].add(module)
            elif isinstance(node, ast.Assign):
                for code in _codes_in(node.value):
                    found[code].add(module)
    return found


def test_the_code_tables_name_the_modules_that_raise_each_code() -> None:
    scanned = {code: tuple(sorted(mods)) for code, mods in emitters().items()}
    recorded = {code: tuple(sorted(mods)) for code, mods in RAISED_BY.items() if mods}
    wrong = {c: (recorded.get(c), scanned.get(c)) for c in sorted(set(scanned) | set(recorded))
             if recorded.get(c) != scanned.get(c)}
    assert not wrong, f"code: (recorded, raised by) — update RAISED_BY in engine/codes/: {wrong}"


def test_every_code_has_a_raiser() -> None:
    from engine.diagnostics import CODES

    assert set(RAISED_BY) == set(CODES)


def test_facts_with_one_home_have_one_emitter() -> None:
    for code in ("HP005", "HP422", "HP530"):
        assert len(RAISED_BY[code]) == 1, (code, RAISED_BY[code])


def test_the_facts_two_stages_state_are_judged_by_one_module() -> None:
    from engine.facts import FACTS

    shared = [codes for codes in FACTS.values() if codes[0].startswith("HP4") and codes[1].startswith("HP5")]
    assert len(shared) == 10
    for codes in shared:
        for module in {m for code in codes for m in RAISED_BY[code]}:
            path = ROOT / (module.replace(".", "/") + ".py")
            imports = {(n.module, a.name) for n in ast.walk(ast.parse(path.read_text()))
                       if isinstance(n, ast.ImportFrom) for a in n.names}
            assert ("engine", "degree_facts") in imports, (codes, module)
