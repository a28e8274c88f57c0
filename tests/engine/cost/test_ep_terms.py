"""Expert parallelism priced as run (D-010): dispatcher volume, overlaps bounded by the compute they run beside, grouped-GEMM
efficiency monotone in the tokens each expert sees, and the options read from a search config."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from engine.check import check_file
from engine.cost import constants as K
from engine.cost import estimate
from engine.cost.communication import ep_exposed
from engine.cost.timing import size_factor
from engine.specs import RunOptions, Strategy
from tests.engine.cost.shapes import MOE, h100

MEGATRON = RunOptions(framework="megatron", selective_policy="attention")


def _ep(run: RunOptions, s: Strategy | None = None) -> float:
    s = s or Strategy(dp=16, ep=16, micro_batch_num=4)
    return estimate(MOE, h100(2), run, s, 1e9).time_breakdown_s["ep_comm"]


def test_dispatcher_volume_deepep_below_alltoall_across_nodes() -> None:
    assert 0 < _ep(replace(MEGATRON, moe_dispatcher="deepep")) < _ep(MEGATRON)


@pytest.mark.parametrize("how", ["", "chunked", "batch"])
def test_overlap_never_hides_more_than_the_compute_beside_it(how: str) -> None:
    a2a = np.array([0.0, 1e-3, 5e-3, 1.0])
    shared, routed, compute = np.full(4, 2e-3), np.full(4, 3e-3), np.full(4, 20e-3)
    f0, b0 = ep_exposed(a2a, shared, routed, compute, False, "")
    f, b = ep_exposed(a2a, shared, routed, compute, True, how)
    assert np.all(f >= 0) and np.all(b >= 0) and np.all(f <= f0) and np.all(b <= b0)
    hidden = (f0 + b0) - (f + b)
    bound = {"": 3 * shared, "chunked": 3 * (shared + routed), "batch": compute + 3 * shared}[how]
    assert np.all(hidden <= bound + 1e-12)
    assert f[-1] > 0 and b[-1] > 0  # a second of all-to-all cannot hide under milliseconds of compute


def test_megatron_batch_overlap_hides_its_measured_share_not_all() -> None:
    """[MB-EPOVL]: Megatron-Core's batch-level overlap ran 36.55 % of the all-to-alls' time under compute, with
    compute to spare; the rest stays exposed. DualPipe's own pairing (share 1) hides up to the compute."""
    a2a, zero, compute = np.array([1e-3]), np.zeros(1), np.array([1.0])
    f0, b0 = ep_exposed(a2a, zero, zero, compute, False, "")
    f, b = ep_exposed(a2a, zero, zero, compute, False, "batch", K.MCORE_BATCH_A2A_HIDDEN_SHARE)
    assert (f + b) == pytest.approx((1 - K.MCORE_BATCH_A2A_HIDDEN_SHARE) * (f0 + b0))
    f1, b1 = ep_exposed(a2a, zero, zero, compute, False, "batch", 1.0)
    assert (f1 + b1) == pytest.approx(0.0)
    off = _ep(MEGATRON)
    on = _ep(replace(MEGATRON, moe_a2a_overlap=True))
    assert on == pytest.approx((1 - K.MCORE_BATCH_A2A_HIDDEN_SHARE) * off, rel=1e-6)


def test_stated_overlaps_lower_ep_comm_only_where_the_framework_offers_them() -> None:
    on = replace(MEGATRON, moe_shared_expert_overlap=True, moe_a2a_overlap=True)
    assert _ep(on) < _ep(MEGATRON)
    titan = RunOptions(framework="torchtitan", selective_policy="op")
    assert _ep(replace(titan, moe_shared_expert_overlap=True, moe_a2a_overlap=True)) == pytest.approx(_ep(titan))


