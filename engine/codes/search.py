"""HP6xx: search refusals and advice.

The refusals keep the meaning of HyperParallel's three runner refusals ([HP] §5.11: nothing
fits the lists, nothing fits the budget, no candidate makes the global batch) and add what its messages
lack: where the offending value was written and, in numbers, what would work instead.

HP611 is "information", not "hint": it is the finding a user opens the file for, and VS Code leaves hints out
of the Problems panel and the status-bar count and draws them as faint dots (docs/diagnostics.md, Severities).
"""

ROWS: list[tuple[str, str, str]] = [
    ("HP600", "error", "no strategy can make the global batch size"),
    ("HP601", "error", "no strategy that fits is in the candidate lists"),
    ("HP602", "error", "no strategy fits the memory budget"),
    ("HP603", "error", "every candidate strategy breaks a validity rule"),
    ("HP604", "error", "the search cannot run: the model, the cluster or the global batch is unknown"),
    ("HP610", "warning", "the stated strategy does not fit the memory budget"),
    ("HP611", "information", "a faster strategy exists"),
    ("HP613", "information", "the best plan counts the embedding and loss in the pipeline split (the framework's "
     "layout option the search chose)"),
    ("HP614", "information", "the best plan pads the layer count with no-op layers so that DualPipeV can cut it "
     "or an interleaved split fills equal chunks (MindSpeed-LLM's noop_layers, which the search chose)"),
    ("HP620", "warning", "the best plan runs below 10% MFU (names the dominating term)"),
]

# code -> the modules that raise it (tests/engine/test_code_owners.py scans the emitters and keeps this true).
RAISED_BY: dict[str, tuple[str, ...]] = {
    "HP600": ("engine.search.refusals",),
    "HP601": ("engine.search.refusals",),
    "HP602": ("engine.search.refusals",),
    "HP603": ("engine.search.refusals",),
    "HP604": ("engine.search.refusals",),
    "HP610": ("engine.search.stated",),
    "HP611": ("engine.search.stated",),
    "HP613": ("engine.search",),
    "HP614": ("engine.search",),
    "HP620": ("engine.search.warnings",),
}
