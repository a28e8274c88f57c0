"""HP9xx: internal failures, reported as diagnostics instead of tracebacks."""

ROWS: list[tuple[str, str, str]] = [
    ("HP900", "error", "internal error while analysing the file"),
]

# code -> the modules that raise it (tests/engine/test_code_owners.py scans the emitters and keeps this true).
RAISED_BY: dict[str, tuple[str, ...]] = {
    "HP900": ("engine.cli.estimate", "engine.config.resolve", "engine.search"),
}
