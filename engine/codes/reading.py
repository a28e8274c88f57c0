"""HP0xx: reading the file (YAML syntax, structure, hostile input)."""

ROWS: list[tuple[str, str, str]] = [
    ("HP001", "error", "YAML syntax error"),
    ("HP002", "error", "top level is not a mapping"),
    ("HP003", "error", "duplicate key"),
    ("HP004", "error", "file cannot be read (missing, binary, not UTF-8)"),
    ("HP005", "error", "file too large or too deeply nested to analyse"),
    ("HP006", "error", "alias expansion too large (possible alias bomb)"),
    ("HP007", "error", "unsupported YAML tag (never executed), or a tagged value the trainer cannot load"),
    ("HP008", "information", "not a HyperParallel config (left alone)"),
    ("HP009", "error", "referenced train_yaml not found or unreadable"),
    ("HP010", "information", "empty file"),
    ("HP011", "warning", "too many findings: only the first 1,000 are reported"),
    ("HP012", "warning", "a key merged in from two mappings of a merge list with different values (PyYAML releases "
              "differ on which wins)"),
]

# code -> the modules that raise it (tests/engine/test_code_owners.py scans the emitters and keeps this true).
RAISED_BY: dict[str, tuple[str, ...]] = {
    "HP001": ("engine.document",),
    "HP002": ("engine.config.resolve",),
    "HP003": ("engine.document",),
    "HP004": ("engine.document",),
    "HP005": ("engine.document",),
    "HP006": ("engine.document",),
    "HP007": ("engine.document",),
    "HP008": ("engine.config.resolve", "hp_lsp.analysis"),
    "HP009": ("engine.config.resolve",),
    "HP010": ("engine.config.resolve",),
    "HP011": ("engine.check",),
    "HP012": ("engine.document",),
}
