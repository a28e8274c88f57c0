"""HP3xx: cluster and device."""

ROWS: list[tuple[str, str, str]] = [
    ("HP301", "error", "unknown device type"),
    ("HP302", "information", "no cluster stated (cannot price)"),
    ("HP303", "information", "device type not stated, default assumed"),
    ("HP304", "warning", "device count is not a whole number of nodes"),
    ("HP305", "information", "the stated memory identifies another part of the device (priced with its figures)"),
]

# code -> the modules that raise it (tests/engine/test_code_owners.py scans the emitters and keeps this true).
RAISED_BY: dict[str, tuple[str, ...]] = {
    "HP301": ("engine.config.cluster",),
    "HP302": ("engine.config.cluster",),
    "HP303": ("engine.config.cluster",),
    "HP304": ("engine.config.cluster",),
    "HP305": ("engine.config.cluster",),
}
