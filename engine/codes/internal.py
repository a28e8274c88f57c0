"""HP9xx: internal failures, reported as diagnostics instead of tracebacks."""

ROWS: list[tuple[str, str, str]] = [
    ("HP900", "error", "internal error while analysing the file"),
]
