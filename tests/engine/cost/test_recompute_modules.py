"""Recompute by module (D-010) (Megatron/MindSpeed --recompute-modules) priced in memory and time, read from the
files with positioned diagnostics, written back as the framework's flags; FP8 inputs saved as TransformerEngine
saves them; the DeepSeek-V3 recipe that recomputes only the MLA up-projections (and the dense MLPs) fits."""

from __future__ import annotations

import contextlib
import io
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from engine.check import check_file
from engine.cli import main as hp_plan
from engine.cost import constants as K
from engine.cost import price_table
from engine.cost.model import attn_shape
from engine.cost.table import CandidateTable
from engine.explain.export import export
from engine.specs import GIB, RecomputePlan, RunOptions, Strategy
from tests.engine.cost.shapes import DSV3, LLAMA70B, cluster
from tests.support.configs import AUTO_SEARCH, AUTO_TRAIN, dsv3_model

MEGA = RunOptions(framework="megatron")
S = Strategy(dp=8, tp=8, pp=1, micro_batch_size=1, sequence_parallel=True, recompute=RecomputePlan("selective"))


def _layer_gib(m: Any, run: RunOptions, s: Strategy = S) -> np.ndarray:
    pr = price_table(m, cluster(8, "H100"), run, CandidateTable.from_strategies([s]), 1e6)
    return np.asarray(pr.layer_act_one_gib[0])  # (2, 3) one layer, one micro-batch


def test_each_module_drops_what_it_keeps() -> None:
    m = DSV3
    a = attn_shape(m)
    T, t = float(m.seq_len), 8.0
    off = _layer_gib(m, MEGA, replace(S, recompute=RecomputePlan("off")))
    up = _layer_gib(m, replace(MEGA, recompute_modules=("mla_up_proj",)))
    # mla_up_proj: the up-projected Q, K, V (bf16, tp-split) of every layer
    drop = K.ACT_BYTES * (a.q_width + a.kv_width) * T / t / GIB
    assert off[:, 0] - up[:, 1] == pytest.approx([drop, drop], rel=1e-9)
    ln = _layer_gib(m, replace(MEGA, recompute_modules=("layernorm",)))
    assert off[0, 0] - ln[0, 1] == pytest.approx(2 * K.ACT_BYTES * m.hidden * T / t / GIB, rel=1e-9)  # SP: ÷ t
    mlp = _layer_gib(m, replace(MEGA, recompute_modules=("mlp",)))
    assert mlp[0, 1] < off[0, 0] and mlp[1, 1] == pytest.approx(off[1, 0])  # dense layers only
    moe = _layer_gib(m, replace(MEGA, recompute_modules=("moe",)))
    act = _layer_gib(m, replace(MEGA, recompute_modules=("moe_act",)))
    assert moe[0, 1] == pytest.approx(off[0, 0]) and moe[1, 1] < act[1, 1] < off[1, 0]  # MoE layers only
    # core_attn is Megatron's default selective ("attention"): with flash attention it drops the log-sum-exp
    core = _layer_gib(m, replace(MEGA, recompute_modules=("core_attn",)))
    assert off[1, 0] - core[1, 1] == pytest.approx(K.FLASH_LSE_BYTES * a.heads * T / t / GIB, rel=1e-9)


def test_recomputed_modules_cost_their_forward() -> None:
    s = replace(S, recompute=RecomputePlan("selective"))

    def extra(mods: tuple[str, ...]) -> np.ndarray:
        pr = price_table(DSV3, cluster(8, "H100"), replace(MEGA, recompute_modules=mods),
                         CandidateTable.from_strategies([s]), 1e6)
        return np.asarray(pr.layer_extra_time_s[0, :, 1])
    up, both, moe = extra(("mla_up_proj",)), extra(("mla_up_proj", "mlp")), extra(("moe",))
    assert (up > 0).all()
    assert both[0] > up[0] and both[1] == pytest.approx(up[1])  # mlp adds the dense layers' MLP forward only
    assert moe[1] > up[1] and moe[0] < up[0]  # a MoE layer's forward outweighs its up-projections


