"""Model facts: catalog / local config.json, then the user's keys, merged key by key into a ModelSpec.

Priority, lowest first ([HP] §2.3 and §2.5: explicit overrides always win): what
`pretrained_model_name_or_path` resolves to, the train.yaml's `model.config_overrides`, the search config's
`model`. Each fact keeps the Location where it was written; facts from the catalog point at the name.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from engine.catalog.models import ALIASES, MODEL_FIELDS
from engine.config.reader import Source, Val
from engine.config.types import Location
from engine.document import Map, Scalar, Seq
from engine.integers import MAX_MODEL_FACT, largest_divisor_at_most, listed_divisors, shown_int
from engine.positions import DOCUMENT_START
from engine.specs import HybridLayers, ModelSpec

REQUIRED = ("num_hidden_layers", "hidden_size", "num_attention_heads", "vocab_size")
BOOL_FIELDS = frozenset({"tie_word_embeddings", "use_flash_attention", "learned_positions", "linear_bias",
                         "use_sliding_window"})
LIST_FIELDS = frozenset({"layer_types"})
FLOAT_FIELDS = frozenset({"capacity_factor", "hidden_dropout", "attention_dropout"})
STR_FIELDS = frozenset({"hidden_act", "mlp_hidden_act", "hybrid_override_pattern"})


# What a model field holds, as fact_kind_problem names it (the caller says it with the matching HP103-HP106).
INTEGER, FINITE_NUMBER, TRUE_OR_FALSE, A_STRING, A_LIST = (
    "an integer", "a finite number", "true or false", "a string", "a list")


def fact_kind_problem(key: str, value: object) -> str | None:
    """What field `key` holds (INTEGER, FINITE_NUMBER, TRUE_OR_FALSE, A_STRING, A_LIST) when `value` is not of that
    kind, else None. The user's keys are typed by the reader; a local config.json's are not, and its NaN,
    Infinity, lists and strings reached the rules' int() as an internal error (HP900)."""
    if key in BOOL_FIELDS:
        return None if isinstance(value, bool) else TRUE_OR_FALSE
    if key in STR_FIELDS:
        return None if isinstance(value, str) else A_STRING
    if key in LIST_FIELDS:
        return None if isinstance(value, list) else A_LIST
    if key in FLOAT_FIELDS:
        ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        return None if ok else FINITE_NUMBER
    return None if isinstance(value, int) and not isinstance(value, bool) else INTEGER


# Hugging Face activation names: gated (3-matrix) MLP vs plain (2-matrix) MLP, docs/formats.md §2 `hidden_act`.
GATED_ACTS = frozenset({"silu", "swiglu", "swish", "geglu", "reglu"})
PLAIN_ACTS = frozenset({"gelu", "gelu_new", "gelu_pytorch_tanh", "gelu_fast", "quick_gelu", "relu", "gelu_10",
                        "relu2"})

_ALIAS_TO_CANON = {alias: canon for canon, aliases in ALIASES.items() for alias in aliases}


def canonical(key: str) -> str | None:
    if key in MODEL_FIELDS:
        return key
    return _ALIAS_TO_CANON.get(key)


def read_model_fields(src: Source, section: Map | None, prefix: str, *, skip: frozenset[str] = frozenset()
                      ) -> dict[str, Val]:
    """The model facts written in one mapping (config_overrides or a search config's model), typed; HF
    aliases (n_routed_experts, num_local_experts, n_layer, ...) are read under their canonical names."""
    out: dict[str, Val] = {}
    if section is None:
        return out
    for key, _kn, vn in section.items():
        canon = canonical(key)
        if canon is None or key in skip or (isinstance(vn, Scalar) and vn.value is None):
            continue  # a null states nothing (`sliding_window: null`, a factory's `num_experts: null`)
        if canon in out and key != canon:
            continue  # the canonical spelling wins over an alias in the same mapping
        dotted = f"{prefix}.{key}"
        v: Val | None
        if canon in BOOL_FIELDS:
            v = src.bool_(section, key, dotted)
        elif canon in FLOAT_FIELDS:  # a dropout may be 0 (none); a capacity factor must be above it
            v = src.number(section, key, dotted, minimum=0.0, strict=canon == "capacity_factor")
        elif canon in STR_FIELDS:
            v = src.str_(section, key, dotted)
        elif canon in LIST_FIELDS:
            v = _names(src, section, key, dotted)
        else:
            v = src.int_(section, key, dotted, minimum=0, maximum=None)  # bounded by _range_ok
        if v is not None:
            out[canon] = v
    return out


