"""The error band (engine.cost.band): every estimate states the range its measured step and peak should fall in
about four times out of five, read from the model's own errors on the shown runs; wider where those errors are
(MoE, a stack or device no run was fitted on); one band for the search, `compare` and `apply`."""

from __future__ import annotations

import json
import math
import re
import statistics

import pytest

from engine.cost import band_evidence as E
from engine.cost.band import (
    COVERAGE,
    FEW_ROWS,
    FIRST_CONTACT,
    Shape,
    band_features,
    band_shape,
    ordering_spread,
    quantile,
    relative_spread,
    spread_from,
)
from tests.support.cli import ROOT, hp_plan

RUNS = ROOT / "benchmarks" / "calibration_runs"
CASES = ROOT / "benchmarks" / "cases"


def _estimate(path: object) -> dict:  # type: ignore[type-arg]
    doc: dict = json.loads(hp_plan("estimate", str(path), "--json").stdout)  # type: ignore[type-arg]
    return doc


def test_estimate_json_gives_both_ranges_and_the_text_says_plus_minus() -> None:
    path = RUNS / "llama31-70b-256xh100-96g-torchtitan-fsdp32tp8" / "search.yaml"
    doc = _estimate(path)
    lo, hi = doc["step_time_range_s"]
    h = doc["error_band"]["step"]
    assert lo < doc["step_time_s"] < hi and (lo, hi) == pytest.approx((doc["step_time_s"] * (1 - h),
                                                                       doc["step_time_s"] * (1 + h)))
    mlo, mhi = doc["peak_memory_range_gib"]
    assert mlo < doc["peak_memory_gib"] < mhi and doc["error_band"]["basis"]
    text = hp_plan("estimate", str(path)).stdout
    assert re.search(rf"Step {doc['step_time_s']:.3f} s ± {100 * h:.0f}%", text)
    assert "about four times out of five" in text
    explained = hp_plan("explain", str(path)).stdout
    assert re.search(rf"step {doc['step_time_s']:.3f} s ± {100 * h:.0f}%", explained)


def test_the_band_is_narrow_where_the_model_was_fitted_and_wide_where_it_was_not() -> None:
    a100 = _estimate(CASES / "K5-22B-sel.yaml")["error_band"]
    moe_a2 = _estimate(RUNS / "ascend-qwen3-30b-a3b-16xa2-mindspeed" / "search.yaml")["error_band"]
    assert a100["step"] < 0.08 and a100["features"] == []
    # MoE on 910B: wider than the dense A100 runs, and wide enough for the MindSpeed MoE runs' own
    # leave-one-out deviations (the experts' share fitted on one of them, read on the other)
    assert moe_a2["features"] == ["moe"] and moe_a2["step"] > 1.5 * a100["step"]
    ascend_moe = [abs(r.deviation) for r in E.STEP_ROWS if r.framework == "mindspeed" and "moe" in r.features]
    assert len(ascend_moe) == 2 and moe_a2["step"] >= max(ascend_moe)
    # a stack with no fitted run pays the first-contact term
    assert relative_spread("hyperparallel", "ascend").step > relative_spread("mindspeed", "ascend").step
    assert relative_spread("megatron", "ampere", ("moe",)).step >= relative_spread("megatron", "ampere").step


def _plain_abs(framework: str | None = None) -> list[float]:
    return [abs(r.deviation) for r in E.STEP_ROWS
            if not r.features and (framework is None or r.framework == framework)]


def test_a_few_runs_of_a_class_do_not_state_a_band_narrower_than_their_stack() -> None:
    blackwell = [r for r in E.STEP_ROWS if r.framework == "megatron" and r.generation == "blackwell"]
    assert 3 <= len(blackwell) <= FEW_ROWS
    own = quantile([abs(r.deviation) for r in blackwell])
    stack = quantile(_plain_abs("megatron"))
    assert own < stack  # the three Blackwell runs alone would read narrower than every Megatron run
    assert relative_spread("megatron", "blackwell").step == pytest.approx(stack)


def test_first_contact_is_paid_only_where_the_stack_has_no_run_on_the_generation() -> None:
    # torchtitan has runs on Hopper (fewer than three): its own rows on every device, no first contact; those are
    # three, so not below every stack's plain rows either
    hopper = relative_spread("torchtitan", "hopper")
    assert 0 < len(_plain_abs("torchtitan")) <= FEW_ROWS
    every = quantile([abs(r.deviation) for r in E.STEP_ROWS if not r.features])
    assert hopper.step == pytest.approx(max(quantile(_plain_abs("torchtitan")), every))
    assert "first contact" not in hopper.basis[0]
    # none on Blackwell: the same rows widened by the first-contact term
    blackwell = relative_spread("torchtitan", "blackwell")
    assert "first contact" in blackwell.basis[0] and blackwell.step > 2 * hopper.step


