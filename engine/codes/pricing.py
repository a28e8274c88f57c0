"""HP5xx: pricing a stated strategy (hp-plan estimate)."""

ROWS: list[tuple[str, str, str]] = []
