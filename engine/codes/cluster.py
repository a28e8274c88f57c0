"""HP3xx: cluster and device."""

ROWS: list[tuple[str, str, str]] = [
    ("HP301", "error", "unknown device type"),
    ("HP302", "information", "no cluster stated (cannot price)"),
    ("HP303", "information", "device type not stated, default assumed"),
    ("HP304", "warning", "device count is not a whole number of nodes"),
    ("HP305", "information", "the stated memory identifies another part of the device (priced with its figures)"),
]
