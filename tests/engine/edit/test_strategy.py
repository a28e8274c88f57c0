"""strategy_edits: round-trip fidelity on every layout, read-back, refusals, and random strategies."""

from __future__ import annotations

import dataclasses

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.edit import strategy_edits
from engine.edit.strategy import runs_in_trainer
from engine.specs import RecomputePlan, Strategy

from .fixtures import (
    AUTOMODELS,
    COMMENTS,
    CRLF,
    DOC_MARKERS,
    FLOW,
    FOUR_SPACE,
    LAYERS_BLOCK,
    LEGACY,
    LEGACY_BLOCK,
    LEGACY_FILES,
    NO_FINAL_NEWLINE,
    NON_ASCII,
    SECTIONS_MISSING,
    TWO_SPACE,
    YES_NO,
)
from .helpers import check_edits, content_lines, is_subsequence, reads_back, strategies, untouched_lines

BIG = Strategy(
    dp=4, dp_shard=8, tp=8, pp=4, cp=2, ep=1, vpp=2, micro_batch_size=2, micro_batch_num=8,
    sequence_parallel=True, pipeline_schedule="interleaved",
    recompute=RecomputePlan("selective", ((0, 9, "full"), (10, 12, "off"))),
)


def test_value_changes_replace_only_their_tokens() -> None:
    s = Strategy(dp=8, dp_shard=8, tp=8, pp=2, cp=2, micro_batch_size=1, micro_batch_num=16,
                 sequence_parallel=True, recompute=RecomputePlan("selective"))
    r = strategy_edits(TWO_SPACE, s)
    check_edits(TWO_SPACE, r)
    assert r.new_text == (
        TWO_SPACE.replace("tp_size: 4 ", "tp_size: 8 ").replace("pp_size: 4", "pp_size: 2")
    )
    assert [e.new_text for e in r.edits] == ["8", "2"]
    assert r.edits[0].range.start.line == 11 and r.edits[0].range.start.character == 11
    assert set(r.changed) == {"accelerator.tp_size", "accelerator.pp_size"}


def test_same_strategy_gives_no_edit() -> None:
    s = Strategy(dp=4, dp_shard=8, tp=4, pp=4, cp=2, micro_batch_size=1, micro_batch_num=32,
                 sequence_parallel=True, recompute=RecomputePlan("selective"))
    r = strategy_edits(TWO_SPACE, s)
    assert r.ok and r.edits == () and r.new_text == TWO_SPACE and r.changed == ()


def test_missing_keys_go_to_their_natural_place() -> None:
    r = strategy_edits(TWO_SPACE, BIG)
    check_edits(TWO_SPACE, r)
    new = r.new_text
    assert "  sequence_parallel: true\n  pp_interleave_num: 2\n  pipeline_scheduler: interleaved_1f1b\n" in new
    assert 'activation_checkpoint:\n  mode: selective\n  layers: {"0-9": full, "10-12": off}\n' in new
    assert "  global_batch_size: 64                  # sequences per optimizer step\n  micro_batch_size: 2\n" in new
    assert is_subsequence(untouched_lines(TWO_SPACE, r), content_lines(new))
    reads_back(new, BIG)


def test_four_space_file_keeps_its_indent_and_quotes() -> None:
    r = strategy_edits(FOUR_SPACE, BIG)
    check_edits(FOUR_SPACE, r)
    assert "    tp_size: 8\n" in r.new_text  # a quoted '2' is a string the reader refuses: written as a number
    assert "    torch_dtype: 'bfloat16'\n" in r.new_text
    assert "\nfsdp_config:\n    dp_shard_size: 8\n" in r.new_text
    assert "\nactivation_checkpoint:\n    mode: selective\n" in r.new_text
    assert "    global_batch_size: 64\n    micro_batch_size: 2\n" in r.new_text
    reads_back(r.new_text, BIG)


