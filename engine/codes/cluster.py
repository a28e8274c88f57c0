"""HP3xx: cluster and device."""

ROWS: list[tuple[str, str, str]] = []
