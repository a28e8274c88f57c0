"""Diagnostic code tables, one module per family; `engine.diagnostics.CODES` joins them.

Each module holds `ROWS: list[tuple[code, severity, title]]` with severity one of
"error" | "warning" | "information" | "hint", and `RAISED_BY: dict[code, modules]`: the modules that raise
each code (tests/engine/test_code_owners.py scans the emitters and keeps it true), so a reader finds where a
finding comes from without grepping, and a code with two homes shows in its table.
"""

from __future__ import annotations

from engine.codes import (
    calibration,
    cluster,
    explain,
    internal,
    model,
    pricing,
    reading,
    rules,
    search,
    types,
)

FAMILIES = (reading, types, model, cluster, rules, pricing, search, internal, explain, calibration)
RAISED_BY: dict[str, tuple[str, ...]] = {code: mods for fam in FAMILIES for code, mods in fam.RAISED_BY.items()}