def test_flow_sections_stay_flow() -> None:
    r = strategy_edits(FLOW, BIG)
    check_edits(FLOW, r)
    lines = r.new_text.splitlines()
    assert lines[3].startswith("accelerator: {tp_size: 8, cp_size: 2, ep_size: 1, pp_size: 4, sequence_parallel: true")
    # A file the trainer runs gets the trainer's own keys: pp_vpp, layer_ranges ([HP] Corrections 1-2); a range's
    # `off` quoted, since the trainer maps a bare `off` (false) back only for the top-level mode.
    assert "sequence_parallel: true, pp_vpp: 2, loss_parallel" in lines[3]
    assert ("activation_checkpoint: {mode: selective, layer_ranges: [{first: 0, count: 10, mode: full}, "
            '{first: 10, count: 3, mode: "off"}]}') in r.new_text
    assert content_lines(r.new_text)[6] == content_lines(FLOW)[6]  # fsdp_config: only the two shards changed
    reads_back(r.new_text, BIG)


def test_crlf_lines_are_inserted_with_crlf() -> None:
    r = strategy_edits(CRLF, BIG)
    check_edits(CRLF, r)
    assert "\n" not in r.new_text.replace("\r\n", "")
    assert r.new_text == strategy_edits(TWO_SPACE, BIG).new_text.replace("\n", "\r\n")


def test_no_final_newline() -> None:
    r = strategy_edits(NO_FINAL_NEWLINE, BIG)
    check_edits(NO_FINAL_NEWLINE, r)
    assert "accelerator:\n  tp_size: 8\n  pp_size: 4\n" in r.new_text
    assert not r.new_text.endswith("\n")  # stays without a final newline
    reads_back(r.new_text, BIG)


def test_comments_stay_where_they_were() -> None:
    s = Strategy(dp=2, dp_shard=2, tp=4, pp=8, cp=1, ep=32, micro_batch_size=1, micro_batch_num=2048,
                 recompute=RecomputePlan("full"))
    r = strategy_edits(COMMENTS, s)
    check_edits(COMMENTS, r)
    comments = [ln[ln.index("#"):] for ln in COMMENTS.splitlines() if "#" in ln]
    new_comments = [ln[ln.index("#"):] for ln in r.new_text.splitlines() if "#" in ln]
    assert comments == new_comments
    assert "  tp_size: 4  # tp\n  # pp next\n  pp_size: 8   # pp\n  ep_size: 32  # ep\n" in r.new_text
    assert "  # end of accelerator\n\nfsdp_config:\n  dp_shard_size: 2\n\nactivation_checkpoint:\n" in r.new_text
    assert "# trailing comment of the file\n" in r.new_text
    reads_back(r.new_text, s)


def test_non_ascii_positions_are_code_points() -> None:
    s = Strategy(dp=8, dp_shard=8, tp=4, pp=2, micro_batch_size=1, micro_batch_num=32)
    r = strategy_edits(NON_ASCII, s)
    check_edits(NON_ASCII, r)
    tp_edit = next(e for e in r.edits if e.new_text == "4")
    assert tp_edit.range.start.line == 7 and tp_edit.range.start.character == len("  tp_size: ")
    gbs = next(e for e in r.edits if e.new_text == "256")
    assert gbs.range.start.line == 5
    assert "🚀" in r.new_text and "# ⚡ intra-node" in r.new_text
    reads_back(r.new_text, s)


def test_document_markers_are_kept() -> None:
    r = strategy_edits(DOC_MARKERS, BIG)
    check_edits(DOC_MARKERS, r)
    assert r.new_text.startswith("%YAML 1.1\n---\n") and r.new_text.endswith("\n...\n")
    reads_back(r.new_text, BIG)


def test_missing_sections_are_added_in_order_with_the_blank_line_rhythm() -> None:
    r = strategy_edits(SECTIONS_MISSING, BIG)
    check_edits(SECTIONS_MISSING, r)
    new = r.new_text
    assert new.index("training:") < new.index("accelerator:") < new.index("fsdp_config:")
    assert new.index("activation_checkpoint:") < new.index("dataset:")
    assert new.startswith("model:\n  pretrained_model_name_or_path: meta-llama/Llama-3.1-8B\n\ntraining:\n")
    reads_back(new, BIG)


