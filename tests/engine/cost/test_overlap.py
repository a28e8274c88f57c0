"""The overlap run options (RunOptions.tp_comm_overlap / overlap_grad_reduce / overlap_param_gather): what
each hides, the bounds it must respect, and that the readers carry them from both file kinds."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from engine.cost import constants as K
from engine.cost import estimate
from engine.cost.communication import dp_buckets, dp_exposed_time, tp_exposed
from engine.specs import RunOptions, Strategy
from tests.engine.cost.shapes import MEGATRON_RUN, cluster, gpt, run_of_train_yaml

# A 32B-class GPT at tp 8 × dp 16 with the distributed optimizer: its DP traffic crosses the NICs.
M = gpt(48, 7168, 56, flash=True)
CL = cluster(16, "H100")
NO_OVERLAP = replace(MEGATRON_RUN, overlap_grad_reduce=False, overlap_param_gather=False)


def _strategy(mb: int, b: int = 1) -> Strategy:
    return Strategy(dp=16, tp=8, sequence_parallel=True, micro_batch_size=b, micro_batch_num=mb, optimizer_shard=16)


def test_defaults_are_the_engines_previous_behaviour_and_the_stacks_weight_gather() -> None:
    """Unstated: no TP comm-GEMM overlap, the gradient reduction overlapped, and the weight all-gather as the stack's
    recipes run it: overlapped under NeMo's / Megatron-Bridge's (megatron), not under MindSpeed-LLM's scripts,
    which rarely pass --overlap-param-gather (Framework.param_gather_overlap); a stated value wins."""
    from engine.catalog.frameworks import FRAMEWORKS

    r = RunOptions()
    assert (r.tp_comm_overlap, r.overlap_grad_reduce, r.overlap_param_gather) == (False, True, None)
    assert FRAMEWORKS["megatron"].dp_overlaps(r) == (True, True)
    assert FRAMEWORKS["mindspeed"].dp_overlaps(r) == (True, False)
    assert FRAMEWORKS["mindspeed"].dp_overlaps(replace(r, overlap_param_gather=True)) == (True, True)


def test_an_unstated_weight_gather_on_mindspeed_is_exposed_as_its_scripts_run_it() -> None:
    """The same plan on MindSpeed-LLM prices its ZeRO-1 weight all-gather exposed unless the file states the
    overlap; stated, the step is Megatron's overlapped one."""
    ms = replace(NO_OVERLAP, framework="mindspeed", overlap_grad_reduce=True, overlap_param_gather=None)
    unstated = estimate(M, CL, ms, _strategy(4), 80.0).time_breakdown_s["dp_comm"]
    stated = estimate(M, CL, replace(ms, overlap_param_gather=True), _strategy(4), 80.0).time_breakdown_s["dp_comm"]
    off = estimate(M, CL, replace(ms, overlap_param_gather=False), _strategy(4), 80.0).time_breakdown_s["dp_comm"]
    assert unstated == off > stated


def test_bucketed_exposure_is_between_one_bucket_and_all() -> None:
    rng = np.random.default_rng(0)
    comm = rng.uniform(0.0, 2.0, (200, 3))
    window = rng.uniform(0.0, 2.0, (200, 3))
    nb = rng.integers(1, 50, (200, 3)).astype(float)
    e = dp_exposed_time(comm, window, nb)
    assert (e >= comm / nb - 1e-15).all() and (e <= comm + 1e-15).all() and (e >= 0).all()
    # one bucket: nothing overlaps
    assert dp_exposed_time(np.array([1.0]), np.array([5.0]), np.array([1.0]))[0] == 1.0
    # ample compute: only the last bucket shows
    assert dp_exposed_time(np.array([1.0]), np.array([10.0]), np.array([4.0]))[0] == pytest.approx(0.25)
    # short compute: the collectives run back to back after the first bucket is ready
    assert dp_exposed_time(np.array([1.0]), np.array([0.4]), np.array([4.0]))[0] == pytest.approx(1.0 - 0.3)


def test_bucket_size_follows_megatron() -> None:
    nb = dp_buckets(np.array([[4e9, 10e6]]), np.array([48.0]))
    # max(40M, 1M × 48) = 48M parameters per bucket
    assert nb[0, 0] == np.ceil(4e9 / 48e6) and nb[0, 1] == 1.0


