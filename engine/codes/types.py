"""HP1xx: types and unknown keys."""

ROWS: list[tuple[str, str, str]] = []