def test_block_layers_stay_block_and_are_removed_when_the_plan_has_none() -> None:
    r = strategy_edits(LAYERS_BLOCK, BIG)
    check_edits(LAYERS_BLOCK, r)
    assert '  layers:\n    "0-9": full\n    "10-12": off   # the first stages hold the most activations\n' \
        "  selective_policy: hyperparallel\n" in r.new_text
    plain = Strategy(dp=32, dp_shard=8, tp=2, micro_batch_num=2, recompute=RecomputePlan("full"))
    r2 = strategy_edits(LAYERS_BLOCK, plain)
    check_edits(LAYERS_BLOCK, r2)
    assert "layers" not in r2.new_text and "first stages" not in r2.new_text
    assert "  mode: full\n  selective_policy: hyperparallel\n" in r2.new_text
    reads_back(r2.new_text, plain)


def test_boolean_spelling_and_off_are_kept_readable() -> None:
    s = Strategy(dp=32, dp_shard=1, tp=2, micro_batch_num=2, sequence_parallel=False,
                 recompute=RecomputePlan("off"))
    r = strategy_edits(YES_NO, s)
    check_edits(YES_NO, r)
    assert "  sequence_parallel: No\n" in r.new_text
    assert "  mode: off\n" in r.new_text  # YAML 1.1 reads it as false, which the trainer takes for off
    s2 = Strategy(dp=32, dp_shard=1, tp=2, micro_batch_num=2, sequence_parallel=True,
                  recompute=RecomputePlan("full"))
    r2 = strategy_edits(YES_NO.replace("mode: off", "mode: full"), Strategy(
        dp=32, dp_shard=1, tp=2, micro_batch_num=2, recompute=RecomputePlan("off")))
    assert "  mode: off\n" in r2.new_text  # the documented spelling (the readers map YAML 1.1's false to off)
    reads_back(strategy_edits(YES_NO, s2).new_text, s2)


def test_empty_and_null_sections_are_filled_in_block_style() -> None:
    from .fixtures import EMPTY_SECTIONS

    r = strategy_edits(EMPTY_SECTIONS, BIG)
    check_edits(EMPTY_SECTIONS, r)
    assert "training:\n  global_batch_size: 64\n  micro_batch_size: 2\naccelerator:   # filled by hp-plan apply\n  tp_size: 8\n" in r.new_text
    assert "fsdp_config:\n  dp_shard_size: 8\n" in r.new_text
    reads_back(r.new_text, BIG)


def test_legacy_schema() -> None:
    s = Strategy(dp=4, dp_shard=2, tp=2, pp=4, cp=2, micro_batch_size=1, micro_batch_num=32,
                 recompute=RecomputePlan("full"))
    r = strategy_edits(LEGACY, s)
    check_edits(LEGACY, r)
    assert "  micro_batch_num: 32\n  accelerator: {dp_shard: 2, dp_replicate: 2, tp_degree: 2, " \
        "pipeline_parallel_degree: 4, context_parallel_degree: 2}\n" in r.new_text
    assert 'gradient_checkpointing: {activation_checkpoint: "full"}' in r.new_text
    reads_back(r.new_text, s)
    r2 = strategy_edits(LEGACY_BLOCK, s)
    check_edits(LEGACY_BLOCK, r2)
    assert "  global_batch_size: 128   # sequences\n  micro_batch_num: 32\n  accelerator:\n    dp_shard: 2\n" \
        "    dp_replicate: 2\n    tp_degree: 2\n" in r2.new_text
    assert r2.new_text.endswith("  gradient_checkpointing:\n    activation_checkpoint: full\ndata:\n  max_seq_len: 8192\n")
    reads_back(r2.new_text, s)


def test_legacy_refuses_what_it_cannot_say() -> None:
    r = strategy_edits(LEGACY, BIG)
    assert not r.ok and r.edits == () and r.new_text == LEGACY
    assert "legacy" in (r.error or "") and "per-layer recompute" in (r.error or "")
    spanning = Strategy(dp=2, dp_shard=4, cp=2, micro_batch_num=64)
    assert "spanning context parallelism" in (strategy_edits(LEGACY, spanning).error or "")


