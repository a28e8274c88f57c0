"""Megatron-Core's CPU offloading of whole layers (`cpu_offloading_num_layers`, engine.cost.offload): the first N
layers' activations leave the device but for one layer in transit, the copies' wait beyond the compute under them
is priced, the plans Megatron refuses (pipeline parallelism, recompute, N not below the layers) and the stacks
without it say so at the key and are priced without it, and the band says no run checked it."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from engine.catalog.frameworks import FRAMEWORKS
from engine.cost import CandidateTable, estimate
from engine.cost.offload import OFFLOAD, with_layer_offload
from engine.specs import RecomputePlan, RunOptions, Strategy
from tests.engine.cost.shapes import LLAMA8B, cluster
from tests.support.cli import hp_plan
from tests.support.configs import llama8b_model

MEGATRON = RunOptions(framework="megatron")
PLAN = Strategy(dp=8, dp_shard=8, micro_batch_size=2, micro_batch_num=4)


def _offloaded(s: Strategy, layers: int) -> Strategy:
    return replace(s, recompute=replace(s.recompute, offload=((0, layers - 1),)))


def test_only_megatron_offloads_whole_layers_and_only_where_its_config_allows() -> None:
    space = FRAMEWORKS["megatron"].space
    assert space.layer_offload_refusals(16, pp=1, recompute=False, num_layers=32) == []
    why = space.layer_offload_refusals(32, pp=2, recompute=True, num_layers=32)
    assert len(why) == 3 and "pp 2" in why[0] and "recompute" in why[1] and "32" in why[2]
    for name in ("torchtitan", "mindspeed", "hyperparallel"):
        assert FRAMEWORKS[name].space.layer_offload_refusals(1, pp=1, recompute=False, num_layers=32)


def test_a_table_offloads_only_the_rows_megatron_runs_it_on() -> None:
    """The search prices a stated offload row by row: the rule is StackSpace.layer_offload_refusals', so in one
    table only the pp 1 rows that recompute nothing carry it, whatever the order of the rows."""
    rows = [replace(PLAN, dp=4, dp_shard=4, pp=pp, recompute=RecomputePlan(mode))
            for pp in (2, 1) for mode in ("full", "off", "selective")]
    table = with_layer_offload(LLAMA8B, replace(MEGATRON, cpu_offload_layers=8), CandidateTable.from_strategies(rows))
    assert table.layer_modes is not None
    marked = (np.asarray(table.layer_modes) == OFFLOAD).any(axis=1)
    assert marked.tolist() == [False, False, False, False, True, False]
    assert (np.asarray(table.layer_modes)[4, :8] == OFFLOAD).all()
    assert not (np.asarray(table.layer_modes)[4, 8:] == OFFLOAD).any()


def test_the_device_keeps_the_other_layers_and_one_copy_in_transit() -> None:
    """Llama 8B at 8K, mbs 2 on 8 GB200 (NVLink-C2C to the host, 450 GB/s): 16 of 32 layers offloaded free 15 layers'
    activations, and the copies hide under the forward and backward of the layers after the first."""
    cl = cluster(1, "GB200")
    plain = estimate(LLAMA8B, cl, MEGATRON, PLAN, 1e6)
    off = estimate(LLAMA8B, cl, MEGATRON, _offloaded(PLAN, 16), 1e6)
    kept = off.offloaded_gib["0-15"]
    assert kept > 0.5
    assert plain.peak_memory_gib - off.peak_memory_gib == pytest.approx(15 * kept, rel=1e-6)
    assert off.step_time_s == pytest.approx(plain.step_time_s, rel=1e-12)


def test_copies_slower_than_the_compute_under_them_show_in_the_step() -> None:
    """The same plan over H100's PCIe Gen5 (63 GB/s): 16 layers' copies take longer than 0.8 × the forward of the
    other 31 layers, so the step waits for them, reported with recompute; 2 layers' copies still hide."""
    cl = cluster(1, "H100")
    plain = estimate(LLAMA8B, cl, MEGATRON, PLAN, 1e6)
    many = estimate(LLAMA8B, cl, MEGATRON, _offloaded(PLAN, 16), 1e6)
    few = estimate(LLAMA8B, cl, MEGATRON, _offloaded(PLAN, 2), 1e6)
    wait = many.step_time_s - plain.step_time_s
    assert wait > 0.01
    assert many.time_breakdown_s["recompute"] - plain.time_breakdown_s["recompute"] == pytest.approx(wait, rel=1e-9)
    assert many.tokens_per_s == pytest.approx(plain.tokens_per_s * plain.step_time_s / many.step_time_s, rel=1e-9)
    assert few.step_time_s == pytest.approx(plain.step_time_s, rel=1e-12)
    copies = 16 * many.offloaded_gib["0-15"] / (63e9 / 2**30)
    assert wait < 2 * 4 * copies  # never more than both directions' copies of every micro-batch


