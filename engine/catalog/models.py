"""Offline model catalog: public architectures by Hugging Face id, and local `config.json` reading.

`model.pretrained_model_name_or_path` is resolved here and never over the network (docs/formats.md §1). The
facts are the architecture rows of [MODELS] (§1 dense, §2 MoE, §3 GPT-style paper
shapes), written with the Hugging Face `config.json` field names that a search config's `model:` and a
train.yaml's `model.config_overrides` use, so catalog facts and user overrides merge key by key.

Two extension keys carry GPT-style facts that HF configs express per architecture: `learned_positions`
(absolute position embeddings) and `linear_bias` (biases on every linear layer), both ModelSpec fields.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from engine.files import ReadFailure, read_bounded

MAX_CONFIG_JSON_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class CatalogModel:
    """One catalog entry: canonical id, field values (HF names), aliases and the [MODELS] status tag."""

    id: str
    fields: Mapping[str, Any]
    aliases: tuple[str, ...] = ()
    source: str = ""


def _m(id: str, source: str, aliases: tuple[str, ...] = (), **fields: Any) -> CatalogModel:
    return CatalogModel(id, MappingProxyType(fields), aliases, source)


def _llama(layers: int, hidden: int, ffn: int, heads: int, kv: int, vocab: int, max_pos: int) -> dict[str, Any]:
    return dict(num_hidden_layers=layers, hidden_size=hidden, intermediate_size=ffn, num_attention_heads=heads,
                num_key_value_heads=kv, head_dim=128, vocab_size=vocab, max_position_embeddings=max_pos,
                tie_word_embeddings=False, hidden_act="silu")


def _gpt(layers: int, hidden: int, heads: int, vocab: int = 51200, seq: int = 2048, **extra: Any) -> dict[str, Any]:
    """GPT-style paper shape: GeLU MLP 4h, MHA, tied embeddings, learned positions, biases ([MODELS] §3)."""
    out: dict[str, Any] = dict(num_hidden_layers=layers, hidden_size=hidden, intermediate_size=4 * hidden,
                               num_attention_heads=heads, num_key_value_heads=heads, vocab_size=vocab,
                               max_position_embeddings=seq, tie_word_embeddings=True, hidden_act="gelu",
                               learned_positions=True, linear_bias=True)
    out.update(extra)
    return out


_QWEN3_MOE_COMMON: dict[str, Any] = dict(head_dim=128, vocab_size=151936, max_position_embeddings=40960,
                                         num_experts=128, num_experts_per_tok=8, num_shared_experts=0,
                                         tie_word_embeddings=False, hidden_act="silu")

# [MODELS] §1-§3. Tags in `source`: [C] checked against config.json, [P] paper, [U] unconfirmed.
CATALOG: tuple[CatalogModel, ...] = (
    # -- §1 dense -------------------------------------------------------------------------------------------
    _m("meta-llama/Llama-3.1-8B", "[MODELS] §1 [C]", ("meta-llama/Meta-Llama-3.1-8B", "llama3-8b", "llama-3-8b"),
       **_llama(32, 4096, 14336, 32, 8, 128256, 131072)),
    _m("meta-llama/Llama-3.1-70B", "[MODELS] §1 [C]",
       ("meta-llama/Meta-Llama-3.1-70B", "meta-llama/Llama-3.3-70B", "llama3-70b", "llama-3-70b"),
       **_llama(80, 8192, 28672, 64, 8, 128256, 131072)),
    _m("meta-llama/Llama-3.1-405B", "[MODELS] §1 [C]", ("meta-llama/Meta-Llama-3.1-405B", "llama3-405b"),
       **_llama(126, 16384, 53248, 128, 8, 128256, 131072)),
    _m("meta-llama/Llama-2-7b-hf", "[MODELS] §1 [C]", ("meta-llama/Llama-2-7b", "llama2-7b"),
       **_llama(32, 4096, 11008, 32, 32, 32000, 4096)),
    _m("meta-llama/Llama-2-13b-hf", "[MODELS] §1 [C]", ("meta-llama/Llama-2-13b", "llama2-13b"),
       **_llama(40, 5120, 13824, 40, 40, 32000, 4096)),
    _m("meta-llama/Llama-2-70b-hf", "[MODELS] §1 [C]", ("meta-llama/Llama-2-70b", "llama2-70b"),
       **_llama(80, 8192, 28672, 64, 8, 32000, 4096)),
    _m("Qwen/Qwen2.5-7B", "[MODELS] §1 [C]", ("qwen2.5-7b",),
       **_llama(28, 3584, 18944, 28, 4, 152064, 131072)),
    _m("Qwen/Qwen2.5-72B", "[MODELS] §1 [C]; max_position_embeddings of the base [U]", ("qwen2.5-72b",),
       **_llama(80, 8192, 29568, 64, 8, 152064, 131072)),
    _m("Qwen/Qwen3-8B", "[MODELS] §1 [C]", ("qwen3-8b",), **_llama(36, 4096, 12288, 32, 8, 151936, 40960)),
    _m("Qwen/Qwen3-32B", "[MODELS] §1 [C] (heads x head_dim = 8192 != hidden)", ("qwen3-32b",),
       **_llama(64, 5120, 25600, 64, 8, 151936, 40960)),
    # -- §2 MoE ---------------------------------------------------------------------------------------------
    _m("Qwen/Qwen3-30B-A3B", "[MODELS] §2 [C]", ("qwen3-30b-a3b",),
       num_hidden_layers=48, hidden_size=2048, intermediate_size=6144, num_attention_heads=32,
       num_key_value_heads=4, moe_intermediate_size=768, **_QWEN3_MOE_COMMON),
    _m("Qwen/Qwen3-235B-A22B", "[MODELS] §2 [C] core fields", ("qwen3-235b-a22b",),
       num_hidden_layers=94, hidden_size=4096, intermediate_size=12288, num_attention_heads=64,
       num_key_value_heads=4, moe_intermediate_size=1536, **_QWEN3_MOE_COMMON),
    _m("mistralai/Mixtral-8x7B-v0.1", "[MODELS] §2 [C]", ("mixtral-8x7b", "mistralai/Mixtral-8x7B"),
       num_hidden_layers=32, hidden_size=4096, intermediate_size=14336, num_attention_heads=32,
       num_key_value_heads=8, head_dim=128, vocab_size=32000, max_position_embeddings=32768, num_experts=8,
       num_experts_per_tok=2, num_shared_experts=0, tie_word_embeddings=False, hidden_act="silu"),
    _m("mistralai/Mixtral-8x22B-v0.1", "[MODELS] §2 [C]", ("mixtral-8x22b", "mistralai/Mixtral-8x22B"),
       num_hidden_layers=56, hidden_size=6144, intermediate_size=16384, num_attention_heads=48,
       num_key_value_heads=8, head_dim=128, vocab_size=32000, max_position_embeddings=65536, num_experts=8,
       num_experts_per_tok=2, num_shared_experts=0, tie_word_embeddings=False, hidden_act="silu"),
    _m("deepseek-ai/DeepSeek-V3", "[MODELS] §2 [C] config, [P] DeepSeek-V3 report §2",
       ("deepseek-ai/DeepSeek-V3-Base", "deepseek-v3", "deepseek-ai/DeepSeek-R1"),
       num_hidden_layers=61, hidden_size=7168, intermediate_size=18432, num_attention_heads=128,
       num_key_value_heads=128, vocab_size=129280, max_position_embeddings=163840, num_experts=256,
       num_experts_per_tok=8, num_shared_experts=1, moe_intermediate_size=2048, first_k_dense_replace=3,
       n_group=8, topk_group=4, q_lora_rank=1536, kv_lora_rank=512, qk_rope_head_dim=64, qk_nope_head_dim=128,
       v_head_dim=128, mtp_depth=1, tie_word_embeddings=False, hidden_act="silu"),
    # -- §3 GPT-style and paper shapes ----------------------------------------------------------------------
    # GPT-3: Brown et al. 2020 Table 2.1; vocabulary padded to 51200 as Megatron reproductions do ([MODELS] §4.4).
    _m("gpt3-175b", "[MODELS] §3 [P]", ("gpt-3", "gpt3"), **_gpt(96, 12288, 96, head_dim=128)),
    _m("mt-nlg-530b", "[MODELS] §3 [C] NAR21 Table 1 / KOR22 Table 3", ("mtnlg-530b", "megatron-turing-nlg-530b"),
       **_gpt(105, 20480, 128, head_dim=160)),
    _m("bigscience/bloom", "[MODELS] §3: ALiBi (no position embeddings), linear biases",
       ("bloom-176b", "bloom"), **_gpt(70, 14336, 112, vocab=250880, learned_positions=False)),
    _m("mpt-70b", "[MODELS] §3: llm-foundry mpt-70b.yaml [C]; positions and tying [U]", (),
       **_gpt(80, 8192, 64, vocab=50368, linear_bias=False)),
    # NAR21 Table 1 and KOR22 Table 3 calibration shapes (V 51200, s 2048, ffn 4h, tied, learned positions).
    *(
        _m(f"megatron-{size}", "[MODELS] §3.1 NAR21 Table 1 [C]", (), **_gpt(layers, hidden, heads))
        for size, layers, hidden, heads in (
            ("1.7b", 24, 2304, 24), ("3.6b", 30, 3072, 32), ("7.5b", 36, 4096, 32), ("18.4b", 40, 6144, 48),
            ("39.1b", 48, 8192, 64), ("76.1b", 60, 10240, 80), ("145.6b", 80, 12288, 96),
            ("310.1b", 96, 16384, 128), ("1t", 128, 25600, 160), ("22b", 48, 6144, 64),
        )
    ),
)

_SUFFIXES = ("-instruct", "-base", "-chat", "-hf", "-fp8")


def _norm(name: str) -> str:
    return name.strip().strip("/").lower()


def _build_index() -> dict[str, CatalogModel]:
    index: dict[str, CatalogModel] = {}
    for entry in CATALOG:
        for n in (entry.id, *entry.aliases):
            key = _norm(n)
            index.setdefault(key, entry)
            if "/" in key:
                index.setdefault(key.split("/", 1)[1], entry)
    return index


_INDEX: Mapping[str, CatalogModel] = MappingProxyType(_build_index())


def lookup(name: str) -> CatalogModel | None:
    """Catalog entry for an HF id or short name: case-insensitive, with or without the organisation, and
    ignoring post-training suffixes (-Instruct, -Base, -chat, -hf) that keep the architecture ([MODELS] §4.8)."""
    if not isinstance(name, str) or not name.strip():
        return None
    key = _norm(name)
    candidates = [key]
    if "/" in key:
        candidates.append(key.split("/", 1)[1])
    for c in list(candidates):
        stripped = c
        for _ in range(3):
            for suf in _SUFFIXES:
                if stripped.endswith(suf):
                    stripped = stripped[: -len(suf)]
            candidates.append(stripped)
    for c in candidates:
        hit = _INDEX.get(c)
        if hit is not None:
            return hit
    return None


# -- Hugging Face config.json field aliases ----------------------------------------------------------------

# Alias -> canonical name; the first present, non-null alias wins unless the canonical name is present
# ([MODELS] §4.1; [HP] §2.5 "Aliases"; Mixtral's num_local_experts resolved explicitly).
ALIASES: Mapping[str, tuple[str, ...]] = MappingProxyType({
    "num_hidden_layers": ("n_layer", "n_layers", "num_layers"),
    "hidden_size": ("n_embd", "d_model", "dim"),
    "num_attention_heads": ("n_head", "n_heads", "num_heads"),
    "num_key_value_heads": ("multi_query_group_num", "n_kv_heads", "num_kv_heads"),
    "intermediate_size": ("n_inner", "ffn_hidden_size", "ffn_dim", "inter_dim"),
    "max_position_embeddings": ("n_positions", "max_seq_len", "seq_length", "seq_len"),
    "num_experts": ("n_routed_experts", "num_local_experts", "moe_num_experts"),
    "num_shared_experts": ("n_shared_experts",),
    "mtp_depth": ("num_nextn_predict_layers", "mtp_num_hidden_layers"),
    "hidden_act": ("activation_function", "hidden_activation"),
    "moe_intermediate_size": ("moe_inter_dim",),
    # Nemotron 3's (NemotronHConfig) name for the shared expert's width.
    "shared_expert_intermediate_size": ("moe_shared_expert_intermediate_size",),
    # GLM-5's recipes count the leading dense layers under this name.
    "first_k_dense_replace": ("num_dense_layers",),
    "hidden_dropout": ("resid_pdrop", "hidden_dropout_prob"),
    "attention_dropout": ("attn_pdrop", "attention_probs_dropout_prob"),
    # Megatron-Core's name for Nemotron-H's pattern (its hybrid models' `hybrid_layer_pattern`).
    "hybrid_override_pattern": ("hybrid_layer_pattern",),
})

# Canonical model fields this project understands (docs/formats.md §2 `model:` plus the two extension keys).
MODEL_FIELDS: tuple[str, ...] = (
    "num_hidden_layers", "hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads",
    "head_dim", "vocab_size", "max_position_embeddings", "tie_word_embeddings", "hidden_act",
    "num_experts", "num_experts_per_tok", "num_shared_experts", "moe_intermediate_size",
    "shared_expert_intermediate_size", "first_k_dense_replace", "capacity_factor", "n_group", "topk_group",
    "kv_lora_rank",
    "q_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim", "mtp_depth", "use_flash_attention",
    "learned_positions", "linear_bias", "hidden_dropout", "attention_dropout",
    # What changes how much of the score matrix attention computes (engine.config.model_facts.attention_span): sliding
    # windows (Mistral, GPT-OSS, Qwen2), hybrid linear attention (Qwen3-Next / Qwen3.5), DeepSeek-V3.2's sparse
    # attention and its lightning indexer.
    "sliding_window", "use_sliding_window", "max_window_layers", "layer_types", "full_attention_interval",
    "index_n_heads", "index_head_dim", "index_topk",
    # Hybrid Mamba models (Nemotron-H, engine.specs.HybridLayers): the layer pattern, the Mamba-2 mixer's widths, and
    # the MLP's own activation.
    "hybrid_override_pattern", "mamba_num_heads", "mamba_head_dim", "ssm_state_size", "n_groups", "conv_kernel",
    "mlp_hidden_act",
)

# A vision-language config's tower ([HP] §2.5: `vision_config` → model_spec["vision"]): canonical field -> the
# Hugging Face vision_config spellings upstream maps onto it.
VISION_ALIASES: Mapping[str, tuple[str, ...]] = MappingProxyType({
    "num_hidden_layers": ("depth",),
    "hidden_size": ("embed_dim",),
    "num_attention_heads": ("num_heads",),
})
VISION_INTS = ("num_hidden_layers", "hidden_size", "num_attention_heads", "intermediate_size", "out_hidden_size",
               "patch_size", "spatial_merge_size", "num_position_embeddings")
VISION_REQUIRED = ("num_hidden_layers", "hidden_size", "num_attention_heads")
VISION_KEYS = frozenset((*VISION_INTS, "hidden_act", *(a for al in VISION_ALIASES.values() for a in al)))


def vision_canonical(key: str) -> str | None:
    """The canonical tower field a vision_config / `vision:` key states, or None."""
    if key in VISION_INTS or key == "hidden_act":
        return key
    return next((c for c, al in VISION_ALIASES.items() if key in al), None)


def vision_from_config(raw: Mapping[str, Any]) -> dict[str, Any]:
    """A config.json's `vision_config` as canonical tower fields (empty when it states none)."""
    vc = raw.get("vision_config")
    if not isinstance(vc, Mapping):
        return {}
    out: dict[str, Any] = {}
    for key, value in vc.items():
        canon = vision_canonical(str(key))
        if canon is None or value is None or (canon in out and key != canon):
            continue
        ok = isinstance(value, str) if canon == "hidden_act" else (isinstance(value, int) and not isinstance(value, bool))
        if ok:
            out[canon] = value
    return out


