"""HP6xx: search refusals and advice."""

ROWS: list[tuple[str, str, str]] = []
