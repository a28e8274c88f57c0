"""Offload in the per-layer recompute choice ([HP] §8.6): feasibility of the copies, the choice of k against a
brute force, the cost model's memory and time of an offloaded plan, the plan's names, and the config's refusals."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from engine.catalog.devices import find_device
from engine.check import check_file
from engine.cost import estimate
from engine.cost.offload import OVERLAP
from engine.cost.table import OFFLOAD_CODE, plan_from_layer_modes, plan_layer_modes
from engine.search.offload_choice import StageInputs, choose_offload, copies_hidden
from engine.search.recompute import brute_force, choose_stage
from engine.specs import RecomputePlan
from tests.support.configs import llama8b_model


def _hidden_by_loop(k: int, n_first: int, total: int, c: float, f0: float, fwd_stage: float) -> bool:
    """The rule as HyperParallel states it: every offloaded copy i, with the ones after it, fits in OVERLAP × the
    forward time left after layer i."""
    if k < 1 or k > n_first or k > total - 1:
        return False
    return all((k - i) * c <= OVERLAP * (fwd_stage - (i + 1) * f0) * (1 + 1e-9) for i in range(k))


def test_copies_hidden_hand_numbers() -> None:
    # ten equal layers, a copy as long as a forward: k copies after layer 0 need k ≤ 0.8 × 9 = 7.2
    ks = np.arange(0, 11)
    got = copies_hidden(ks, np.full(11, 10), np.full(11, 10), np.ones(11), np.ones(11), np.full(11, 10.0))
    assert got.tolist() == [False] + [True] * 7 + [False] * 3
    # a copy twice the forward: k = 3 needs 6 ≤ 7.2 (first) and 2 ≤ 0.8 × 7 (last)
    assert copies_hidden(np.array([3, 4]), np.array([10, 10]), np.array([10, 10]), np.full(2, 2.0), np.ones(2),
                         np.full(2, 10.0)).tolist() == [True, False]


def test_copies_hidden_checks_every_copy() -> None:
    """Checking the first and the last copy equals checking every copy (the constraint is linear in i)."""
    rng = np.random.default_rng(7)
    for _ in range(400):
        total = int(rng.integers(1, 12))
        n_first = int(rng.integers(1, total + 1))
        c, f0, f1 = (float(x) for x in rng.uniform(0.05, 2.0, 3))
        fwd_stage = n_first * f0 + (total - n_first) * f1
        for k in range(0, total + 1):
            got = copies_hidden(np.array([k]), np.array([n_first]), np.array([total]), np.array([c]),
                                np.array([f0]), np.array([fwd_stage]))[0]
            assert bool(got) == _hidden_by_loop(k, n_first, total, c, f0, fwd_stage)


def _brute(count: int, mem: list[float], time: list[float], one: float, budget: float, c: float, f: float
           ) -> tuple[float, int]:
    """(best stage time, the fewest offloaded first layers reaching it, 0 where offload is not faster) over every
    k and every composition of the rest."""
    base, _ = brute_force(count, mem, time, budget)
    best, best_k = base, 0
    for k in range(1, count):
        if not _hidden_by_loop(k, count, count, c, f, count * f):
            continue
        t, comp = brute_force(count - k, mem, time, budget - one)
        if comp and t + k * time[0] < best - 1e-9 * (abs(base) if np.isfinite(base) else 0) \
                and t + k * time[0] < best * (1 - 1e-12):
            best, best_k = t + k * time[0], k
    return best, best_k


def test_choose_offload_matches_brute_force() -> None:
    rng = np.random.default_rng(11)
    rows = 300
    count = rng.integers(1, 7, rows)
    one = rng.uniform(0.5, 2.0, (rows, 3)) * np.array([1.0, 0.5, 0.1])  # off > selective > full, per micro-batch
    flight = rng.integers(1, 5, rows).astype(float)
    mem = one * flight[:, None]
    t_off = rng.uniform(1.0, 2.0, rows)
    time = np.stack([t_off, t_off * 1.1, t_off * 1.3], axis=1)
    budget = count * mem[:, 2] + rng.uniform(0.0, 1.0, rows) * count * (mem[:, 0] - mem[:, 2])
    c = rng.uniform(0.01, 1.0, rows)
    f = np.full(rows, 0.5)
    link = 1.0
    counts2 = np.stack([count, np.zeros(rows, dtype=np.int64)], axis=1)
    mem2 = np.stack([mem, np.full((rows, 3), 1e30)], axis=1)
    time2 = np.stack([time, time], axis=1)
    act_one = np.stack([np.stack([c * link, one[:, 1], one[:, 2]], axis=1)] * 2, axis=1)  # copy time c = GiB/link
    mem2[:, 0, 0] = np.maximum(mem2[:, 0, 0], act_one[:, 0, 0])
    base = choose_stage(counts2, mem2, time2, budget)
    s = StageInputs(counts2, mem2, act_one, time2, np.stack([f, f], axis=1), budget, np.zeros(rows, dtype=np.int64))
    got = choose_offload(s, base, link)
    for r in range(rows):
        want, want_k = _brute(int(count[r]), mem2[r, 0].tolist(), time[r].tolist(), float(act_one[r, 0, 0]),
                              float(budget[r]), float(c[r]), float(f[r]))
        have = got.rest.time[r] if got.rest.feasible[r] else np.inf
        assert have == pytest.approx(want, rel=1e-9, abs=1e-12), r
        assert int(got.k[r]) == want_k, r  # the fewest offloaded layers for the fastest stage
        if got.k[r]:
            assert have < (base.time[r] if base.feasible[r] else np.inf)  # chosen only if faster


def _search_config(tmp_path: Path, offload: str = "offload: true", recompute: str = "per_layer",
                   memory: int = 76) -> Path:
    path = tmp_path / "search.yaml"
    path.write_text(llama8b_model(seq_len=32768) + f"""\
