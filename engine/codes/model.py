"""HP2xx: model facts and catalog resolution."""

ROWS: list[tuple[str, str, str]] = []