def _names(src: Source, section: Map, key: str, dotted: str) -> Val | None:
    """A list of layer-type names (`layer_types: [sliding_attention, full_attention, ...]`) as a tuple."""
    v = src.val(section, key, dotted)
    node = section.get(key)
    if v is None or not isinstance(node, Seq) or not all(isinstance(i, Scalar) and isinstance(i.value, str)
                                                         for i in node.items):
        if v is not None:
            src.diag("HP106", f"{dotted} must list layer type names, e.g. [full_attention, linear_attention]",
                     v.loc.value, dotted)
        return None
    return Val(tuple(str(i.value) for i in node.items if isinstance(i, Scalar)), dotted, v.loc)


@dataclass(frozen=True, slots=True)
class ModelResult:
    spec: ModelSpec | None
    locations: Mapping[str, Location]
    # What resolved, complete or not (None when no model facts were read at all): the degree rules use it.
    facts: ModelSpec | None = None  # the spec, or a partial one (0 = unknown) when the model is incomplete
    experts_known: bool = True  # engine.config.resolve.Resolved.experts_known (engine.config.stated_model)


@dataclass(frozen=True, slots=True)
class _Facts:
    """The merged model facts and where to report on them: each rule below reads facts through `int_` / `bool_`
    and reports through `emit`, at the fact's own location or at the model's anchor when the fact is absent."""

    merged: Mapping[str, Val]
    report: Source
    anchor: Location | None
    anchor_path: str

    def emit(self, code: str, msg: str, v: Val | None, *, data: dict | None = None) -> None:
        report = self.report
        if v is not None:
            sink = report if v.loc.file == report.path else _foreign(report, v)
            sink.diag(code, msg, v.loc.value, v.path, data=data)
            if sink is not report:
                report.diags.extend(sink.diags)
        else:
            rng = self.anchor.key if self.anchor else DOCUMENT_START
            report.diag(code, msg, rng, self.anchor_path, data=data)

    def int_(self, key: str) -> int:
        v = self.merged.get(key)
        return int(v.value) if v is not None and not isinstance(v.value, bool) else 0

    def bool_(self, key: str, default: bool) -> bool:
        v = self.merged.get(key)
        return bool(v.value) if v is not None else default


def build_model(
    layers: list[dict[str, Val]],
    *,
    name: str,
    seq_len: int,
    report: Source,
    anchor: Location | None,
    anchor_path: str,
) -> ModelResult:
    """Merge field layers (lowest priority first) and build the ModelSpec, reporting what is missing or
    inconsistent (HP201-HP211) through `report` at the fact's own location, or at `anchor` (the model
    section or the name that failed to resolve) when the fact is absent."""
    merged: dict[str, Val] = {}
    for layer in layers:
        merged.update(layer)
    locations = {f"model.{k}": v.loc for k, v in merged.items()}
    facts = _Facts(merged, report, anchor, anchor_path)
    # Every rule runs (an editor shows all findings at once), then the model prices only when none failed.
    if not _range_ok(facts):  # the other rules divide and list by these facts: bounded first
        return ModelResult(None, locations, None)
    ok = all([_required_ok(facts), _heads_ok(facts), _experts_ok(facts), _groups_ok(facts), _layers_ok(facts)])
    gated = _gated_mlp(facts)
    if not ok:
        return ModelResult(None, locations, _partial_spec(facts, name, seq_len))
    spec = _model_spec(facts, name, seq_len, gated)
    return ModelResult(spec, locations, spec)