cluster: {{num_nodes: 1, cards_per_node: 8, device_type: H100}}
parallelism: {{tp: 2, pp: 1, cp: 1, ep: 1, vpp: 1, micro_batch_size: 1, sequence_parallel: true, fsdp: 4}}
constraint: {{global_batch_size: 64, memory_limit_gb: {memory}}}
recompute: {recompute}
{offload}
""")
    return path


def test_offloaded_plan_prices_like_off_with_its_activations_off_the_device(tmp_path: Path) -> None:
    cfg = check_file(str(_search_config(tmp_path))).config
    assert cfg is not None and cfg.model is not None and cfg.cluster is not None
    plain = RecomputePlan("full", ((0, 9, "off"),))
    offloaded = RecomputePlan("full", ((0, 9, "off"),), offload=((0, 9),))
    s = replace(cfg.stated, recompute=plain) if cfg.stated else None
    assert s is not None
    a = estimate(cfg.model, cfg.cluster, cfg.run, s, 76.0)
    b = estimate(cfg.model, cfg.cluster, cfg.run, replace(s, recompute=offloaded), 76.0)
    assert b.step_time_s == a.step_time_s  # the copies are hidden: a plain layer's time
    assert b.offloaded_gib is not None and set(b.offloaded_gib) == {"0-9"}
    one = b.offloaded_gib["0-9"]
    # pp 1: one stage holding every micro-batch of a 1F1B stage's in-flight count (1); 10 layers leave, 1 stays
    assert a.peak_memory_gib - b.peak_memory_gib == pytest.approx(9 * one, rel=1e-9)
    assert b.memory_breakdown_gib["activations"] == pytest.approx(a.memory_breakdown_gib["activations"] - 9 * one)
    assert b.to_json()["strategy"]["recompute"] == {"mode": "full", "layers": {"0-9": "offload"}}
    assert "offloaded_gib" in b.to_json() and "offloaded_gib" not in a.to_json()
    # offloaded_share ([HP] §4.1): what offload took off the peak stage's activation memory, as a share of it
    assert b.offloaded_share == pytest.approx(9 * one / a.memory_breakdown_gib["activations"], rel=1e-6)
    assert 0.0 < b.offloaded_share < 1.0 and b.to_json()["offloaded_share"] == b.offloaded_share
    assert "offloaded_share" not in a.to_json() and a.offloaded_share is None


def test_plan_codes_round_trip_and_the_trainer_plan() -> None:
    codes = np.array([3, 3, 3, 2, 2, 0, 0, 0], dtype=np.int8)
    plan = plan_from_layer_modes(codes)
    assert plan.offload == ((0, 2),)
    assert [plan.mode_of(i) for i in range(8)] == ["off", "off", "off", "full", "full", "off", "off", "off"]
    assert plan_layer_modes(plan, 8).tolist() == codes.tolist()
    assert plan.to_json() == {"mode": "off", "layers": {"0-2": "offload", "3-4": "full"}}
    assert plan.for_trainer() == RecomputePlan("off", ((3, 4, "full"),))
    # a plan whose mode is not off writes the offloaded layers off, merged with the off layers beside them
    full = plan_from_layer_modes(np.array([OFFLOAD_CODE, OFFLOAD_CODE, 0, 2, 2, 2, 2], dtype=np.int8))
    assert full.to_json() == {"mode": "full", "layers": {"0-1": "offload", "2": "off"}}
    assert full.for_trainer() == RecomputePlan("full", ((0, 2, "off"),))


def _offload_line(path: Path) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines()) if line.startswith("offload"))


def _diags(path: Path) -> list[tuple[str, int, str]]:
    loaded = check_file(str(path))
    return [(d.code, d.range.start.line, d.message) for d in loaded.diagnostics if d.is_error]


@pytest.mark.parametrize(("text", "code"), [
    ("offload: yes please", "HP104"),
    ("offload: {host_link_gb_s: -3}", "HP110"),
    ("offload: {host_link_gb_s: fast}", "HP105"),
    ("offload: {bandwidth: 25}", "HP101"),
])
def test_bad_offload_values_are_positioned(tmp_path: Path, text: str, code: str) -> None:
    path = _search_config(tmp_path, offload=text)
    got = _diags(path)
    assert [c for c, _, _ in got] == [code]
    assert got[0][1] == _offload_line(path)


def test_offload_without_per_layer_is_refused_at_offload(tmp_path: Path) -> None:
    path = _search_config(tmp_path, recompute="auto")
    got = _diags(path)
    assert got == [("HP431", _offload_line(path), "offload is priced in a choice of a recompute mode per layer: give the search "
                    "config recompute: per_layer (it is auto)")]
    cfg = check_file(str(_search_config(tmp_path, recompute="auto"))).config
    assert cfg is not None and cfg.offload_gb_s == 0.0


def test_a_device_with_no_host_link_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from engine.catalog import devices

    h100 = find_device("H100")
    assert h100 is not None and h100.host_link_gb_s == pytest.approx(63.0)  # PCIe Gen5 x16, one direction
    monkeypatch.setitem(devices._BY_NAME, "h100", replace(h100, host_link_gb_s=0.0))
    got = _diags(_search_config(tmp_path))
    assert [c for c, _, _ in got] == ["HP431"] and "states no host link" in got[0][2]
    # a stated link needs none from the device
    cfg = check_file(str(_search_config(tmp_path, offload="offload: {host_link_gb_s: 25}"))).config
    assert cfg is not None and cfg.offload_gb_s == 25.0


def test_every_catalog_device_states_a_host_link() -> None:
    from engine.catalog.devices import DEVICES

    for d in DEVICES:
        assert d.host_link_gb_s > 0, d.name
    a3 = find_device("A3")
    assert a3 is not None and a3.host_link_gb_s == pytest.approx(6.92 * 2**30 / 1e9)  # [HW] §2, measured