def test_grouped_gemm_efficiency_rises_with_tokens_per_expert() -> None:
    calls = 2 * np.array([64.0, 256.0, 1024.0, 4096.0]) * 4096 * 1408
    assert np.all(np.diff(size_factor(calls)) > 0)
    # Priced end to end: expert compute per token falls as the micro-batch (tokens per expert) grows.
    per_tok = []
    for b in (1, 4):
        s = Strategy(dp=8, ep=8, micro_batch_size=b, micro_batch_num=8 // b)
        e = estimate(replace(MOE, seq_len=512), h100(1), MEGATRON, s, 1e9)
        per_tok.append(e.time_breakdown_s["compute"])
    assert per_tok[1] < per_tok[0]


def test_overlap_keys_read_from_a_search_config(tmp_path: Path) -> None:
    src = Path("benchmarks/calibration_runs/grok1-314b-512xh100-nemo/search.yaml").read_text()
    p = tmp_path / "search.yaml"
    (tmp_path / "train.yaml").write_text(
        Path("benchmarks/calibration_runs/grok1-314b-512xh100-nemo/train.yaml").read_text())
    p.write_text(src + "\nmoe_a2a_overlap: true\nmoe_shared_expert_overlap: true\n")
    loaded = check_file(str(p))
    assert loaded.config is not None and loaded.config.run is not None
    assert loaded.config.run.moe_a2a_overlap and loaded.config.run.moe_shared_expert_overlap


def test_a_stated_capacity_bounds_the_busiest_rank_dropless_routing_does_not(tmp_path: Path) -> None:
    """Dropless routing (no capacity factor stated) lands unevenly: the busiest rank gets MOE_IMBALANCE × the
    mean copies. A stated capacity factor (token drop padded to the capacity, or forced balance) gives every
    expert exactly top-k × the factor: less all-to-all and expert time for the same plan. Read from a file."""
    from engine.cost import constants as K
    from engine.cost.rows import busiest_rank_copies

    assert busiest_rank_copies(MOE) == pytest.approx(8 * K.MOE_IMBALANCE)
    assert busiest_rank_copies(replace(MOE, token_drop=True)) == pytest.approx(8.0)
    assert busiest_rank_copies(replace(MOE, token_drop=True, capacity_factor=1.25)) == pytest.approx(10.0)
    dropless = estimate(MOE, h100(2), MEGATRON, Strategy(dp=16, ep=16, micro_batch_num=4), 1e9)
    capped = estimate(replace(MOE, token_drop=True), h100(2), MEGATRON, Strategy(dp=16, ep=16, micro_batch_num=4), 1e9)
    assert capped.time_breakdown_s["ep_comm"] < dropless.time_breakdown_s["ep_comm"]
    assert capped.time_breakdown_s["compute"] < dropless.time_breakdown_s["compute"]
    yaml = ("model:\n  name: m\n  config_overrides:\n    num_hidden_layers: 4\n    hidden_size: 1024\n"
            "    num_attention_heads: 8\n    intermediate_size: 4096\n    vocab_size: 32000\n    num_experts: 8\n"
            "    num_experts_per_tok: 2\n    moe_intermediate_size: 1024\n{cap}"
            "dataset:\n  data_transform:\n    max_seq_len: 1024\n")
    specs = []
    for cap in ("", "    capacity_factor: 1.0\n"):
        (tmp_path / "train.yaml").write_text(yaml.format(cap=cap))
        loaded = check_file(str(tmp_path / "train.yaml"))
        assert loaded.config is not None and loaded.config.model is not None
        specs.append(loaded.config.model)
    assert (specs[0].token_drop, specs[1].token_drop) == (False, True)


def test_forced_balance_gives_the_busiest_rank_the_mean_load(tmp_path: Path) -> None:
    """`moe_router_force_load_balancing` (Megatron-Core's benchmark switch, which Megatron-Bridge's MoE tables run):
    dropless routing without the MOE_IMBALANCE excess, read from a search config and priced end to end: the expert
    communication and compute both fall, by at most that excess."""
    from engine.cost.rows import busiest_rank_copies

    assert busiest_rank_copies(MOE, forced_balance=True) == pytest.approx(8.0)
    s = Strategy(dp=16, ep=16, micro_batch_num=4)
    plain = estimate(MOE, h100(2), MEGATRON, s, 1e9)
    forced = estimate(MOE, h100(2), replace(MEGATRON, moe_router_force_load_balancing=True), s, 1e9)
    ep_p, ep_f = plain.time_breakdown_s["ep_comm"], forced.time_breakdown_s["ep_comm"]
    assert ep_p / K.MOE_IMBALANCE <= ep_f * (1 + 1e-9) and ep_f < ep_p
    assert forced.time_breakdown_s["compute"] < plain.time_breakdown_s["compute"]
    path = tmp_path / "search.yaml"
    path.write_text("""\
model: {num_hidden_layers: 8, hidden_size: 4096, intermediate_size: 14336, num_attention_heads: 32,
  num_key_value_heads: 8, vocab_size: 32000, max_position_embeddings: 4096, num_experts: 64, num_experts_per_tok: 8,
  moe_intermediate_size: 1408, num_shared_experts: 1, first_k_dense_replace: 1}
cluster: {num_nodes: 2, cards_per_node: 8, device_type: H100}
parallelism: {dp: 16, tp: 1, pp: 1, cp: 1, ep: 16, micro_batch_size: 1, sequence_parallel: false}
constraint: {global_batch_size: 64, memory_limit_gb: 80}
recompute: none
moe_router_force_load_balancing: true
estimator: {framework: megatron}
""")
    loaded = check_file(str(path))
    assert loaded.config is not None and loaded.config.run.moe_router_force_load_balancing