def _required_ok(facts: _Facts) -> bool:
    """HP201: every required fact present and positive."""
    ok = True
    for f in REQUIRED:
        v = facts.merged.get(f)
        if v is None:
            facts.emit("HP201", f"{f} is required and was not supplied. Supply it in model.config_overrides "
                       "(train.yaml) or the search config's model, or name a catalog model in "
                       "pretrained_model_name_or_path", None, data={"missing": f})
            ok = False
        elif int(v.value) <= 0:
            facts.emit("HP201", f"{f} must be > 0, got {v.value}. Supply the model's real value", v)
            ok = False
    return ok


def _range_ok(facts: _Facts) -> bool:
    """HP110: every integer fact within MAX_MODEL_FACT (engine.integers), from whichever source stated it (the
    user's keys, a local config.json), so no rule, divisor list or price below sees a larger one."""
    ok = True
    for key, v in facts.merged.items():
        if isinstance(v.value, int) and not isinstance(v.value, bool) and v.value > MAX_MODEL_FACT:
            facts.emit("HP110", f"{key} must be at most {MAX_MODEL_FACT:,} (the largest model fact hp-plan "
                       f"prices), got {shown_int(v.value)}", v)
            ok = False
    return ok


def _heads_ok(facts: _Facts) -> bool:
    """HP202: the key/value heads group the attention heads evenly."""
    heads, kv = facts.int_("num_attention_heads"), facts.int_("num_key_value_heads")
    kv_val = facts.merged.get("num_key_value_heads")
    ok = True
    if heads > 0 and kv > 0 and heads % kv:
        near = largest_divisor_at_most(heads, kv)
        facts.emit("HP202", f"num_attention_heads ({heads}) must be a multiple of num_key_value_heads ({kv}); "
                   f"{near} would divide it", kv_val, data={"nearest_valid": near, "valid": listed_divisors(heads)})
        ok = False
    if kv > heads > 0:
        facts.emit("HP202", f"num_key_value_heads ({kv}) exceeds num_attention_heads ({heads})", kv_val)
        ok = False
    return ok


def _moe_width(facts: _Facts) -> int:
    """A routed expert's feed-forward width: moe_intermediate_size, else the dense width (0: none resolves)."""
    experts = facts.int_("num_experts")
    return facts.int_("moe_intermediate_size") or (facts.int_("intermediate_size") if experts > 1 else 0)


def _experts_ok(facts: _Facts) -> bool:
    """HP203, HP204, HP210: a mixture of experts states widths and a routing that can be priced."""
    ok = True
    experts, moe_w = facts.int_("num_experts"), _moe_width(facts)
    if experts > 1 and moe_w <= 0:
        facts.emit("HP203", f"no feed-forward width resolves for {experts} routed experts; declare "
                   "moe_intermediate_size, or intermediate_size if the experts run at the dense width",
                   facts.merged.get("num_experts"))
        ok = False
    shared = facts.int_("num_shared_experts")
    if shared > 0 and experts > 1 and facts.int_("shared_expert_intermediate_size") <= 0 and moe_w <= 0:
        facts.emit("HP204", "num_shared_experts is set but no width resolves for it; declare "
                   "shared_expert_intermediate_size or moe_intermediate_size", facts.merged.get("num_shared_experts"))
        ok = False
    topk = facts.int_("num_experts_per_tok")
    if experts > 1 and topk > experts:
        facts.emit("HP210", f"num_experts_per_tok ({topk}) exceeds num_experts ({experts})",
                   facts.merged.get("num_experts_per_tok"))
        ok = False
    if experts > 1 and topk == 0:
        facts.emit("HP210", f"num_experts_per_tok is not set for a model with {experts} experts; pricing top-1 "
                   "routing", facts.merged.get("num_experts"), data={"missing": "num_experts_per_tok"})
    return ok