def test_fsdp_minus_one_is_kept_when_it_is_the_whole_domain() -> None:
    text = TWO_SPACE.replace("dp_shard_size: 8", "dp_shard_size: -1")
    whole = Strategy(dp=4, dp_shard=8, tp=4, pp=4, cp=2, micro_batch_num=32, sequence_parallel=True,
                     recompute=RecomputePlan("selective"))
    assert strategy_edits(text, whole).edits == ()
    half = Strategy(dp=4, dp_shard=4, tp=4, pp=4, cp=2, micro_batch_num=32, sequence_parallel=True,
                    recompute=RecomputePlan("selective"))
    assert "  dp_shard_size: 4\n" in strategy_edits(text, half).new_text


def test_refusals() -> None:
    assert "not valid YAML" in (strategy_edits("a: [1,\n", BIG).error or "")
    assert "not a mapping" in (strategy_edits("- 1\n- 2\n", BIG).error or "")
    assert "not a mapping" in (strategy_edits("accelerator: 4\n", BIG).error or "")
    bad = Strategy(dp=3, dp_shard=2)
    assert "does not divide" in (strategy_edits(TWO_SPACE, bad, path="t.yaml").error or "")
    assert (strategy_edits(TWO_SPACE, bad, path="t.yaml").error or "").startswith("t.yaml: ")
    alias = "defaults: &d {tp_size: 1}\naccelerator: *d\ntraining: {global_batch_size: 8}\n"
    assert "alias" in (strategy_edits(alias, BIG).error or "")


def test_numbers_written_as_strings_or_floats_become_numbers() -> None:
    text = "accelerator:\n  tp_size: '4'\n  pp_size: 2.0\n  sequence_parallel: 'true'\n"
    s = Strategy(dp=1, tp=4, pp=2, sequence_parallel=True)
    r = strategy_edits(text, s)
    check_edits(text, r)
    assert "accelerator:\n  tp_size: 4\n  pp_size: 2\n  sequence_parallel: true\n" in r.new_text
    assert {e.new_text for e in r.edits} >= {"4", "2", "true"}


def test_merge_keys_are_overridden_not_edited() -> None:
    text = "base: &b\n  tp_size: 1\n  pp_size: 1\naccelerator:\n  <<: *b\n  cp_size: 1\n"
    s = Strategy(dp=1, dp_shard=1, tp=2, pp=1, cp=1, micro_batch_num=4)
    r = strategy_edits(text, s)
    check_edits(text, r)
    assert r.new_text.startswith("base: &b\n  tp_size: 1\n  pp_size: 1\n")
    assert yaml.safe_load(r.new_text)["accelerator"]["tp_size"] == 2


def test_device_num_follows_the_world_size() -> None:
    text = TWO_SPACE + "context:\n  device_num: 64\n"
    r = strategy_edits(text, BIG)  # 4 * 8 * 4 * 2 = 256 devices
    check_edits(text, r)
    assert r.new_text.endswith("context:\n  device_num: 256\n")


def test_empty_file() -> None:
    r = strategy_edits("", BIG)
    check_edits("", r)
    reads_back(r.new_text, BIG)
    r2 = strategy_edits("# only a comment", BIG)
    check_edits("# only a comment", r2)
    assert r2.new_text.startswith("# only a comment\ntraining:\n")


# ---------------------------------------------------------------------------------------------- properties


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(sorted(AUTOMODELS)), s=strategies(), s2=strategies())
def test_random_strategies_read_back(name: str, s: Strategy, s2: Strategy) -> None:
    text = AUTOMODELS[name]
    if runs_in_trainer(yaml.safe_load(text)):  # the trainer has no ZeRO-1 or expert-TP key (refused, tested apart)
        s, s2 = (dataclasses.replace(x, etp=1, optimizer_shard=1) for x in (s, s2))
    r = strategy_edits(text, s)
    check_edits(text, r)
    reads_back(r.new_text, s)
    assert is_subsequence(untouched_lines(text, r), content_lines(r.new_text))
    again = strategy_edits(r.new_text, s)  # idempotent: the written file already states s
    assert again.ok and again.edits == ()
    r2 = strategy_edits(r.new_text, s2)  # and can be rewritten to anything else
    check_edits(r.new_text, r2)
    reads_back(r2.new_text, s2)


