"""HP75x: explaining, comparing and exporting a plan (hp-plan explain / compare / export, docs/formats.md §7)."""

ROWS: list[tuple[str, str, str]] = [
    ("HP750", "information", "the timeline departs from the priced order or stage times (it says how)"),
    ("HP751", "information", "uneven stages: the schedule finishes before the priced pipeline time"),
    ("HP752", "information", "the two plans differ by less than the cost model's error band"),
    ("HP753", "warning", "a strategy setting has no equivalent in the target framework's arguments"),
    ("HP754", "error", "the two plans do not train the same model on the same cluster"),
]

# code -> the modules that raise it (tests/engine/test_code_owners.py scans the emitters and keeps this true).
RAISED_BY: dict[str, tuple[str, ...]] = {
    "HP750": ("engine.explain.build",),
    "HP751": ("engine.explain.build",),
    "HP752": ("engine.explain.compare",),
    "HP753": ("engine.explain.export",),
    "HP754": ("engine.cli.compare",),
}