def _groups_ok(facts: _Facts) -> bool:
    """HP209: group-limited routing (DeepSeek-V3's n_group / topk_group) the router can run: the groups split
    the experts evenly (the router views its scores as n_group rows of num_experts / n_group) and a token
    picks at most every group (a top-k over n_group group scores)."""
    experts, groups, per_tok = facts.int_("num_experts"), facts.int_("n_group"), facts.int_("topk_group")
    if experts <= 1 or groups <= 0:
        return True
    if experts % groups:
        facts.emit("HP209", f"n_group ({groups}) must divide num_experts ({experts}): the router splits the "
                   "experts into n_group equal groups", facts.merged.get("n_group"),
                   data={"nearest_valid": largest_divisor_at_most(experts, groups), "valid": listed_divisors(experts)})
        return False
    if per_tok > groups:
        facts.emit("HP209", f"topk_group ({per_tok}) exceeds n_group ({groups})", facts.merged.get("topk_group"),
                   data={"nearest_valid": groups})
        return False
    return True


def _layers_ok(facts: _Facts) -> bool:
    """HP211: the dense prefix of a mixture of experts fits in the model."""
    n_layers, fkd = facts.int_("num_hidden_layers"), facts.int_("first_k_dense_replace")
    if n_layers > 0 and fkd > n_layers:
        facts.emit("HP211", f"first_k_dense_replace ({fkd}) exceeds num_hidden_layers ({n_layers})",
                   facts.merged.get("first_k_dense_replace"))
        return False
    return True


def _gated_mlp(facts: _Facts) -> bool:
    """Whether the MLP is gated (three matrices), from hidden_act (a hybrid model's mlp_hidden_act: Nemotron-H's
    squared ReLU, `relu2`, is plain); HP208 for an activation this planner does not know (priced as gated, the
    modern default)."""
    act_v = facts.merged.get("mlp_hidden_act") or facts.merged.get("hidden_act")
    if act_v is None:
        return True
    act = str(act_v.value).strip().lower()
    if act in PLAIN_ACTS:
        return False
    if act not in GATED_ACTS:
        facts.emit("HP208", f"{act_v.path.rsplit('.', 1)[-1]} '{act_v.value}' is not one this planner knows; pricing a gated (SwiGLU) "
                   f"MLP. Known: {', '.join(sorted(GATED_ACTS | PLAIN_ACTS))}", act_v)
    return True


def _partial_spec(facts: _Facts, name: str, seq_len: int) -> ModelSpec:
    """A half-written model (heads or vocab not typed yet) cannot be priced, but `tp: 3` against `hidden_size:
    4096` is already wrong and an editor should say so: what did resolve, with 0 for each unknown required fact,
    for the degree rules only."""
    def known(key: str) -> int:
        return max(facts.int_(key), 0)

    experts = facts.int_("num_experts")
    moe = experts > 1
    return ModelSpec(
        name=name, num_layers=known("num_hidden_layers"), hidden=known("hidden_size"),
        heads=known("num_attention_heads"), vocab=known("vocab_size"), ffn=known("intermediate_size"),
        kv_heads=known("num_key_value_heads"), seq_len=seq_len, num_experts=experts if moe else 0,
        moe_ffn=max(_moe_width(facts), 0) if moe else 0,
        first_k_dense=facts.int_("first_k_dense_replace") if moe else 0, kv_lora_rank=known("kv_lora_rank"),
        mtp_depth=known("mtp_depth"))