_NON_GATED_TYPES = frozenset({"gpt2", "bloom", "gpt_neox", "opt", "mpt", "falcon", "gpt_bigcode", "gptj"})


def normalize_fields(raw: Mapping[str, Any]) -> dict[str, Any]:
    """HF config.json -> canonical model fields (only those this project prices). Vision-language configs
    take their language fields from `text_config` ([HP] §2.5)."""
    src: dict[str, Any] = dict(raw)
    text_cfg = src.get("text_config")
    if isinstance(text_cfg, Mapping):
        src = {**src, **dict(text_cfg)}
    out: dict[str, Any] = {}
    for name in MODEL_FIELDS:
        value = src.get(name)
        if value is None:
            for alias in ALIASES.get(name, ()):
                if src.get(alias) is not None:
                    value = src[alias]
                    break
        if value is not None:
            out[name] = value
    # MPT: expansion_ratio x d_model
    if "intermediate_size" not in out and isinstance(src.get("expansion_ratio"), int | float) and isinstance(
        out.get("hidden_size"), int
    ):
        out["intermediate_size"] = int(src["expansion_ratio"] * out["hidden_size"])
    # [HP] §2.5 derivations: shared-expert count from widths; intermediate from expert widths.
    shared_w, moe_w = src.get("shared_expert_intermediate_size"), out.get("moe_intermediate_size")
    if "num_shared_experts" not in out and isinstance(shared_w, int) and isinstance(moe_w, int) and moe_w > 0:
        out["num_shared_experts"] = max(1, shared_w // moe_w)
    if "intermediate_size" not in out:
        if isinstance(shared_w, int) and shared_w > 0:
            out["intermediate_size"] = shared_w
        elif isinstance(moe_w, int) and moe_w > 0:
            out["intermediate_size"] = moe_w
    if "hidden_act" not in out and str(src.get("model_type", "")).lower() in _NON_GATED_TYPES:
        out["hidden_act"] = "gelu"
    if str(src.get("model_type", "")).lower() in ("gpt2", "opt", "gptj"):
        out.setdefault("learned_positions", True)
    vision = vision_from_config(raw)
    if vision:
        out["vision"] = vision  # the tower (engine.config.vision), not a language-model field
    return out


@dataclass(frozen=True, slots=True)
class Resolution:
    """Where `pretrained_model_name_or_path` led: fields (canonical names) and a human label of the source,
    or `error` (a message saying how to supply the facts)."""

    fields: Mapping[str, Any] = field(default_factory=dict)
    source: str = ""
    model_id: str = ""
    error: str | None = None
    # The path's last component that named the catalog model, when only that did (a local checkout of a
    # published model: `/path/to/Qwen3-30B-A3B`); "" otherwise.
    by_last_component: str = ""
    # The local config.json read (or tried), "" for a catalog model: a file the request read, which no output
    # of the same request may replace (engine.files).
    file: str = ""


def config_json_path(path: str) -> str:
    """The config.json a model path names: the file itself, or the one in the directory it names."""
    return os.path.join(path, "config.json") if os.path.isdir(path) else path


def read_config_json(path: str) -> tuple[dict[str, Any] | None, str | None]:
    """A local config.json (or a directory holding one) -> canonical fields, or an error message."""
    target = config_json_path(path)
    got = read_bounded(target, MAX_CONFIG_JSON_BYTES)  # regular files only, size checked first (engine.files)
    if isinstance(got, ReadFailure):
        if got.kind == "too_large":
            return None, f"{target} is larger than {MAX_CONFIG_JSON_BYTES // (1024 * 1024)} MB; not a model config"
        return None, f"cannot read {target}: {got.reason}"
    data = got.data
    try:
        raw = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        return None, f"{target} is not valid JSON: {exc}"
    except RecursionError:  # the C decoder's own depth limit: `[[[[…` many thousand deep, never a model config
        return None, f"{target} is not a model config: its JSON is nested too deeply to read"
    if not isinstance(raw, dict):
        return None, f"{target} does not hold a JSON object"
    return normalize_fields(raw), None


def _looks_like_path(name: str) -> bool:
    return name.startswith((".", "/", "~")) or name.endswith(".json")


def resolve(name: str, *, base_dir: str | None = None) -> Resolution:
    """Resolve a model name OFFLINE: an existing local directory / config.json (relative to `base_dir`, the
    directory of the yaml that names it), else the built-in catalog. Never the network."""
    if not isinstance(name, str) or not name.strip():
        return Resolution(error="empty model name")
    expanded = os.path.expanduser(name.strip())
    candidates = [expanded] if os.path.isabs(expanded) else [
        os.path.join(base_dir, expanded) if base_dir else expanded, expanded]
    for cand in candidates:
        if os.path.isdir(cand) or (os.path.isfile(cand) and cand.endswith(".json")):
            fields, err = read_config_json(cand)
            read = config_json_path(cand)
            if err is not None:
                return Resolution(error=err, file=read)
            return Resolution(fields or {}, f"local config {cand}", name, file=read)
    hit = lookup(name)
    if hit is not None:
        return Resolution(dict(hit.fields), f"built-in catalog ({hit.id}, {hit.source})", hit.id)
    last = os.path.basename(expanded.rstrip("/\\"))
    hit = lookup(last) if last and last != expanded else None
    if hit is not None:
        return Resolution(dict(hit.fields), f"built-in catalog ({hit.id}, {hit.source}) by the path's last "
                          f"component '{last}'", hit.id, by_last_component=last)
    hint = ("no such local directory or config.json" if _looks_like_path(name) else
            "not in the built-in catalog (the network is never used)")
    return Resolution(error=(
        f"cannot resolve model '{name}' offline: {hint}. Set model.config_overrides with num_hidden_layers, "
        "hidden_size, num_attention_heads, num_key_value_heads, intermediate_size and vocab_size, or point "
        "pretrained_model_name_or_path at a local directory holding config.json"
    ))
