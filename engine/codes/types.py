"""HP1xx: types and unknown keys."""

ROWS: list[tuple[str, str, str]] = [
    ("HP101", "error", "unknown key (did you mean ...?)"),
    ("HP102", "warning", "unknown key, ignored"),
    ("HP103", "error", "an integer is expected"),
    ("HP104", "error", "true or false is expected"),
    ("HP105", "error", "a number is expected"),
    ("HP106", "error", "a string, or one of the allowed values, is expected"),
    ("HP107", "error", "a mapping is expected"),
    ("HP108", "error", "a degree must be an integer, a list of integers or auto"),
    ("HP109", "error", "value must be positive"),
    ("HP110", "error", "value out of range"),
    ("HP111", "error", "empty candidate list"),
    ("HP112", "information", "read by HyperParallel, not priced by hp-plan"),
    ("HP113", "error", "a key the AutoModels trainer refuses (unknown configuration fields, or one only a search "
     "reads)"),
    ("HP114", "information", "a value HyperParallel's search reads otherwise than hp-plan prices it (a global batch "
     "of 0)"),
]

# code -> the modules that raise it (tests/engine/test_code_owners.py scans the emitters and keeps this true).
RAISED_BY: dict[str, tuple[str, ...]] = {
    "HP101": ("engine.config.search_config", "engine.validate.keys"),
    "HP102": ("engine.validate.keys",),
    "HP103": ("engine.config.reader", "engine.config.search_config", "engine.config.stated_layout",
              "engine.config.train"),
    "HP104": ("engine.config.reader", "engine.config.search_config", "engine.config.train"),
    "HP105": ("engine.config.reader", "engine.config.train"),
    "HP106": (
        "engine.config.model_facts",
        "engine.config.reader",
        "engine.config.search_config",
        "engine.config.stated_layout",
        "engine.config.train",
    ),
    "HP107": ("engine.config.reader", "engine.config.train"),
    "HP108": ("engine.config.search_config",),
    "HP109": ("engine.config.reader", "engine.config.search_config"),
    "HP110": ("engine.config.model_facts", "engine.config.reader", "engine.config.search_config"),
    "HP111": ("engine.config.search_config",),
    "HP112": (
        "engine.config.stated_layout",
        "engine.config.stated_model",
        "engine.config.train",
        "engine.validate.unpriced",
    ),
    "HP113": ("engine.validate.trainer",),
    "HP114": ("engine.config.resolve",),
}
