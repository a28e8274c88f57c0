"""HP4xx: cross-field rules on degrees, batch and memory."""

ROWS: list[tuple[str, str, str]] = []