def test_hyperparallel_offload_stays_priced_hidden() -> None:
    """HyperParallel's offload is chosen only where it hides (engine.search.offload_choice): no wait is added."""
    run = RunOptions(framework="hyperparallel")
    s = Strategy(dp=8, dp_shard=8, micro_batch_size=2, micro_batch_num=4, recompute=RecomputePlan("off"))
    plain = estimate(LLAMA8B, cluster(1, "H100"), run, s, 1e6)
    off = estimate(LLAMA8B, cluster(1, "H100"), run, _offloaded(s, 16), 1e6)
    assert off.step_time_s == pytest.approx(plain.step_time_s, rel=1e-12)
    assert off.peak_memory_gib < plain.peak_memory_gib


SEARCH = llama8b_model(name="llama3-8b") + """\
cluster: {{num_nodes: 1, cards_per_node: 8, device_type: GB200}}
parallelism: {{dp: {dp}, fsdp: {dp}, tp: 1, pp: {pp}, cp: 1, ep: 1, vpp: 1, micro_batch_size: 2, micro_batch_num: {mbn},
  sequence_parallel: false}}
constraint: {{global_batch_size: 64, memory_limit_gb: 180}}
recompute: {recompute}
{offload}
estimator: {{framework: {framework}}}
"""


def _estimate(tmp_path: Path, name: str, *, offload: int | None, pp: int = 1, recompute: str = "none",
              framework: str = "megatron") -> dict:
    dp = 8 // pp
    text = SEARCH.format(dp=dp, pp=pp, mbn=64 // (dp * 2), recompute=recompute, framework=framework,
                         offload="" if offload is None else f"cpu_offloading_num_layers: {offload}")
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    out = hp_plan("estimate", str(path), "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_estimate_prices_the_stated_offload_end_to_end(tmp_path: Path) -> None:
    plain = _estimate(tmp_path, "plain", offload=None)
    off = _estimate(tmp_path, "off", offload=16)
    assert off["strategy"]["recompute"]["layers"] == {"0-15": "offload"}
    assert off["peak_memory_gib"] == pytest.approx(plain["peak_memory_gib"] - 15 * off["offloaded_gib"]["0-15"],
                                                   rel=1e-6)
    assert any("offloaded to the host" in b for b in off["error_band"]["basis"])
    assert off["step_time_range_s"][1] - off["step_time_range_s"][0] > (
        plain["step_time_range_s"][1] - plain["step_time_range_s"][0])
    assert not [d for d in off["diagnostics"] if d["code"] in ("HP530", "HP533")]
    text = hp_plan("estimate", str(tmp_path / "off.yaml"))
    assert "Offloaded to the host as megatron runs --cpu-offloading-num-layers: layers 0-15" in text.stdout
    exported = hp_plan("export", str(tmp_path / "off.yaml"), "--to", "megatron")
    assert exported.returncode == 0, exported.stderr
    assert "--cpu-offloading-num-layers 16" in exported.stdout


@pytest.mark.parametrize(("kw", "code", "words"), [
    ({"pp": 2}, "HP530", "pipeline parallelism (pp 2)"),
    ({"recompute": "full"}, "HP530", "activation recompute"),
    ({"offload": 32}, "HP530", "fewer than the model's 32"),
    ({"framework": "torchtitan"}, "HP533", "offered by megatron"),
])
def test_a_plan_megatron_would_refuse_is_said_at_the_key_and_priced_without_it(
        tmp_path: Path, kw: dict, code: str, words: str) -> None:
    args: dict = {"offload": 16, **kw}
    doc = _estimate(tmp_path, "refused", **args)
    hits = [d for d in doc["diagnostics"] if d["code"] == code and "cpu_offloading_num_layers" in d.get("path", "")
            + d["message"]]
    assert hits and words in hits[0]["message"], doc["diagnostics"]
    assert "offloaded_gib" not in doc
    assert doc["strategy"]["recompute"] in ("off", "full")


def test_the_search_prices_its_candidates_with_the_stated_offload(tmp_path: Path) -> None:
    """A search over tp, pp and the micro-batch under 60 GiB: the pp 1 plans without recompute carry the 24 layers'
    offload (and fit), the pipelined ones cannot and are priced without it; the near-tie message says how far the
    offload's unchecked lead reaches."""
    text = SEARCH.format(dp=8, pp=1, mbn=4, recompute="auto", framework="megatron", offload="cpu_offloading_num_layers: 24")
    text = text.replace("parallelism: {dp: 8, fsdp: 8, tp: 1, pp: 1, cp: 1, ep: 1, vpp: 1, micro_batch_size: 2, "
                        "micro_batch_num: 4,\n  sequence_parallel: false}",
                        "parallelism: {tp: [1, 2], pp: [1, 2], cp: 1, ep: 1, vpp: 1, micro_batch_size: [1, 2, 4]}")
    text = text.replace("memory_limit_gb: 180", "memory_limit_gb: 60")
    path = tmp_path / "search.yaml"
    path.write_text(text)
    out = hp_plan("search", str(path), "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    best = doc["best"]
    assert best["strategy"]["pp"] == 1 and best["strategy"]["recompute"]["layers"] == {"0-23": "offload"}
    assert best["offloaded_gib"]["0-23"] > 0
    piped = [e for e in doc["top"] if e["strategy"]["pp"] > 1]
    assert piped and all("offloaded_gib" not in e for e in piped)
    shown = hp_plan("search", str(path))
    assert "where the fastest plan's lead rests on what no run checked" in shown.stdout
    assert "Offloaded to the host as megatron runs --cpu-offloading-num-layers: layers 0-23" in shown.stdout


def test_the_search_s_per_layer_offload_asked_of_megatron_says_what_it_runs_instead(tmp_path: Path) -> None:
    """`offload` is HyperParallel's search choice ([HP] §8.6); Megatron's search offers none, so a Megatron search
    config asking it hears so at the key (HP533) and what Megatron runs instead, and its plans offload nothing."""
    text = SEARCH.format(dp=8, pp=1, mbn=4, recompute="per_layer", framework="megatron", offload="offload: true")
    path = tmp_path / "search.yaml"
    path.write_text(text)
    out = hp_plan("search", str(path), "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    hits = [d for d in doc["diagnostics"] if d["code"] == "HP533"]
    assert hits and "cpu_offloading_num_layers" in hits[0]["message"] and "hyperparallel" in hits[0]["message"]
    assert hits[0]["range"]["start"]["line"] == text.splitlines().index("offload: true")
    assert all("offloaded_gib" not in e for e in doc["top"])


def test_recompute_auto_weighs_the_offload_wait_against_recomputing(tmp_path: Path) -> None:
    """On H100's PCIe the offload's copies make no recompute slower than full recompute for this plan: the search's
    one-mode choice (`recompute: auto`) must not take no recompute as the fastest mode, nor its time as every
    mode's lower bound, where it waits (engine.search.rank)."""
    text = SEARCH.format(dp=8, pp=1, mbn=4, recompute="auto", framework="megatron",
                         offload="cpu_offloading_num_layers: 24").replace("device_type: GB200", "device_type: H100")
    times = {}
    for mode in ("auto", "none", "full"):
        path = tmp_path / f"{mode}.yaml"
        path.write_text(text.replace("recompute: auto", f"recompute: {mode}"))
        out = hp_plan("search", str(path), "--json")
        assert out.returncode == 0, out.stderr
        best = json.loads(out.stdout)["best"]
        times[mode] = (best["step_time_s"], best["strategy"]["recompute"])
    assert times["none"][0] > times["full"][0]  # the copies' wait outweighs recomputing here
    assert times["auto"] == times["full"]


def test_a_search_on_a_stack_without_layer_offload_says_so(tmp_path: Path) -> None:
    text = SEARCH.format(dp=8, pp=1, mbn=4, recompute="none", framework="torchtitan",
                         offload="cpu_offloading_num_layers: 16")
    path = tmp_path / "search.yaml"
    path.write_text(text.replace("tp: 1, pp: 1", "tp: [1, 2], pp: 1"))
    out = hp_plan("search", str(path), "--json")
    doc = json.loads(out.stdout)
    hits = [d for d in doc["diagnostics"] if d["code"] == "HP533" and "cpu_offloading_num_layers" in d["message"]]
    assert hits and all("offloaded_gib" not in e for e in doc["top"])


def test_a_range_over_dense_and_moe_layers_names_its_largest_layer() -> None:
    """Megatron's first N layers of a model whose first layer is dense: the range's GiB per layer is the largest
    of its layers' (the search's offload ranges hold one kind, where it is each layer's)."""
    from engine.cost import price_table
    from engine.cost.table import CandidateTable
    from tests.engine.cost.shapes import MOE, h100

    s = replace(Strategy(dp=16, ep=16, micro_batch_num=4), recompute=RecomputePlan("off", offload=((0, 3),)))
    priced = price_table(MOE, h100(2), MEGATRON, CandidateTable.from_strategies([s], num_layers=MOE.num_layers), 1e9)
    assert priced.offloaded_gib is not None
    per_layer = priced.offloaded_gib[0, :4]
    assert per_layer[0] != per_layer[1]  # the dense layer keeps another amount than the MoE ones
    est = estimate(MOE, h100(2), MEGATRON, s, 1e9)
    assert est.offloaded_gib == {"0-3": pytest.approx(float(per_layer.max()))}
