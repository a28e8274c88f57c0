"""The low-MFU warning (D-014): a best plan below 10 % MFU is called out with the term that dominates it, and a what-if
device memory capped by the file's memory_limit_gb is named."""

from __future__ import annotations

from pathlib import Path

from tests.support.cli import ROOT, hp_plan
from tests.support.configs import llama8b_model

SLOW = llama8b_model(seq_len=2048) + """\
cluster: {num_nodes: 64, cards_per_node: 8, device_type: H100, inter_node_bandwidth_gb_s: 1}
parallelism: {dp: auto, fsdp: auto, tp: auto, pp: auto, cp: 1, ep: 1, vpp: auto, micro_batch_size: auto,
              micro_batch_num: auto}
constraint: {global_batch_size: 512, memory_limit_gb: 76}
recompute: auto
"""


def test_communication_bound_best_plan_warns_with_the_term(tmp_path: Path) -> None:
    f = tmp_path / "search.yaml"
    f.write_text(SLOW)
    out = hp_plan("search", str(f), "--top", "1").stdout
    line = next(x for x in out.splitlines() if "HP620" in x)
    assert "warning HP620" in line and "communication-bound" in line and "dp_comm" in line
    mfu = float(line.split("MFU ", 1)[1].split("%", 1)[0])
    assert mfu < 10.0


def test_a_healthy_plan_gets_no_mfu_warning(tmp_path: Path) -> None:
    f = tmp_path / "search.yaml"
    f.write_text(SLOW.replace(", inter_node_bandwidth_gb_s: 1", ""))
    assert "HP620" not in hp_plan("search", str(f), "--top", "1").stdout


def test_what_if_memory_capped_by_the_file_names_memory_limit_gb() -> None:
    ex = ROOT / "examples" / "llama3-70b" / "search.yaml"
    out = hp_plan("check", str(ex), "--device-type", "H200", "--memory-gb", "140").stdout
    line = next(x for x in out.splitlines() if "HP430" in x)
    assert "memory_limit_gb" in line and "76" in line and "140" in line and "search.yaml:25:" in line
    assert "HP430" not in hp_plan("check", str(ex)).stdout  # no what-if: the file's 76 of 80 is the plan
