"""Megatron-Core's `pipeline_model_parallel_layout` read as Megatron-Core reads it (engine.config.layer_layout):
the recipes' strings, the list form, and hostile input bounded before it is unrolled."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.config.layer_layout import (
    MAX_SYMBOLS,
    LayerLayoutError,
    layout_from_names,
    layout_text,
    layout_vpp,
    parse_layout_text,
    stage_rows,
)


def test_the_recipes_strings_unroll_as_megatron_core_unrolls_them() -> None:
    # Megatron-Bridge's DeepSeek-V3 recipe on 1,024 H100 (pp 8 × vpp 4): the embedding with one layer, 30 chunks
    # of two, then the MTP layer with the loss.
    h100 = parse_layout_text("Et|(tt|)*30mL")
    assert len(h100) == 32 and h100[0] == "Et" and h100[-1] == "mL" and set(h100[1:-1]) == {"tt"}
    # Its GB300 recipe (pp 2 × vpp 8): "x*n" repeats one symbol, after the groups are unrolled.
    gb300 = parse_layout_text("Et*4|(t*4|)*14tmL")
    assert len(gb300) == 16 and gb300[0] == "Etttt" and gb300[-1] == "tmL" and "".join(gb300).count("t") == 61
    # Megatron-Core's own docstring example: commas are cosmetic, the MTP layer gets a chunk of its own.
    doc = parse_layout_text("Ettt|(tt|)*29,m|L")
    assert doc[-2:] == ("m", "L") and len(doc) == 32


def test_the_list_form_takes_layer_names_in_any_case() -> None:
    assert layout_from_names([["embedding", "Decoder"], [" decoder ", "MTP", "loss"]]) == ("Et", "tmL")
    with pytest.raises(LayerLayoutError, match="'encoder' is not a layer type"):
        layout_from_names([["embedding", "encoder"]])


@pytest.mark.parametrize(("text", "message"), [
    ("Ex|tL", "'x' is not a layer symbol"),
    ("E t|L", "' ' is not a layer symbol"),
    ("Et*3*2|L", "'\\*' is not a layer symbol"),
    ("((t|)*2)*3L", "'\\(' is not a layer symbol"),
])
def test_what_megatron_core_could_not_parse_is_refused_with_the_symbol(text: str, message: str) -> None:
    with pytest.raises(LayerLayoutError, match=message):
        parse_layout_text(text)


@pytest.mark.parametrize("text", [
    "Et*999999999999|L",            # one symbol repeated past the bound
    "E(tt|)*99999999L",             # one group
    "E" + "t*60000|" * 60 + "L",    # many repetitions each within the bound, together past it
    "(" + "t" * 2000 + ")*40L",     # a long group
])
def test_hostile_repetitions_are_refused_before_they_are_unrolled(text: str) -> None:
    with pytest.raises(LayerLayoutError, match="past 65,536 symbols"):
        parse_layout_text(text)


def test_a_text_past_the_bound_is_refused_unread() -> None:
    with pytest.raises(LayerLayoutError, match="characters long"):
        parse_layout_text("E" + "t" * 5000 + "L")


@given(st.lists(st.text(alphabet="EtmL", max_size=6), min_size=1, max_size=40))
def test_the_written_layout_reads_back_the_same(chunks: list[str]) -> None:
    assert parse_layout_text(layout_text(tuple(chunks))) == tuple(chunks)


@given(st.text(alphabet="Etml|()*0123456789,", max_size=60))
def test_any_text_parses_or_is_refused_and_never_grows_past_the_bound(text: str) -> None:
    try:
        chunks = parse_layout_text(text)
    except LayerLayoutError:
        return
    assert sum(len(c) for c in chunks) <= MAX_SYMBOLS
    assert all(set(c) <= set("EtmL") for c in chunks)


def test_the_stage_table_groups_identical_stages_as_megatron_core_logs_them() -> None:
    rows = stage_rows(parse_layout_text("Ettt|(tt|)*29,m|L"), 16)
    assert rows == (("0", ("embedding, decoder×3", "decoder×2")), ("1-13", ("decoder×2", "decoder×2")),
                    ("14", ("decoder×2", "mtp")), ("15", ("decoder×2", "loss")))
    assert stage_rows(parse_layout_text("Et|||L"), 2)[1] == ("1", ("(empty)", "loss"))
    assert stage_rows(parse_layout_text("Et|tL"), 3) == ()  # 2 chunks do not divide over pp 3


def test_a_layout_sets_vpp_only_where_its_chunks_interleave_over_pp() -> None:
    assert layout_vpp(32, 8) == 4
    assert layout_vpp(8, 8) is None and layout_vpp(31, 8) is None and layout_vpp(32, 0) is None
