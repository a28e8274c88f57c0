"""HP2xx: model facts and catalog resolution."""

ROWS: list[tuple[str, str, str]] = [
    ("HP201", "error", "required model field missing or not positive"),
    ("HP202", "error", "attention heads not a multiple of key/value heads"),
    ("HP203", "error", "no feed-forward width resolves for the routed experts"),
    ("HP204", "error", "no width resolves for the shared experts"),
    ("HP205", "warning", "model name cannot be resolved offline (the model stays unknown)"),
    ("HP206", "error", "no model stated"),
    ("HP207", "warning", "trained sequence length not stated"),
    ("HP208", "warning", "unknown activation (hidden_act)"),
    ("HP209", "error", "expert groups inconsistent with the expert count or the groups per token"),
    ("HP210", "error", "experts per token inconsistent with the expert count"),
    ("HP211", "error", "first_k_dense_replace exceeds the layer count"),
    ("HP212", "error", "vision tower incomplete: a required field missing or not positive"),
    ("HP213", "warning", "visual sequence length not stated (1024 visual tokens assumed)"),
    ("HP214", "information", "a model path not found here resolved to the catalog model its last component names"),
    ("HP215", "information", "model fields not priced, said once per section (never an error): a train.yaml's go "
     "to the model as they are, a search config's are dropped by HyperParallel's search, and the message names "
     "the priced field a near miss is spelt like"),
]

# code -> the modules that raise it (tests/engine/test_code_owners.py scans the emitters and keeps this true).
RAISED_BY: dict[str, tuple[str, ...]] = {
    "HP201": ("engine.config.model_facts",),
    "HP202": ("engine.config.model_facts",),
    "HP203": ("engine.config.model_facts",),
    "HP204": ("engine.config.model_facts",),
    "HP205": ("engine.config.stated_model",),
    "HP206": ("engine.config.stated_model",),
    "HP207": ("engine.config.stated_model",),
    "HP208": ("engine.config.model_facts",),
    "HP209": ("engine.config.model_facts",),
    "HP210": ("engine.config.model_facts",),
    "HP211": ("engine.config.model_facts",),
    "HP212": ("engine.config.vision",),
    "HP213": ("engine.config.vision",),
    "HP214": ("engine.config.train",),
    "HP215": ("engine.validate.unpriced",),
}