@settings(max_examples=30, deadline=None)
@given(name=st.sampled_from(sorted(LEGACY_FILES)), s=strategies(legacy=True))
def test_random_legacy_strategies_read_back(name: str, s: Strategy) -> None:
    text = LEGACY_FILES[name]
    r = strategy_edits(text, s)
    check_edits(text, r)
    reads_back(r.new_text, s)
    assert strategy_edits(r.new_text, s).edits == ()


# ---------------------------------------------------------------------------------------------- the reader


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(s=strategies())
def test_the_projects_reader_reads_back_what_was_written(s: Strategy) -> None:
    """The contract that matters: engine.check reads the edited example as exactly the strategy written."""
    from pathlib import Path

    from engine.check import check_file
    from engine.config.types import ClusterOverrides

    path = Path(__file__).parents[3] / "examples" / "deepseek-v3" / "train.yaml"  # MoE: ep is kept
    r = strategy_edits(path.read_text(), s)
    assert r.ok, r.error
    loaded = check_file(str(path), text=r.new_text,
                        overrides=ClusterOverrides(devices=s.world_size, explicit=True))
    assert loaded.config is not None
    assert loaded.config.stated == s


def test_an_alias_bomb_is_walked_once_per_node() -> None:
    """Nine levels of nine aliases each: visiting every path would take 9^9 steps (a hang)."""
    bomb = "a: &a\n  - x\n  - x\n" + "".join(
        f"b{i}: &b{i}\n" + "".join(f"  - *{'a' if i == 0 else f'b{i - 1}'}\n" for _ in range(9)) for i in range(9)
    ) + "accelerator:\n  tp_size: 1\n"
    r = strategy_edits(bomb, Strategy(tp=2))
    check_edits(bomb, r)
    assert r.new_text.startswith(bomb[: bomb.index("accelerator:")])


def test_the_guard_flags_collateral_changes() -> None:
    from engine.edit.yamltext import Doc, untouched_equal

    old = Doc.parse("a:\n  b: 1\nc: 2\n")
    assert untouched_equal(old, Doc.parse("a:\n  b: 1\n  x: 5\nc: 2\n"), {("a", "x")}) is None
    assert untouched_equal(old, Doc.parse("a:\n  b: 1\n  x: 5\n  c: 2\n"), {("a", "x")}) == "a.c"
    assert untouched_equal(old, Doc.parse("a:\n  b: 1\nc: 2\nd: {e: 1}\n"), {("d", "e")}) is None
    assert untouched_equal(old, Doc.parse("a:\n  b: 1\nc: 2\nd: {e: 1, f: 2}\n"), {("d", "e")}) == "d.f"
    assert untouched_equal(old, Doc.parse("a:\n  b: '1'\nc: 2\n"), {("d",)}) == "a.b"


def test_kept_trailing_newlines_of_a_block_scalar_survive() -> None:
    text = "accelerator:\n  note: |+\n    keep\n\n\nmodel:\n  pretrained_model_name_or_path: x\n"
    r = strategy_edits(text, BIG)
    check_edits(text, r)
    assert yaml.safe_load(r.new_text)["accelerator"]["note"] == "keep\n\n\n"
    reads_back(r.new_text, BIG)


def test_a_section_left_empty_is_removed_with_its_blank_line() -> None:
    layered = Strategy(dp=2, dp_shard=2, tp=4, pp=8, ep=32, micro_batch_num=2048,
                       recompute=RecomputePlan("off", ((0, 3, "full"),)))
    plain = Strategy(dp=2, dp_shard=2, tp=4, pp=8, ep=32, micro_batch_num=2048)
    first = strategy_edits(COMMENTS, layered)
    assert 'activation_checkpoint:\n  layers: {"0-3": full}\n' in first.new_text
    back = strategy_edits(first.new_text, plain)
    check_edits(first.new_text, back)
    assert back.new_text == strategy_edits(COMMENTS, plain).new_text
    assert "activation_checkpoint" not in back.new_text