def _model_spec(facts: _Facts, name: str, seq_len: int, gated: bool) -> ModelSpec:
    """The priced model: every fact the rules above accepted."""
    iv, merged = facts.int_, facts.merged
    experts = iv("num_experts")
    moe = experts > 1
    cap_v = merged.get("capacity_factor")
    return ModelSpec(
        name=name,
        num_layers=iv("num_hidden_layers"),
        hidden=iv("hidden_size"),
        heads=iv("num_attention_heads"),
        vocab=iv("vocab_size"),
        ffn=iv("intermediate_size"),
        kv_heads=iv("num_key_value_heads"),
        head_dim=iv("head_dim"),
        seq_len=seq_len,
        tie_embeddings=facts.bool_("tie_word_embeddings", False),
        gated_mlp=gated,
        learned_positions=facts.bool_("learned_positions", False),
        linear_bias=facts.bool_("linear_bias", False),
        use_flash_attention=facts.bool_("use_flash_attention", True),
        hidden_dropout=_float_or_none(merged.get("hidden_dropout")),
        attention_dropout=_float_or_none(merged.get("attention_dropout")),
        num_experts=experts if moe else 0,
        experts_per_tok=(iv("num_experts_per_tok") or 1) if moe else 0,
        num_shared_experts=iv("num_shared_experts") if moe else 0,
        moe_ffn=_moe_width(facts) if moe else 0,
        shared_ffn=iv("shared_expert_intermediate_size") if moe else 0,
        first_k_dense=iv("first_k_dense_replace") if moe else 0,
        capacity_factor=float(cap_v.value) if cap_v is not None else 1.0,
        expert_groups=iv("n_group") if moe else 0,
        groups_per_tok=iv("topk_group") if moe else 0,
        token_drop=moe and cap_v is not None,
        kv_lora_rank=iv("kv_lora_rank"),
        q_lora_rank=iv("q_lora_rank"),
        qk_rope_head_dim=iv("qk_rope_head_dim"),
        qk_nope_head_dim=iv("qk_nope_head_dim"),
        v_head_dim=iv("v_head_dim"),
        mtp_depth=iv("mtp_depth"),
        attention_span=attention_span(merged, seq_len),
        hybrid=hybrid_layers(merged),
    )


# The layer kinds a hybrid pattern may hold for the cost model to price it (engine.specs.HybridLayers: M Mamba-2,
# * attention, - MLP, E MoE, Megatron-Core's Symbols as Megatron-Bridge's NemotronH bridge checks them); another
# character (Megatron-Core's pipeline `|` or MTP `/` separators, GDN layers), MLP and MoE layers in one pattern, or
# MoE layers in a model without experts leave the model uniform and said unpriced (HP112, engine.validate.unpriced).
HYBRID_KINDS = frozenset("M*-E")
# NemotronHConfig's defaults (transformers, configuration_nemotron_h.py), for the widths a config leaves out.
_MAMBA_DEFAULTS = {"mamba_head_dim": 64, "ssm_state_size": 128, "n_groups": 8, "conv_kernel": 4}


def hybrid_layers(merged: Mapping[str, Val]) -> HybridLayers | None:
    """The hybrid model's layer kinds, where `hybrid_override_pattern` holds one of M, * and - per layer (its
    length num_hidden_layers, as Megatron-Core asserts); None otherwise. The mixer's heads default to twice the
    hidden size over the head dimension (Megatron-Core's expand 2)."""
    pattern_v = merged.get("hybrid_override_pattern")
    if pattern_v is None or not isinstance(pattern_v.value, str):
        return None
    pattern = pattern_v.value.strip()

    def iv(key: str) -> int:
        v = merged.get(key)
        ok = v is not None and isinstance(v.value, int) and not isinstance(v.value, bool) and v.value > 0
        return int(v.value) if ok and v is not None else _MAMBA_DEFAULTS.get(key, 0)

    if not pattern or set(pattern) - HYBRID_KINDS or len(pattern) != iv("num_hidden_layers") \
            or ("E" in pattern and ("-" in pattern or iv("num_experts") <= 1)):
        return None
    head_dim = iv("mamba_head_dim")
    heads = iv("mamba_num_heads") or 2 * iv("hidden_size") // max(head_dim, 1)
    return HybridLayers(attention=pattern.count("*"), mlp=pattern.count("-"), mamba=pattern.count("M"),
                        mamba_heads=heads, mamba_head_dim=head_dim, state=iv("ssm_state_size"),
                        groups=iv("n_groups"), conv_kernel=iv("conv_kernel"), moe=pattern.count("E"),
                        pattern=pattern)


# Layer kinds by the names Hugging Face configs write in `layer_types` (GPT-OSS: sliding_attention /
# full_attention; Qwen3-Next and Qwen3.5: linear_attention / full_attention).
WINDOWED_LAYERS = frozenset({"sliding_attention", "sliding_window", "local_attention", "chunked_attention"})
LINEAR_LAYERS = frozenset({"linear_attention", "gated_deltanet", "lightning_attention", "mamba"})


