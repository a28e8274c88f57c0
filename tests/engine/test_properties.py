"""Property tests: whatever the text, check_file returns (no exception, no internal-error diagnostic) and every
range lies inside the document, in lines as YAML counts them."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.check import check_file
from engine.document import parse, split_lines
from engine.positions import Range

ROOT = Path(__file__).resolve().parents[2]
SEEDS = [
    (ROOT / "examples" / "llama3-70b" / "train.yaml").read_text(),
    (ROOT / "examples" / "deepseek-v3" / "train.yaml").read_text(),
    (ROOT / "examples" / "llama3-70b" / "search.yaml").read_text().replace("train_yaml: ./train.yaml", ""),
    "model: {num_hidden_layers: 32, hidden_size: 4096, num_attention_heads: 32, vocab_size: 32000}\n"
    "cluster: {num_nodes: 2, cards_per_node: 8, device_type: H100}\n"
    "parallelism: {tp: [1, 2, 4], pp: auto, cp: 2, micro_batch_num: [1, 3]}\n"
    "constraint: {global_batch_size: 96, memory_limit_gb: 70}\n",
]
YAML_CHARS = st.sampled_from([*" \t\n:-[]{},#&*!|>'\"%@`?0123456789abcxyz_.~é\r", "tp_size", "auto", "&a", "*a"])

# HP_PROPERTY_EXAMPLES=600 for a longer hunt; the suite's default stays quick.
SETTINGS = settings(max_examples=int(os.environ.get("HP_PROPERTY_EXAMPLES", "60")), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


def inside(rng: Range, text: str) -> bool:
    lines = split_lines(text)
    for pos in (rng.start, rng.end):
        if not (0 <= pos.line < len(lines) and 0 <= pos.character <= len(lines[pos.line])):
            return False
    return rng.start <= rng.end


def assert_sane(text: str) -> None:
    loaded = check_file("prop.yaml", text=text)
    internal = [d.message for d in loaded.diagnostics if d.code == "HP900"]
    assert internal == []
    for d in loaded.diagnostics:
        if d.file is None:
            assert inside(d.range, text), (d.code, d.range, d.message)
    if loaded.config is not None:
        for key, loc in loaded.config.locations.items():
            if loc.file == "prop.yaml":
                assert inside(loc.key, text) and inside(loc.value, text), key


@SETTINGS
@given(st.text(max_size=300))
def test_random_text(text: str) -> None:
    assert_sane(text)


@SETTINGS
@given(st.lists(YAML_CHARS, max_size=80).map("".join))
def test_random_yaml_like_text(text: str) -> None:
    assert_sane(text)


@pytest.mark.parametrize("text", ["---", "--- \n", "---\n...\n", "- a\n"])
def test_non_mapping_roots_get_ordered_ranges(text: str) -> None:
    """An empty scalar after `---` starts past the text's end; its HP002 range must still be ordered."""
    assert_sane(text)


@st.composite
def mutated(draw: st.DrawFn) -> str:
    text = draw(st.sampled_from(SEEDS))
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(text)))
        j = draw(st.integers(i, min(len(text), i + 12)))
        op = draw(st.sampled_from(["delete", "insert", "replace", "dupline"]))
        if op == "delete":
            text = text[:i] + text[j:]
        elif op == "insert":
            text = text[:i] + draw(YAML_CHARS) + text[i:]
        elif op == "replace":
            text = text[:i] + draw(st.lists(YAML_CHARS, max_size=4).map("".join)) + text[j:]
        else:
            lines = text.split("\n")
            k = draw(st.integers(0, len(lines) - 1))
            lines.insert(k, lines[k])
            text = "\n".join(lines)
    return text


@SETTINGS
@given(mutated())
def test_mutated_configs(text: str) -> None:
    assert_sane(text)


SCALARS = st.one_of(st.integers(-3, 300), st.booleans(), st.none(), st.floats(allow_nan=False, width=32),
                    st.sampled_from(["auto", "4", "H100", "full", "8GB", "x"]))
KEYS = st.sampled_from(["model", "cluster", "parallelism", "constraint", "accelerator", "training", "tp", "pp",
                        "tp_size", "num_hidden_layers", "hidden_size", "num_attention_heads", "vocab_size",
                        "num_nodes", "device_type", "global_batch_size", "config_overrides", "train_yaml",
                        "recompute", "context", "device_num", "dp", "ep", "num_experts", "cp", "micro_batch_num"])
TREES = st.recursive(SCALARS, lambda kids: st.one_of(st.lists(kids, max_size=4),
                                                      st.dictionaries(KEYS, kids, max_size=5)), max_leaves=25)


@SETTINGS
@given(st.dictionaries(KEYS, TREES, max_size=6))
def test_structured_random_configs(data: dict) -> None:
    text = yaml.safe_dump(data, default_flow_style=None)
    assert_sane(text)
    doc = parse(text)
    assert doc.diagnostics == () or all(d.code != "HP001" for d in doc.diagnostics)