def test_edits_never_overlap_nor_share_a_start() -> None:
    """Two edits starting at one point would leave their order to the client: the diff merges them."""
    from itertools import pairwise

    from engine.edit.text import LineIndex

    for text in (NO_FINAL_NEWLINE, LAYERS_BLOCK, FLOW, COMMENTS):
        for s in (BIG, Strategy(dp=64, dp_shard=64), Strategy(dp=2, tp=8, pp=4, recompute=RecomputePlan("full"))):
            r = strategy_edits(text, s)
            idx = LineIndex.of(text)
            spans = [(idx.offset(e.range.start), idx.offset(e.range.end)) for e in r.edits]
            assert all(a[1] <= b[0] and a[0] < b[0] for a, b in pairwise(spans)), (text[:20], s.short())


def test_an_anchored_value_keeps_its_anchor_and_its_aliases_are_never_changed_behind_the_users_back() -> None:
    """`global_batch_size: &gbs 512`: the anchor is a property of the node, not its value, so a rewrite keeps it
    (it was dropped, and the file's `*gbs` then failed to load); where an alias reads it elsewhere, changing it
    would change that key too: refused, saying why and what to do."""
    s = Strategy(dp=1, dp_shard=1, tp=2, pp=1, micro_batch_num=4)  # global batch 4
    text = "training: {global_batch_size: &gbs 8}\naccelerator:\n  tp_size: &t !!int 1\n"
    r = strategy_edits(text, s)
    check_edits(text, r)
    assert "global_batch_size: &gbs 4" in r.new_text and "tp_size: &t !!int 2" in r.new_text
    aliased = text + "eval: {batch: *gbs}\n"
    err = strategy_edits(aliased, s).error or ""
    assert "eval.batch" in err and "alias" in err and "please report" not in err


def test_a_file_for_the_search_in_the_trainers_spellings_keeps_them() -> None:
    """A train.yaml written for the search (no `_target_`) may spell the pipeline and the per-layer recompute as the
    trainer does (`pp_schedule`, `pp_vpp`, `layer_ranges`); the reader reads both spellings, so the edit writes the
    file's own (it wrote the search's beside them, read back the old values and refused)."""
    text = ("model: {name: m, num_hidden_layers: 8, hidden_size: 64, num_attention_heads: 4, vocab_size: 128}\n"
            "training: {global_batch_size: 8, micro_batch_size: 1}\n"
            "accelerator:\n  tp_size: 1\n  pp_size: 2\n  pp_vpp: 2\n  pp_schedule: gpipe\n"
            "activation_checkpoint:\n  mode: full\n  layer_ranges:\n    - {first: 0, count: 4, mode: off}\n"
            "    - {first: 4, count: null, mode: full}\n")
    s = Strategy(dp=1, dp_shard=1, tp=1, pp=2, micro_batch_num=8,
                 recompute=RecomputePlan("full", ((0, 1, "off"), (2, 7, "full"))))
    r = strategy_edits(text, s)
    check_edits(text, r)
    data = yaml.safe_load(r.new_text)
    assert data["accelerator"]["pp_schedule"] == "1f1b" and data["accelerator"].get("pp_vpp", 1) == 1
    assert "pipeline_scheduler" not in data["accelerator"] and "pp_interleave_num" not in data["accelerator"]
    assert data["activation_checkpoint"]["layer_ranges"] == [{"first": 0, "count": 2, "mode": "off"},
                                                             {"first": 2, "count": 6, "mode": "full"}]
    assert "layers" not in data["activation_checkpoint"]