def test_a_moe_model_narrower_than_every_moe_run_of_its_stack_pays_first_contact() -> None:
    widths = [r.hidden for r in E.STEP_ROWS if r.framework == "megatron" and "moe" in r.features]
    narrowest = min(widths)
    assert narrowest > 0 and len(widths) >= 3
    checked = relative_spread("megatron", "hopper", ("moe",), Shape(moe_hidden=narrowest))
    narrow = relative_spread("megatron", "hopper", ("moe",), Shape(moe_hidden=narrowest // 2))
    assert checked == relative_spread("megatron", "hopper", ("moe",))  # at a checked width: no shape term
    assert narrow.step > checked.step + 0.1 and "narrower than any MoE run" in narrow.basis[-1]
    assert band_shape(moe=False, hidden=512, seq_len=4096) == Shape(seq_len=4096)  # a dense model's width says nothing
    # MindSpeed was checked on a 2,048-wide MoE model (Qwen3-30B-A3B): that width is met there
    assert "narrower" not in " ".join(relative_spread("mindspeed", "ascend", ("moe",), Shape(moe_hidden=2048)).basis)


def test_a_context_longer_than_every_long_context_run_checked_pays_first_contact() -> None:
    longest = max(r.seq_len for r in E.STEP_ROWS if "long_context" in r.features)
    assert longest >= 32768
    at = relative_spread("megatron", "blackwell", ("long_context",), Shape(seq_len=longest))
    beyond = relative_spread("megatron", "blackwell", ("long_context",), Shape(seq_len=4 * longest))
    assert at == relative_spread("megatron", "blackwell", ("long_context",))
    assert beyond.step > at.step + 0.1 and "longer than any long-context run" in beyond.basis[-1]
    # the peaks were measured to 256K (torchtitan's 405B at CP 8): 128K is inside their evidence
    assert beyond.memory == at.memory


def test_context_parallelism_wider_than_every_run_checked_pays_first_contact() -> None:
    """The shown step runs ring their context over at most two ranks; a wider ring adds an exchange, a merge and
    a partial block per rank and layer that none of them showed: first contact on the step. The measured peaks
    reach CP 8 (torchtitan's 8B and 405B), so the peak's band holds there."""
    widest = max(r.cp for r in E.STEP_ROWS)
    assert widest == 2 and {r.cp_algo for r in E.STEP_ROWS if r.cp > 1} == {"ring"}
    fc = quantile([abs(d) for d in FIRST_CONTACT])
    at = relative_spread("megatron", "hopper", (), Shape(cp=widest))
    wider = relative_spread("megatron", "hopper", (), Shape(cp=4))
    assert at == relative_spread("megatron", "hopper")
    assert wider.step == pytest.approx(math.hypot(at.step, fc))
    assert "context parallelism (ring) over 4 ranks, more than any run it was checked on (2)" in wider.basis[-1]
    assert wider.memory == at.memory  # the peaks were measured at CP 8
    # a stack with no ring of its own is read against every stack's rings
    assert relative_spread("torchtitan", "hopper", (), Shape(cp=2)) == relative_spread("torchtitan", "hopper")


def test_context_parallelism_by_an_algorithm_no_run_used_pays_first_contact_once() -> None:
    """Every shown run with CP rings it: Ulysses' all-to-alls (or a hybrid, or an all-gather) were never checked
    against a run, at any degree, so such a plan pays first contact once, not once more for its width."""
    fc = quantile([abs(d) for d in FIRST_CONTACT])
    plain = relative_spread("mindspeed", "ascend")
    for cp in (2, 8):
        uly = relative_spread("mindspeed", "ascend", (), Shape(cp=cp, cp_algo="ulysses"))
        assert uly.step == pytest.approx(math.hypot(plain.step, fc))
        assert "context parallelism by ulysses, which no run it was checked on used" in uly.basis[-1]
    assert relative_spread("mindspeed", "ascend", (), Shape(cp=1, cp_algo="ulysses")) == plain  # no CP: nothing
    # the measured peaks were all rings too (to CP 8): a Ulysses plan's peak band pays it as well, a ring's to 8 not
    assert relative_spread("mindspeed", "ascend", (), Shape(cp=2, cp_algo="ulysses")).memory == pytest.approx(
        math.hypot(plain.memory, fc))
    assert relative_spread("torchtitan", "hopper", (), Shape(cp=8)).memory == relative_spread("torchtitan", "hopper").memory
    assert relative_spread("torchtitan", "hopper", (), Shape(cp=16)).memory > relative_spread("torchtitan", "hopper").memory


def test_the_estimate_states_context_parallelism_wider_than_any_checked(tmp_path: object) -> None:
    """End to end through `hp-plan estimate --json`: the published 405B GB200 plan (CP 2) with its ring doubled
    (CP 4, DP 1) says so in its basis and states the wider step band; the plan as run does not."""
    from pathlib import Path

    folder, out = RUNS / "llama31-405b-128xgb200-nemo", Path(str(tmp_path))
    (out / "train.yaml").write_text((folder / "train.yaml").read_text())
    search = (folder / "search.yaml").read_text()
    for old, new in (("  dp: 2\n", "  dp: 1\n"), ("  cp: 2\n", "  cp: 4\n"), ("micro_batch_num: 32", "micro_batch_num: 64")):
        assert old in search
        search = search.replace(old, new)
    (out / "search.yaml").write_text(search)
    as_run, wider = _estimate(folder / "search.yaml"), _estimate(out / "search.yaml")
    assert (as_run["strategy"]["cp"], wider["strategy"]["cp"]) == (2, 4)
    assert wider["error_band"]["step"] > as_run["error_band"]["step"] + 0.1
    assert any("(ring) over 4 ranks" in b for b in wider["error_band"]["basis"])
    assert not any("context parallelism" in b for b in as_run["error_band"]["basis"])
    # `compare`: what only the CP 4 plan carries does not cancel between the two, so their pair band is the two
    # ordering spreads and first contact in quadrature, not the ordering spreads alone
    doc = json.loads(hp_plan("compare", str(folder / "search.yaml"), str(out / "search.yaml"), "--json").stdout)
    order = doc["a"]["error_band"]["order"]
    fc = quantile([abs(d) for d in FIRST_CONTACT])
    assert doc["error_band"][1] - 1 == pytest.approx(math.sqrt(2 * order ** 2 + fc ** 2))


def test_an_overlap_no_run_checked_pays_first_contact_on_the_step_only() -> None:
    """No shown run overlapped its expert all-to-alls (`moe_a2a_overlap`), so the plans that do are priced from
    the stacks' statements and one measured share, never checked against a run: first contact on the step;
    an overlap holds no bytes as priced, so the peak's band is the MoE plan's."""
    assert not any("a2a_overlap" in r.features for r in E.STEP_ROWS + E.MEMORY_ROWS)
    moe = relative_spread("megatron", "hopper", ("moe",))
    both = relative_spread("megatron", "hopper", ("moe", "a2a_overlap"))
    assert both.step == pytest.approx(math.hypot(moe.step, quantile([abs(d) for d in FIRST_CONTACT])))
    assert both.memory == moe.memory and "a2a overlap (0 runs" in both.basis[-1]
    assert band_features(moe=False, seq_len=4096, fp8=False, a2a_overlap=True) == ()  # a dense plan has none


def test_a_device_priced_with_a_stand_in_matmul_rate_pays_first_contact_on_the_step(tmp_path: object) -> None:
    """GB300 has no measured best-shape matmul, so the catalog prices GB200's shares on it (the same peaks): the
    same plan gets the same step and peak on both, and on GB300 a step band wider by the first-contact term, said
    in the basis; the peak's band does not move (a GEMM rate holds no bytes)."""
    from pathlib import Path

    from engine.catalog.devices import find_device, matmul_rate_measured

    gb300, gb200 = find_device("GB300"), find_device("gb200")
    assert gb300 is not None and gb200 is not None
    assert not matmul_rate_measured(gb300) and matmul_rate_measured(gb200)
    folder, out = RUNS / "llama31-405b-128xgb200-nemo", Path(str(tmp_path))
    (out / "train.yaml").write_text((folder / "train.yaml").read_text())
    search = (folder / "search.yaml").read_text()
    assert "device_type: GB200" in search
    (out / "search.yaml").write_text(search.replace("device_type: GB200", "device_type: GB300"))
    on_200, on_300 = _estimate(folder / "search.yaml"), _estimate(out / "search.yaml")
    assert on_300["step_time_s"] == pytest.approx(on_200["step_time_s"])
    a, b = on_200["error_band"], on_300["error_band"]
    assert b["features"] == [*a["features"], "unmeasured_device"]
    assert b["step"] == pytest.approx(math.hypot(a["step"], quantile([abs(d) for d in FIRST_CONTACT])))
    assert b["memory"] == a["memory"] and "a stand-in matmul rate, none measured on this device (0 runs" in b["basis"][-1]
    # a plan already paying first contact for its generation (torchtitan has no run on Blackwell) does not pay
    # it again for the device
    tt_200 = relative_spread("torchtitan", "blackwell")
    tt_300 = relative_spread("torchtitan", "blackwell", ("unmeasured_device",))
    assert tt_300 == tt_200 and "first contact" in tt_200.basis[0]


def test_fp8_on_a_moe_model_pays_first_contact_beyond_both_its_parts() -> None:
    """The FP8 rows are dense and the MoE rows BF16: FP8 grouped expert GEMMs (tokens padded per expert, copies
    cast per expert) were never checked, so a MoE plan in FP8 states the MoE and FP8 terms and first contact
    besides, on the step; its peak holds what FP8 and MoE each hold, which their own rows checked."""
    assert not any("moe_fp8" in r.features for r in E.STEP_ROWS + E.MEMORY_ROWS)
    assert band_features(moe=True, seq_len=4096, fp8=True) == ("moe", "fp8", "moe_fp8")
    assert band_features(moe=False, seq_len=4096, fp8=True) == ("fp8",)
    parts = relative_spread("megatron", "blackwell", ("moe", "fp8"))
    both = relative_spread("megatron", "blackwell", ("moe", "fp8", "moe_fp8"))
    fc = quantile([abs(d) for d in FIRST_CONTACT])
    assert both.step == pytest.approx(math.hypot(parts.step, fc))
    assert both.memory == parts.memory
    assert "fp8 on a moe model (0 runs" in both.basis[-1]


@pytest.mark.parametrize(("run", "old", "new", "said"), [
    ("qwen3-235b-256xgb200-mbridge", "hidden_size: 4096", "hidden_size: 2048", "moe at hidden 2048"),
    ("llama3-8b-8xb200-mbridge-fp8", "max_seq_len: 8192", "max_seq_len: 131072", "131,072 tokens, longer than"),
    ("llama31-405b-128xgb200-nemo", "context_parallel_algo: ring", "context_parallel_algo: ulysses",
     "context parallelism by ulysses"),
])
def test_the_estimate_says_what_of_its_plan_the_band_was_never_checked_on(tmp_path: object, run: str, old: str,
                                                                         new: str, said: str) -> None:
    from pathlib import Path

    folder, out = RUNS / run, Path(str(tmp_path))
    (out / "search.yaml").write_text((folder / "search.yaml").read_text())
    assert old in (folder / "train.yaml").read_text()
    (out / "train.yaml").write_text((folder / "train.yaml").read_text().replace(old, new))
    as_run, changed = _estimate(folder / "search.yaml")["error_band"], _estimate(out / "search.yaml")["error_band"]
    assert changed["step"] > as_run["step"] + 0.1
    assert any(said in b for b in changed["basis"]), changed["basis"]
    assert not any("first contact" in b for b in as_run["basis"])


def test_the_band_holds_the_shown_runs_about_four_times_out_of_five() -> None:
    for rows, kind in ((E.STEP_ROWS, "step"), (E.MEMORY_ROWS, "memory")):
        held = [abs(r.deviation) <= getattr(relative_spread(r.framework, r.generation, r.features), kind)
                for r in rows]
        assert COVERAGE - 0.1 <= statistics.mean(held) < 1.0, kind


def test_the_evidence_is_the_model_as_it_prices_now() -> None:
    # rows nothing was refitted for: the committed deviation is what pricing the run gives today
    # (rerun `benchmarks/accuracy.py --write-band` after changing the model)
    rows = {r.id: r for r in E.STEP_ROWS}
    for cid, published in (("K5-175B-sel", 13.75), ("N1-05", 14.45), ("M-07", 5.259)):
        d = published / _estimate(CASES / f"{cid}.yaml")["step_time_s"] - 1
        assert d == pytest.approx(rows[cid].deviation, abs=1e-3), cid
    grok = _estimate(RUNS / "grok1-314b-512xh100-nemo" / "search.yaml")
    assert 21.01 / grok["step_time_s"] - 1 == pytest.approx(rows["grok1-314b-512xh100-nemo"].deviation, abs=1e-3)


def test_plans_of_one_model_are_ordered_to_the_scatter_between_them() -> None:
    g = ordering_spread("megatron", "ampere")
    assert 0 < g < relative_spread("megatron", "hopper").step
    assert quantile([0.0, 1.0], 0.8) == pytest.approx(0.8)
    doc = json.loads(hp_plan("compare", str(ROOT / "examples" / "explain" / "1f1b.yaml"),
                             str(ROOT / "examples" / "explain" / "interleaved.yaml"), "--json").stdout)
    low, high = doc["error_band"]
    assert high - 1 == pytest.approx(2 ** 0.5 * doc["a"]["error_band"]["order"])
    assert low == pytest.approx(1 / high)


@pytest.mark.parametrize("run, measured_s", [("llama31-405b-128xgb200-nemo", 9.347),
                                             ("llama3-8b-8xb200-mbridge-fp8", 128 * 8192 / (8 * 30624.0))])
def test_blackwell_gemms_are_priced_as_the_generation_runs_them(run: str, measured_s: float) -> None:
    # BLACKWELL_GEMM_FACTOR (fitted on these two runs, leave-one-out ≤ 6 %): before it both read 16-17 % fast
    doc = _estimate(RUNS / run / "search.yaml")
    assert abs(doc["step_time_s"] / measured_s - 1) < 0.05
    lo, hi = doc["step_time_range_s"]
    assert lo <= measured_s <= hi


def test_a_band_derived_without_a_run_is_the_one_it_would_have_stated_before_that_run() -> None:
    """spread_from on the committed rows is relative_spread; without the only rows of a class the class falls back
    to first contact, as a plan on a generation no run was shown on does (benchmarks/accuracy.py's "left out")."""
    assert spread_from(E.STEP_ROWS, E.MEMORY_ROWS, "megatron", "hopper") == relative_spread("megatron", "hopper")
    blackwell = [r for r in E.STEP_ROWS if r.framework == "megatron" and r.generation == "blackwell"]
    assert blackwell, "the shown runs hold Megatron on Blackwell"
    rest = [r for r in E.STEP_ROWS if r not in blackwell]
    seen = spread_from(E.STEP_ROWS, E.MEMORY_ROWS, "megatron", "blackwell")
    unseen = spread_from(rest, E.MEMORY_ROWS, "megatron", "blackwell")
    assert unseen.step > seen.step + 0.1
    assert any("first contact" in b for b in unseen.basis) and not any("first contact" in b for b in seen.basis)


def test_a_pipelined_plan_states_the_memory_band_of_the_pipelined_runs(tmp_path: object) -> None:
    """End to end through `hp-plan estimate --json`: torchtitan's Llama 3.1 8B run (pp 1) states the ±1.7 % of its
    unpipelined runs on the peak; the same model split over two pipeline stages reads the pipelined runs'
    memory error as well (the `pipeline` feature: Llama 3.1 405B at pp 8, +9.6 %), and its step band is the
    same."""
    from pathlib import Path

    folder, out = RUNS / "llama31-8b-8xh100-96g-torchtitan-compile", Path(str(tmp_path))
    search = (folder / "search.yaml").read_text()
    for old, new in (("  dp: 8\n  fsdp: 8\n", "  dp: 4\n  fsdp: 4\n"), ("  pp: 1\n", "  pp: 2\n"),
                     ("micro_batch_num: 1\n", "micro_batch_num: 2\n")):
        assert old in search
        search = search.replace(old, new)
    train = (folder / "train.yaml").read_text().replace("pp_size: 1", "pp_size: 2").replace("dp_shard_size: 8",
                                                                                          "dp_shard_size: 4")
    (out / "search.yaml").write_text(search)
    (out / "train.yaml").write_text(train)
    flat, piped = _estimate(folder / "search.yaml"), _estimate(out / "search.yaml")
    assert (flat["strategy"]["pp"], piped["strategy"]["pp"]) == (1, 2)
    assert flat["error_band"]["memory"] < 0.03
    assert piped["error_band"]["memory"] > flat["error_band"]["memory"] + 0.05
    assert piped["error_band"]["step"] == pytest.approx(flat["error_band"]["step"])
    # the shown pipelined runs carry the feature, the unpipelined ones do not
    assert {r.pp > 1 for r in E.MEMORY_ROWS} == {True, False}
