"""`offload` end to end through `hp-plan` ([HP] §8.6): where offload wins (Llama-3.1-8B at 32k tokens on 8 H100s,
memory-tight), where it does not (no memory pressure; a host link too slow to hide the copies), the refusal, and
`hp-plan apply` writing the fastest plan the trainer runs (no offload: no trainer key states it), which reads back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import hp_plan

TRAIN = """\
model:
  name: llama3-8b
  pretrained_model_name_or_path: meta-llama/Llama-3.1-8B
  torch_dtype: bfloat16
training:
  global_batch_size: 64
  micro_batch_size: 1
accelerator:
  tp_size: 1
  pp_size: 4
  cp_size: 1
dataset:
  data_transform:
    max_seq_len: 32768
"""

SEARCH = """\
train_yaml: ./train.yaml
cluster: {{num_nodes: 1, cards_per_node: 8, device_type: H100}}
parallelism: {{tp: [1, 2, 4, 8], pp: auto, cp: 1, ep: 1, vpp: 1, micro_batch_size: 1}}
constraint: {{global_batch_size: 64, memory_limit_gb: {memory}}}
recompute: {recompute}
{offload}
"""


def _folder(tmp_path: Path, *, offload: str = "offload: true", memory: int = 76, recompute: str = "per_layer",
            seq: int = 32768) -> Path:
    (tmp_path / "train.yaml").write_text(TRAIN.replace("32768", str(seq)))
    path = tmp_path / "search.yaml"
    path.write_text(SEARCH.format(offload=offload, memory=memory, recompute=recompute))
    return path


def _best(path: Path) -> dict:
    r = hp_plan("search", str(path), "--json", "--top", "3")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["best"]


@pytest.fixture(scope="module")
def tight(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, dict]:
    """(the best with offload, the best without) under a 76 GiB budget at 32k tokens."""
    on = _best(_folder(tmp_path_factory.mktemp("on")))
    off = _best(_folder(tmp_path_factory.mktemp("off"), offload="offload: false"))
    return on, off


def test_offload_wins_where_memory_is_tight(tight: tuple[dict, dict]) -> None:
    on, off = tight
    layers = on["strategy"]["recompute"]["layers"]
    offloaded = [k for k, v in layers.items() if v == "offload"]
    assert offloaded and offloaded[0].startswith("0")  # a stage's first layers
    assert set(on["offloaded_gib"]) == set(offloaded) and all(v > 0 for v in on["offloaded_gib"].values())
    assert 0.0 < on["offloaded_share"] < 1.0
    assert on["fits"] and on["peak_memory_gib"] <= 76.0
    # faster than the best plan without offload (measured: 68.4 s -> 58.5 s a step)
    assert on["step_time_s"] < 0.95 * off["step_time_s"]
    assert "offloaded_gib" not in off and "offload" not in json.dumps(off["strategy"])


def test_offload_lets_candidates_fit_that_no_recompute_mode_fits(tmp_path: Path) -> None:
    """At 73 GiB full recompute on every layer leaves some candidates over the budget; offload (which holds less
    than full recompute: one layer in transit) fits more (measured: 11 fit with offload, 9 without)."""
    def run(offload: str, sub: str) -> dict:
        (tmp_path / sub).mkdir()
        r = hp_plan("search", str(_folder(tmp_path / sub, memory=73, offload=offload)), "--json")
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    on, off = run("offload: true", "on"), run("offload: false", "off")
    assert on["evaluated"] == off["evaluated"]
    assert on["feasible"] > off["feasible"]
    assert on["best"]["step_time_s"] < off["best"]["step_time_s"] and on["best"]["peak_memory_gib"] <= 73.0


def test_the_text_says_the_plan(tmp_path: Path) -> None:
    r = hp_plan("search", str(_folder(tmp_path)))
    assert r.returncode == 0, r.stderr
    assert "Offloaded to the host, priced as offload should run: layers 0-" in r.stdout
    assert "The trainer has no key for this offload, so apply writes the fastest plan without it" in r.stdout


def test_no_offload_without_memory_pressure(tmp_path: Path) -> None:
    """At 4k tokens recompute off fits: offload is never chosen (it is chosen only if faster)."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    on = _best(_folder(tmp_path / "a", seq=4096))
    off = _best(_folder(tmp_path / "b", seq=4096, offload="offload: false"))
    assert on["strategy"]["recompute"] == "off"
    assert on["strategy"] == off["strategy"] and on["step_time_s"] == off["step_time_s"]
    assert "offloaded_gib" not in on


def test_no_offload_over_a_link_too_slow_to_hide_the_copies(tmp_path: Path, tight: tuple[dict, dict]) -> None:
    """At 0.5 GB/s a layer's 2 GiB copy takes seconds, longer than the forward it would hide behind."""
    slow = _best(_folder(tmp_path, offload="offload: {host_link_gb_s: 0.5}"))
    assert "offloaded_gib" not in slow
    assert slow["step_time_s"] == tight[1]["step_time_s"]


def test_refused_without_a_per_layer_choice(tmp_path: Path) -> None:
    r = hp_plan("check", str(_folder(tmp_path, recompute="auto")))
    assert r.returncode == 1
    assert "HP431" in r.stdout + r.stderr
    assert "give the search config recompute: per_layer" in r.stdout + r.stderr


def test_apply_writes_the_fastest_plan_the_trainer_runs(tmp_path: Path, tight: tuple[dict, dict]) -> None:
    """The best plan offloads layers no trainer key can state ([HP] §8.6, Corrections 4): written with them `off`
    it would need their activations on the device, over the budget (the write-path probe: 78.9 GiB over 60). apply
    writes the fastest plan without offload instead (engine.search.written), says why, and the file reads back as
    that plan, within the budget."""
    path = _folder(tmp_path)
    r = hp_plan("apply", str(path), "--in-place", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert any("offloads layers" in n and "written instead" in n for n in doc["notes"]), doc["notes"]
    on, off = tight
    assert doc["best"]["strategy"] == off["strategy"] and "offloaded_gib" not in doc["best"]
    assert doc["best"]["step_time_s"] > on["step_time_s"]  # the offloaded plan stays the faster one, said not written
    est = hp_plan("estimate", str(tmp_path / "train.yaml"), "--json", "--devices", "8", "--device-type", "H100",
                  "--memory-gb", "76")
    assert est.returncode == 0, est.stdout + est.stderr
    priced = json.loads(est.stdout)
    assert priced["fits"] and "offload" not in json.dumps(priced["strategy"]["recompute"])
    assert priced["step_time_s"] == pytest.approx(off["step_time_s"], rel=1e-6)


def test_export_says_the_offload_it_cannot_write(tmp_path: Path) -> None:
    r = hp_plan("export", str(_folder(tmp_path)), "--best", "--to", "megatron")
    assert r.returncode == 0, r.stderr
    assert "HP753: recompute.offload: megatron cannot offload these" in r.stdout + r.stderr
    assert "offload" not in r.stdout.split("# megatron", 1)[-1]  # no flag claims it