def test_fp8_inputs_saved_as_transformer_engine_saves_them() -> None:
    m = LLAMA70B
    s = replace(S, recompute=RecomputePlan("off"))
    bf16 = _layer_gib(m, MEGA, s)
    fp8 = _layer_gib(m, replace(MEGA, fp8=True), s)
    a = attn_shape(m)
    T, t = float(m.seq_len), 8.0
    # norm outputs (QKV and MLP inputs, ÷ t under SP), attention output, gated product: 1 byte instead of 2
    saved = (2 * m.hidden + a.out_width + m.ffn) * T / t / GIB
    assert bf16[0, 0] - fp8[0, 0] == pytest.approx(saved, rel=1e-9)
    titan = RunOptions(framework="torchtitan")
    assert (_layer_gib(m, replace(titan, fp8=True), s) == _layer_gib(m, titan, s)).all()  # torchao: not priced


# ------------------------------------------------------------------------------------------ the files
DSV3_RECIPE = """\
# Megatron-MoE-ModelZoo best_practice/DeepSeekV3/run.sh, H100: 1024 H100, PP 8 VPP 4 TP 2 EP 64, MBS 1, GBS 8192,
# seq 4096, FP8, distributed optimizer, bf16 Adam states, selective recompute of mla_up_proj and mlp, MTP 1.
""" + dsv3_model(64) + """\
cluster: {num_nodes: 128, cards_per_node: 8, device_type: H100}
parallelism: {dp: 64, tp: 2, pp: 8, cp: 1, ep: 64, etp: 1, vpp: 4, micro_batch_size: 1, micro_batch_num: 128,
              sequence_parallel: true}
constraint: {global_batch_size: 8192, memory_limit_gb: 80}
recompute: selective
MODULES
pp_config: {pipeline_schedule: interleaved, pp_interleave_num: 4}
estimator: {framework: FW, fp8: true, optimizer_state_dtype: bf16}
"""


def _estimate(tmp_path: Path, text: str, *flags: str) -> tuple[int, dict[str, Any]]:
    f = tmp_path / "search.yaml"
    f.write_text(text)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = hp_plan(["estimate", str(f), "--json", *flags])
    return rc, json.loads(buf.getvalue())


def test_deepseek_v3_recipe_recomputing_mla_up_proj_fits(tmp_path: Path) -> None:
    base = DSV3_RECIPE.replace("FW", "megatron")
    _, default = _estimate(tmp_path, base.replace("MODULES", ""))
    rc1, recipe = _estimate(tmp_path, base.replace("MODULES", "recompute_modules: [mla_up_proj, mlp]"))
    # The recipe's modules (what trained) fit, with the up-projections and dense MLPs' intermediates dropped:
    # 17.5 GiB below Megatron's default selective (core_attn only, 72.4 GiB since Megatron-Core 0.13 holds no
    # routed copy's output; 87.7 GiB before)
    assert recipe["fits"] is True and rc1 == 0, recipe["peak_memory_gib"]
    assert recipe["step_time_s"] > 0 and recipe["peak_memory_gib"] < default["peak_memory_gib"] - 10


def test_modules_read_from_the_train_yaml_and_diagnosed(tmp_path: Path) -> None:
    train = ("model: {name: deepseek-v3, pretrained_model_name_or_path: deepseek-ai/DeepSeek-V3}\n"
             "training: {global_batch_size: 64, micro_batch_size: 1}\n"
             "accelerator: {tp_size: 8, pp_size: 1, cp_size: 1, ep_size: 8}\n"
             "activation_checkpoint:\n  mode: selective\n  recompute_modules: MODS\n"
             "dataset: {data_transform: {max_seq_len: 4096}}\ncontext: {device_num: 64}\n")
    f = tmp_path / "train.yaml"
    f.write_text(train.replace("MODS", "[layernorm, mla_up_proj]"))
    cfg = check_file(str(f)).config
    assert cfg is not None and cfg.run.recompute_modules == ("layernorm", "mla_up_proj")
    f.write_text(train.replace("MODS", "[layernorm, mla_upproj, 3]"))
    bad = [d for d in check_file(str(f)).diagnostics if d.code == "HP106"]
    assert len(bad) == 2 and "did you mean 'mla_up_proj'" in bad[0].message
    assert bad[0].range.start.line == 5 and bad[0].range.start.character == len("  recompute_modules: [layernorm, ")