def window_share(w: int, s: int) -> float:
    """Causal attention's work with each query seeing at most w keys, against every earlier key: the score
    matrix holds w·s − w²/2 of s²/2 entries, 2w/s − (w/s)² (1 from w ≥ s)."""
    if w <= 0 or w >= s or s <= 0:
        return 1.0
    r = w / s
    return 2 * r - r * r


def layer_kinds(merged: Mapping[str, Val], layers: int) -> list[str]:
    """Each decoder layer's attention: "full", "window" or "linear". `layer_types` names them; else Qwen3-Next's
    `full_attention_interval` N (every N-th layer full, the others linear); else a `sliding_window` windows
    every layer (Mistral) or, with `use_sliding_window`, the layers from `max_window_layers` on (Qwen2)."""
    def val(key: str) -> object:
        v = merged.get(key)
        return v.value if v is not None else None

    window = val("sliding_window")
    windowed = isinstance(window, int) and not isinstance(window, bool) and window > 0
    types = val("layer_types")
    if isinstance(types, tuple) and types:
        return [("window" if windowed else "full") if t in WINDOWED_LAYERS else
                "linear" if t in LINEAR_LAYERS else "full" for t in (types * (layers // len(types) + 1))[:layers]]
    interval = val("full_attention_interval")
    if isinstance(interval, int) and interval > 0:
        return ["full" if (i + 1) % interval == 0 else "linear" for i in range(layers)]
    use = val("use_sliding_window")
    if not windowed or use is False:
        return ["full"] * layers
    first = val("max_window_layers") if use is True else 0
    first = first if isinstance(first, int) and not isinstance(first, bool) else 0
    return ["window" if i >= first else "full" for i in range(layers)]


def attention_span(merged: Mapping[str, Val], seq_len: int) -> float:
    """The mean share of full causal attention's score-matrix work the decoder layers do at the trained length s
    (1.0: every layer full; the cost model scales attention's core FLOPs by it, engine.cost.timing). A windowed
    layer does window_share(w, s); a linear-attention layer none (its recurrence is said unpriced,
    engine.validate.unpriced); DeepSeek-V3.2's sparse attention attends index_topk keys per query
    (window_share(k, s)) after its lightning indexer scores every causal pair with index_n_heads heads of
    index_head_dim (DSV32 §2.1), a share index_n_heads·index_head_dim / (heads·(d_qk + d_v))
    of the main attention's per-pair work."""
    def iv(key: str) -> int:
        v = merged.get(key)
        return int(v.value) if v is not None and isinstance(v.value, int) and not isinstance(v.value, bool) else 0

    layers = iv("num_hidden_layers")
    if layers <= 0 or seq_len <= 0:
        return 1.0
    window = iv("sliding_window")
    full = 1.0
    topk, heads = iv("index_topk"), iv("num_attention_heads")
    if topk > 0 and heads > 0:
        head_dim = iv("head_dim") or iv("hidden_size") // heads
        mla = iv("kv_lora_rank") > 0  # the cost model's attention shape (engine.cost.model.attn_shape)
        d_qk = (iv("qk_nope_head_dim") or head_dim) + iv("qk_rope_head_dim") if mla else head_dim
        d_v = (iv("v_head_dim") or head_dim) if mla else head_dim
        full = window_share(topk, seq_len) + iv("index_n_heads") * iv("index_head_dim") / (heads * (d_qk + d_v))
    share = {"full": full, "window": window_share(window, seq_len), "linear": 0.0}
    kinds = layer_kinds(merged, layers)
    return sum(share[k] for k in kinds) / len(kinds)


def _foreign(report: Source, v: Val) -> Source:
    """A throwaway Source that stamps diagnostics with the fact's own file (a train.yaml under a search config)."""
    return Source(report.doc, v.loc.file, primary=False)


def _float_or_none(v: Val | None) -> float | None:
    """A stated probability (dropout), or None when the files do not state it."""
    if v is None or not isinstance(v.value, int | float) or isinstance(v.value, bool):
        return None
    return float(v.value)