@pytest.mark.parametrize("mb", [1, 4, 16])
def test_overlap_grad_reduce_never_exposes_more(mb: int) -> None:
    s = _strategy(mb)
    on = estimate(M, CL, replace(NO_OVERLAP, overlap_grad_reduce=True), s, 80.0).time_breakdown_s["dp_comm"]
    off = estimate(M, CL, NO_OVERLAP, s, 80.0).time_breakdown_s["dp_comm"]
    assert 0.0 <= on <= off
    both = estimate(M, CL, replace(NO_OVERLAP, overlap_grad_reduce=True, overlap_param_gather=True), s, 80.0)
    assert 0.0 <= both.time_breakdown_s["dp_comm"] <= on


def test_with_enough_backward_only_the_last_bucket_shows() -> None:
    """One micro-batch of 16 sequences: the backward outlasts the gradient reduce-scatter, so the exposed
    reduction is one bucket's share of it."""
    s = _strategy(1, b=16)
    off = estimate(M, CL, NO_OVERLAP, s, 80.0)
    grad_only = replace(NO_OVERLAP, overlap_grad_reduce=True)
    on = estimate(M, CL, grad_only, s, 80.0)
    # what the gather costs is the same in both (not overlapped): the difference is the reduction's
    hidden = off.time_breakdown_s["dp_comm"] - on.time_breakdown_s["dp_comm"]
    assert hidden > 0
    stage_params = (off.memory_breakdown_gib["parameters"] * K.GIB) / MEGATRON_RUN.param_bytes
    nb = float(np.ceil(stage_params / max(K.DP_BUCKET_PARAMS, K.DP_BUCKET_PARAMS_PER_RANK * 16)))
    # reduction time = hidden + what shows; what shows must be one bucket: reduction / nb
    red = hidden / (1 - 1 / nb)
    assert on.time_breakdown_s["dp_comm"] - (off.time_breakdown_s["dp_comm"] - red) == pytest.approx(red / nb, rel=1e-9)
    assert on.time_breakdown_s["compute"] * (2 / 3) > red


def test_tp_comm_overlap_hides_tp_collectives_within_bounds() -> None:
    s = _strategy(4)
    off = estimate(M, CL, MEGATRON_RUN, s, 80.0)
    on = estimate(M, CL, replace(MEGATRON_RUN, tp_comm_overlap=True), s, 80.0)
    assert 0.0 < on.time_breakdown_s["tp_comm"] < off.time_breakdown_s["tp_comm"]
    assert on.time_breakdown_s["compute"] == off.time_breakdown_s["compute"]
    # per pair: never negative, never more than the pair, at least the last pipeline chunk, and hidden only
    # under its own block's GEMMs (forward: their time; backward: BWD_GEMM_RATIO/2 × it beside each collective)
    coll = np.array([1.0, 1.0, 1.0])
    gemm = np.array([[10.0, 10.0], [0.1, 0.1], [0.0, 0.0]])
    fwd, bwd = tp_exposed(coll, gemm, True)
    assert fwd[0, 0] == pytest.approx(0.5 / K.TP_COMM_OVERLAP_SPLITS) and bwd[0, 0] == 0.0
    assert fwd[1, 0] == pytest.approx(1.0 - 0.1) and bwd[1, 0] == pytest.approx(1.0 - 0.05 * K.BWD_GEMM_RATIO)
    assert fwd[2, 0] == 1.0 and bwd[2, 0] == 1.0
    f0, b0 = tp_exposed(coll, gemm, False)
    assert np.allclose(f0, 1 - K.TP_OVERLAP) and np.allclose(b0, 1 - K.TP_OVERLAP)


def test_readers_carry_the_overlap_keys(tmp_path: Path) -> None:
    r = run_of_train_yaml(tmp_path, "  tp_comm_overlap: true\n  overlap_grad_reduce: false\n")
    assert (r.tp_comm_overlap, r.overlap_grad_reduce, r.overlap_param_gather) == (True, False, None)


def test_search_config_reads_top_level_overlap_keys() -> None:
    """The M calibration cases ([CAL] §5, run with all three overlaps) state them as top-level keys."""
    from engine.check import check_file

    path = Path(__file__).resolve().parents[3] / "benchmarks" / "cases" / "M-04.yaml"
    loaded = check_file(str(path))
    assert not [d for d in loaded.diagnostics if d.is_error], [d.message for d in loaded.diagnostics]
    assert not [d for d in loaded.diagnostics if "overlap" in d.message]
    assert loaded.config is not None
    r = loaded.config.run
    assert (r.tp_comm_overlap, r.overlap_grad_reduce, r.overlap_param_gather) == (True, True, True)