def test_a_framework_without_the_module_says_so(tmp_path: Path) -> None:
    text = DSV3_RECIPE.replace("MODULES", "recompute_modules: [mla_up_proj, shared_experts]")
    _, ms = _estimate(tmp_path, text.replace("FW", "mindspeed").replace("device_type: H100", "device_type: A3"))
    hp531 = [d["message"] for d in ms["diagnostics"] if d["code"] == "HP531"]
    assert hp531 == ["mindspeed offers no recompute module shared_experts; priced with mla_up_proj"]
    _, tt = _estimate(tmp_path, text.replace("FW", "megatron"), "--framework", "torchtitan")
    assert any(d["code"] == "HP531" and "no recompute by module" in d["message"] for d in tt["diagnostics"])


def test_export_writes_the_modules_and_state_dtypes() -> None:
    run = replace(MEGA, recompute_modules=("mla_up_proj", "mlp"), grad_bytes=2, optimizer_state_bytes=2)
    ex = export(S, DSV3, run, "megatron")
    args = " ".join(ex.args)
    assert "--recompute-granularity selective --recompute-modules mla_up_proj mlp" in args
    assert "--grad-reduce-in-bf16" in args and "--exp-avg-dtype bf16 --exp-avg-sq-dtype bf16" in args
    ms = export(S, DSV3, replace(run, recompute_modules=("shared_experts", "mlp")), "mindspeed")
    assert "--recompute-modules mlp" in " ".join(ms.args)
    assert [d.path for d in ms.diagnostics] == ["recompute_modules"]
    tt = export(S, DSV3, run, "torchtitan")
    assert 'mixed_precision_reduce = "bfloat16"' in tt.text
    assert any(d.path == "recompute_modules" for d in tt.diagnostics)


# ------------------------------------------------------------------------- the search chooses (auto)


def _files(tmp_path: Path, mods: str = "auto", fw: str = "megatron") -> Path:
    (tmp_path / "train.yaml").write_text(AUTO_TRAIN)
    f = tmp_path / "search.yaml"
    f.write_text(AUTO_SEARCH.replace("MODS", mods).replace("FW", fw))
    return f


def _cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = hp_plan(list(args))
    return rc, out.getvalue(), err.getvalue()


def test_candidate_lists_follow_the_model_and_the_framework(tmp_path: Path) -> None:
    from engine.search.modules import candidate_lists

    cfg = check_file(str(_files(tmp_path))).config
    assert cfg is not None and cfg.run.recompute_modules == ("auto",)
    lists = candidate_lists(cfg)
    assert lists[0] == ("core_attn",) and lists[1] == ("layernorm",) and len(lists) == 8
    assert lists[-1] == ("core_attn", "moe_act", "layernorm", "mla_up_proj", "mlp", "moe", "shared_experts")
    dense = replace(cfg, model=LLAMA70B)
    assert candidate_lists(dense) == [("core_attn",), ("layernorm",), ("core_attn", "layernorm"),
                                      ("core_attn", "layernorm", "mlp")]


def test_search_chooses_the_modules_and_apply_writes_them(tmp_path: Path) -> None:
    f = _files(tmp_path)
    rc, out, _ = _cli("search", str(f), "--json")
    best = json.loads(out)["best"]
    assert rc == 0 and best["recompute_modules"] and best["fits"]
    (tmp_path / "stated").mkdir()
    rc, out, _ = _cli("search", str(_files(tmp_path / "stated", "[core_attn]")), "--json")
    default = json.loads(out)["best"]
    assert "recompute_modules" not in default  # stated, not chosen
    assert best["step_time_s"] < default["step_time_s"]  # a lighter list lets a faster plan fit
    rc, diff, err = _cli("apply", str(f), "--dry-run")
    assert rc == 0, err
    assert f"+  recompute_modules: [{', '.join(best['recompute_modules'])}]" in diff
    rc, text, _ = _cli("export", str(f), "--to", "megatron", "--best")
    assert f"--recompute-modules {' '.join(best['recompute_modules'])}" in text


def test_auto_where_the_framework_has_no_modules(tmp_path: Path) -> None:
    _, doc = _estimate(tmp_path, DSV3_RECIPE.replace("MODULES", "recompute_modules: auto").replace("FW", "megatron"),
                       "--framework", "torchtitan")
    assert any(d["code"] == "HP531" and "no recompute by module" in d["message"] for d in doc["diagnostics"])
    f = _files(tmp_path, fw="torchtitan")
    _, out, _ = _cli("search", str(f), "--json")
    best = json.loads(out)["best"]
    assert best is None or "recompute_modules" not in best
