"""Unknown keys, with a "did you mean" (difflib) and the replacement key in `data` for a quick fix.

Closed sections (a search config's) report every unknown key. Open sections (a train.yaml's: the trainer
reads many keys this project does not) report only a near miss of a key the project reads, which is almost
certainly a typo that silently changes the run (`tp_sise: 8` trains with tp 1). A model's own fields are neither:
they pass through (a train.yaml's to the model, a search config's dropped by HyperParallel's search, [HP] §2.7),
and a field is not a typo because a priced one is spelt alike (Nemotron-H's `mamba_hidden_act` beside
`mlp_hidden_act`), so engine.validate.unpriced says them once as information (HP215) and names the near misses
there.
"""

from __future__ import annotations

from engine.catalog.models import ALIASES
from engine.config.kind import shape_of_map, trainer_runs
from engine.config.reader import Source, did_you_mean
from engine.config.schema import SEARCH, TRAIN_AUTOMODELS, TRAIN_LEGACY, TRAINER_SECTION_FIELDS, Section
from engine.config.train import detect_schema
from engine.diagnostics import MAX_DIAGNOSTICS
from engine.document import Map
from engine.validate.context import Ctx

# Spellings that HyperParallel ignores or renamed: reported as ignored, with the key that works.
RENAMED = {
    "intra_node_bandwidth_gbps": "intra_node_bandwidth_gb_s",
    "inter_node_bandwidth_gbps": "inter_node_bandwidth_gb_s",
}
_ALIAS_KEYS = frozenset(a for aliases in ALIASES.values() for a in aliases)


# Sections of a train.yaml whose keys pass through untouched: the model's (factory arguments beside a `_target_`,
# and `config_overrides`, which goes to the Hugging Face config as it is, [HP] Corrections "Model fields pass
# through"); the fields this planner does not price are said once (HP215, engine.validate.unpriced).
_PASS_THROUGH = ("model.",)
# A search config's model fields are its own too (HyperParallel's search drops the ones its spec does not know,
# [HP] §2.7): said by HP215 as well, while the sections under the model (`model.vision`) are still checked.
_SEARCH_MODEL = "model."


class _Suggestions:
    """The "did you mean" budget of one check: MAX_DIAGNOSTICS suggestions, as many findings as a check reports.
    Past it an unknown key of a closed section is reported with the known keys and one of an open section is
    left alone: a file with hundreds of thousands of unknown keys spent most of its 18 s on difflib."""

    def __init__(self) -> None:
        self.left = MAX_DIAGNOSTICS

    def near(self, key: str, choices: frozenset[str]) -> list[str]:
        if self.left <= 0:
            return []
        self.left -= 1
        return did_you_mean(key, choices)


def check(ctx: Ctx) -> None:
    suggestions = _Suggestions()
    for src in ctx.resolved.sources:
        root = src.root
        if root is None:
            continue
        skip: tuple[str, ...] = ()
        if src.primary and ctx.config.kind == "search":
            schema = SEARCH
        else:
            schema = TRAIN_LEGACY if detect_schema(root) == "legacy" else TRAIN_AUTOMODELS
            skip = _PASS_THROUGH
            if trainer_runs(shape_of_map(root)):  # its strict sections: engine.validate.trainer (HP113)
                skip += ("", *(f"{name}." for name in TRAINER_SECTION_FIELDS))
        _walk(ctx, src, root, schema, "", suggestions, skip, _SEARCH_MODEL if schema is SEARCH else "")


def _walk(ctx: Ctx, src: Source, node: Map, section: Section, prefix: str, suggestions: _Suggestions,
          skip: tuple[str, ...] = (), passed: str = "") -> None:
    """Report the unknown keys of `node` (a `section` at `prefix`), recursing into known sub-sections; nothing
    under a `skip` prefix, and no unknown key directly under `passed` (said by HP215 instead)."""
    if prefix.startswith(tuple(p for p in skip if p)):
        return
    for key, kn, vn in node.items():
        dotted = f"{prefix}{key}"
        child = section.children.get(key)
        if child is not None:
            if isinstance(vn, Map):
                _walk(ctx, src, vn, child, dotted + ".", suggestions, skip, passed)
            continue
        if key in section.read or key in section.known:
            if key in RENAMED:
                _emit(ctx, src, "HP102", f"{dotted} is ignored, by HyperParallel and by hp-plan; hp-plan's own "
                      f"key for this bandwidth is {RENAMED[key]} (GB/s per device, one direction: a value in "
                      "gigabits per second is 8 times larger)", kn.range, dotted, {"replace_key": RENAMED[key]})
            continue
        is_model = prefix.endswith("model.") or prefix.endswith("config_overrides.")
        if is_model and key in _ALIAS_KEYS:
            continue
        if prefix in skip or (passed and prefix == passed):
            continue
        reads = section.read | frozenset(section.children)
        near = suggestions.near(key, reads | section.known)
        near_read = [k for k in near if k in reads]
        if section.open:
            if not near_read:
                continue
            code = "HP101"
        else:
            code = "HP102" if prefix == "model." else "HP101"
        where = f"in {prefix[:-1]}" if prefix else "at the top level"
        if near:
            msg = f"unknown key '{key}' {where}; did you mean '{near[0]}'?"
            data = {"replace_key": near[0], "candidates": near}
        else:
            valid = sorted(section.read | frozenset(section.children))
            msg = f"unknown key '{key}' {where}; known keys: {', '.join(valid)}"
            data = {"candidates": valid}
        if code == "HP102":
            msg += " (HyperParallel drops it silently)"
        _emit(ctx, src, code, msg, kn.range, dotted, data)


def _emit(ctx: Ctx, src: Source, code: str, msg: str, rng, dotted: str, data: dict) -> None:  # type: ignore[no-untyped-def]
    from engine.diagnostics import Diagnostic

    ctx.diags.append(Diagnostic(code, msg, rng, dotted, None, None if src.primary else src.path, data))