def test_a_section_ending_in_an_alias_gets_new_sections_after_it() -> None:
    """`pp_size: *one` last in `accelerator` (the alias's node is the anchor's, lines earlier): the section's end was
    taken at the anchor, the new `fsdp_config` went in right under `accelerator:` and split it, and the edit was
    refused for a key that does not exist."""
    s = Strategy(dp=8, dp_shard=8, tp=1, pp=1, micro_batch_num=4)
    text = ("model: {name: m, num_hidden_layers: 8, hidden_size: 64, num_attention_heads: 4, vocab_size: 128}\n"
            "training:\n  global_batch_size: 32\n  micro_batch_size: 1\nx: &one 1\n"
            "accelerator:\n  tp_size: 8\n  pp_size: *one\n")
    r = strategy_edits(text, s)
    check_edits(text, r)
    assert r.new_text.index("pp_size: *one") < r.new_text.index("fsdp_config:"), r.new_text
    assert yaml.safe_load(r.new_text)["accelerator"] == {"tp_size": 1, "pp_size": 1}


def test_a_merge_list_is_read_as_the_check_reads_it() -> None:
    """`<<: [*base, *over]`: the check reads the earlier mapping's tp_size (the YAML merge rule; PyYAML 6.0.4 reads the
    later one, HP012). The writer read the installed PyYAML's value, took tp 4 as stated, left it, and the file
    read back tp 2; with the list the other way round it reported a change it never made."""
    s = Strategy(dp=2, dp_shard=1, tp=4, pp=1, micro_batch_num=4)
    base = ("model: {name: m, num_hidden_layers: 8, hidden_size: 64, num_attention_heads: 4, vocab_size: 128}\n"
            "training: {global_batch_size: 8, micro_batch_size: 1}\n"
            "b: &base {tp_size: 2, pp_size: 1}\no: &over {tp_size: 4}\n")
    for order, before in (("[*base, *over]", 2), ("[*over, *base]", 4)):
        text = base + f"accelerator:\n  <<: {order}\n"
        r = strategy_edits(text, s)
        assert r.ok, r.error
        check_edits(text, r)
        changed = {p: (b, a) for p, b, a in r.values}
        if before == 4:
            assert "accelerator.tp_size" not in changed
        else:
            assert changed["accelerator.tp_size"] == (2, 4) and "tp_size: 4" in r.new_text


def test_a_plan_key_aliasing_an_edited_value_is_refused_saying_why() -> None:
    """`micro_batch_size: &one 1` and `pp_size: *one`: writing micro-batch 2 moves pp too; the refusal says the two
    share a value (it said only "reads back pp = 2, not 1")."""
    s = Strategy(dp=8, dp_shard=8, tp=1, pp=1, micro_batch_size=2, micro_batch_num=4)
    text = ("model: {name: m, num_hidden_layers: 8, hidden_size: 64, num_attention_heads: 4, vocab_size: 128}\n"
            "training: {global_batch_size: 64, micro_batch_size: &one 1}\naccelerator:\n  tp_size: 8\n"
            "  pp_size: *one\n")
    err = strategy_edits(text, s).error or ""
    assert "reads back pp" in err and "alias" in err


def test_a_section_ending_in_a_list_of_aliases_or_an_alias_after_a_comment_gets_new_sections_after_it() -> None:
    """A block list whose last two items are aliases, and an alias after a comment holding `*name`: the section's
    end was taken at the anchor or in the comment, and the edit refused for the user's file."""
    s = Strategy(dp=8, dp_shard=8, tp=1, pp=1, micro_batch_num=4)
    head = ("model: {name: m, num_hidden_layers: 8, hidden_size: 64, num_attention_heads: 4, vocab_size: 128}\n"
            "training:\n  global_batch_size: 32\n  micro_batch_size: 1\none: &one 1\n")
    for tail in ("accelerator:\n  tp_size: 8\n  devices:\n    - *one\n    - *one\n",
                 "accelerator:\n  tp_size: 8\n  q:   # see *one\n    *one\n",
                 "accelerator:\r\n  tp_size: 8\r\n  devices:\r\n    - *one\r\n    - *one\r\n"):
        text = (head.replace("\n", "\r\n") if "\r" in tail else head) + tail
        r = strategy_edits(text, s)
        assert r.ok, (tail, r.error)
        check_edits(text, r)
        assert r.new_text.rindex("*one") < r.new_text.index("fsdp_config:"), r.new_text
