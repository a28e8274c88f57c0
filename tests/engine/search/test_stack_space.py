"""Plans each stack can run, exports that launch: scenarios shaped like a distributed-training review's
findings, each through `hp-plan search --json` and `hp-plan export` (engine.catalog.frameworks.StackSpace,
engine.cost.fp8, engine.search.distinct, engine.explain.export, engine/catalog/data)."""

from __future__ import annotations

import io
import json
import shlex
import tomllib
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from engine.catalog.flags import accepted_flags, flags_source
from engine.catalog.frameworks import FRAMEWORKS
from engine.check import check_file
from engine.cli import build_parser
from engine.cli.export import run as run_export
from engine.cli.search import run as run_search
from engine.config.types import ClusterOverrides
from engine.edit.strategy import strategy_edits
from engine.explain.export import export, read_torchtitan
from engine.search import compare_stated, search
from engine.search.stated import stated_run, stated_source
from engine.specs import ModelSpec, RecomputePlan, RunOptions, Strategy
from tests.support.cli import estimate_in_process

TRAIN_70B = """\
model:
  name: llama3-70b
  pretrained_model_name_or_path: meta-llama/Llama-3.1-70B
training: {{global_batch_size: {gbs}, micro_batch_size: 1}}
{extra}dataset: {{data_transform: {{max_seq_len: {seq}}}}}
"""
SEARCH = """\
train_yaml: ./train.yaml
cluster: {{num_nodes: {nodes}, cards_per_node: {cards}, device_type: {device}, device_memory_gb: {mem}}}
parallelism: {{dp: auto, fsdp: auto, tp: auto, pp: auto, cp: auto, ep: 1, vpp: auto, micro_batch_size: auto,
              micro_batch_num: auto, sequence_parallel: auto}}
constraint: {{global_batch_size: {gbs}, memory_limit_gb: {budget}}}
recompute: auto
estimator: {{framework: {framework}{est}}}
"""


def _folder(tmp_path: Path, *, framework: str = "megatron", device: str = "H100", nodes: int = 8, cards: int = 8,
            mem: int = 80, budget: int = 76, gbs: int = 256, seq: int = 8192, extra: str = "", est: str = "") -> Path:
    (tmp_path / "train.yaml").write_text(TRAIN_70B.format(gbs=gbs, seq=seq, extra=extra))
    path = tmp_path / "search.yaml"
    path.write_text(SEARCH.format(nodes=nodes, cards=cards, device=device, mem=mem, budget=budget, gbs=gbs,
                                  framework=framework, est=est))
    return path


def _cli(run: Any, command: str, argv: list[str]) -> tuple[int, dict[str, Any]]:
    args = build_parser().parse_args([command, *argv])
    out = io.StringIO()
    code = run(args, stdout=out, stderr=io.StringIO())
    return code, json.loads(out.getvalue())


def _search(path: Path, top: int = 5) -> dict[str, Any]:
    code, doc = _cli(run_search, "search", [str(path), "--json", "--top", str(top)])
    assert code == 0, doc["diagnostics"]
    return doc


def _export(path: Path, target: str) -> dict[str, Any]:
    code, doc = _cli(run_export, "export", [str(path), "--to", target, "--best", "--json"])
    assert code == 0, doc["diagnostics"]
    return doc


def _flags(doc: dict[str, Any]) -> list[str]:
    return [a for a in doc["args"] if a.startswith("--")]


@pytest.fixture(scope="module")
def megatron_70b(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    path = _folder(tmp_path_factory.mktemp("m70"))
    return path, _search(path)


def test_megatron_never_gets_fsdp_with_pp_or_over_part_of_dp(megatron_70b: tuple[Path, dict[str, Any]]) -> None:
    path, doc = megatron_70b
    for e in doc["top"]:
        s = e["strategy"]
        assert s["dp_shard"] in (1, s["dp"] * s["cp"]) and (s["dp_shard"] == 1 or s["pp"] == 1)
    refused = doc["refused"]
    assert refused["FSDP over part of dp·cp (the stack shards over the whole data-parallel group)"] > 0
    assert refused["FSDP with pipeline parallelism (the stack's FSDP does not pipeline)"] > 0
    exported = _export(path, "megatron")
    assert not [d for d in exported["diagnostics"] if d["path"] == "dp_shard"]


def test_the_distributed_optimizer_is_searched_and_on(megatron_70b: tuple[Path, dict[str, Any]]) -> None:
    path, doc = megatron_70b
    for e in doc["top"]:
        s = e["strategy"]
        assert s["optimizer_shard"] == s["dp"] * s["cp"]
    args = _export(path, "megatron")["args"]
    assert "--use-distributed-optimizer" in args or "--use-megatron-fsdp" in args


def test_a_stated_shard_that_does_not_divide_refuses_nothing(tmp_path: Path) -> None:
    path = _folder(tmp_path, extra="accelerator: {optimizer_weight_shard_size: 3}\n")
    doc = _search(path)
    assert doc["best"] is not None and "optimizer shard does not divide dp·cp" not in doc["refused"]
    assert {e["strategy"]["optimizer_shard"] for e in doc["top"]} <= {e["strategy"]["dp"] * e["strategy"]["cp"]
                                                                     for e in doc["top"]} | {3}


def test_nemo_64k_recipe_is_priced_as_nemo_runs_it(tmp_path: Path) -> None:
    """TP 8 · PP 4 · VPP 5 · CP 8 with SP, as NeMo's 64K Llama 3 70B recipe states it: no FSDP (not HyperParallel's
    default ZeRO-3 over dp·cp) and the distributed optimizer over dp·cp (not replicated optimizer states)."""
    extra = ("accelerator: {tp_size: 8, pp_size: 4, cp_size: 8, sequence_parallel: true, pp_interleave_num: 5,\n"
             "              pipeline_scheduler: interleaved_1f1b}\n")
    path = _folder(tmp_path, nodes=32, gbs=32, seq=65536, extra=extra)
    cfg = check_file(str(path)).config
    assert cfg is not None
    source = stated_source(cfg)
    assert source is not None
    run, s = stated_run(cfg, source)
    assert s.dp_shard == 1 and s.optimizer_shard == s.dp * s.cp == 8
    stated = compare_stated(cfg, search(cfg, top=3)).estimate
    assert stated is not None and stated.fits
    replicated = check_file(str(path)).config
    from engine.cost import estimate

    assert replicated is not None and replicated.model is not None and replicated.cluster is not None
    heavier = estimate(replicated.model, replicated.cluster, run, Strategy(**{**_fields(s), "optimizer_shard": 1}),
                       76.0)
    assert heavier.peak_memory_gib > stated.peak_memory_gib + 10


def test_mindspeed_without_fsdp_config_is_not_zero3(tmp_path: Path) -> None:
    extra = "accelerator: {tp_size: 8, pp_size: 2}\n"
    path = _folder(tmp_path, framework="mindspeed", device="A2", mem=64, budget=60, extra=extra)
    cfg = check_file(str(path)).config
    assert cfg is not None
    source = stated_source(cfg)
    assert source is not None
    _, s = stated_run(cfg, source)
    assert s.dp_shard == 1 and s.optimizer_shard == s.dp * s.cp


def test_sequence_parallelism_with_context_parallelism_on_megatron(tmp_path: Path) -> None:
    path = _folder(tmp_path, nodes=16, gbs=64, seq=65536, est=", fp8: false")
    path.write_text(path.read_text() + "tp_comm_overlap: true\n")
    doc = _search(path)
    tops = [e["strategy"] for e in doc["top"]]
    assert all(s["sequence_parallel"] for s in tops if s["tp"] > 1)
    assert any(s["tp"] > 1 and s["cp"] > 1 for s in tops)
    assert "sequence parallelism with cp > 1 (HyperParallel's checker refuses it)" not in doc["refused"]
    args = _export(path, "megatron")["args"]
    tp = int(args[args.index("--tensor-model-parallel-size") + 1])
    assert ("--sequence-parallel" in args) == (tp > 1)
    assert "--tp-comm-overlap" not in args or "--sequence-parallel" in args
    (tmp_path / "hp").mkdir()
    hp = _search(_folder(tmp_path / "hp", framework="hyperparallel", nodes=16, gbs=64, seq=65536))
    assert hp["refused"].get("sequence parallelism with cp > 1 (HyperParallel's checker refuses it)", 0) > 0


def test_fp8_mfu_below_one_and_caches_sharded(tmp_path: Path) -> None:
    path = _folder(tmp_path, device="GB200", nodes=2, cards=72, mem=186, budget=176, gbs=288, est=", fp8: true")
    doc = _search(path)
    assert doc["top"] and all(0 < e["mfu"] < 1 for e in doc["top"])
    cfg = check_file(str(path)).config
    assert cfg is not None and cfg.model is not None and cfg.cluster is not None
    from engine.cost import estimate

    s = Strategy(dp=144, dp_shard=144, tp=1, micro_batch_size=1, micro_batch_num=2, recompute=RecomputePlan("full"),
                 optimizer_shard=144)
    fp8 = estimate(cfg.model, cfg.cluster, cfg.run, s, 176.0).memory_breakdown_gib["parameters"]
    bf16 = estimate(cfg.model, cfg.cluster, RunOptions(**{**_fields(cfg.run), "fp8": False}), s,
                    176.0).memory_breakdown_gib["parameters"]
    # a 70B model's 2-byte FP8 weight and transpose copies, sharded over 144 ranks: under 1 GiB more
    assert 0 < fp8 - bf16 < 1.0
    exported = _export(path, "megatron")["args"]
    assert exported[exported.index("--fp8-recipe") + 1] == "delayed"


def test_mxfp8_needs_blackwell(tmp_path: Path) -> None:
    path = _folder(tmp_path, est=", fp8: true, fp8_recipe: mxfp8")
    _, doc = _cli(run_export, "export", [str(path), "--to", "megatron", "--best", "--json"])
    assert "--fp8-recipe" not in doc["args"]
    assert any(d["code"] == "HP753" and "fp8" in d["message"].lower() for d in doc["diagnostics"])


def test_megatron_on_ascend_is_flagged(tmp_path: Path) -> None:
    path = _folder(tmp_path, device="A3", mem=64, budget=60)
    doc = _search(path)
    assert any(d["code"] == "HP534" and "mindspeed" in d["message"] for d in doc["diagnostics"])
    ok = _search(_folder(tmp_path, framework="mindspeed", device="A3", mem=64, budget=60))
    assert not any(d["code"] == "HP534" for d in ok["diagnostics"])


def test_top_five_are_distinct_shapes(tmp_path: Path) -> None:
    path = _folder(tmp_path, framework="hyperparallel", device="GB200", nodes=2, cards=72, mem=186, budget=176,
                   gbs=288, est=", fp8: true")
    doc = _search(path)
    shapes = {(s["tp"], s["pp"], s["vpp"], s["cp"], s["ep"], s["micro_batch_size"], json.dumps(s["recompute"]))
              for s in (e["strategy"] for e in doc["top"])}
    assert len(shapes) == len(doc["top"]) >= 3
    assert len(doc["variants"]) == len(doc["top"]) and any("dp_shard" in v for v in doc["variants"])


def test_every_exported_flag_is_one_the_stack_accepts(megatron_70b: tuple[Path, dict[str, Any]]) -> None:
    """A grid of plans and run options through export: every flag is in the stack's flag list, read from its
    argument definitions at the commit the list names."""
    assert "core_v0.19.0" in flags_source("megatron") and "MindSpeed" in flags_source("mindspeed")
    moe = ModelSpec(name="moe", num_layers=8, hidden=1024, heads=16, vocab=32000, num_experts=8, experts_per_tok=2,
                    moe_ffn=512, num_shared_experts=1)
    dense = ModelSpec(name="dense", num_layers=8, hidden=1024, heads=16, vocab=32000)
    plans = [Strategy(dp=4, dp_shard=4, tp=2, sequence_parallel=True, recompute=RecomputePlan("full")),
             Strategy(dp=4, tp=2, pp=2, vpp=2, pipeline_schedule="interleaved", micro_batch_num=4, cp=2,
                      optimizer_shard=2, recompute=RecomputePlan("selective")),
             Strategy(dp=8, ep=4, optimizer_shard=8, recompute=RecomputePlan("off", offload=((0, 1),)))]
    runs = [RunOptions(fp8=True, fp8_recipe="tensorwise", moe_dispatcher="deepep", tp_comm_overlap=True,
                       moe_a2a_overlap=True, moe_shared_expert_overlap=True, grad_bytes=2, optimizer_state_bytes=2,
                       recompute_modules=("core_attn", "mlp")),
            RunOptions(cp_algo="hybrid", gradient_accumulation_fusion=False)]
    for target in ("megatron", "mindspeed"):
        accepted = accepted_flags(target)
        for model in (dense, moe):
            for s in plans:
                for run in runs:
                    got = export(s, model, RunOptions(**{**_fields(run), "framework": target}), target)
                    unknown = [a for a in got.args if a.startswith("--") and a not in accepted]
                    assert unknown == [], (target, s.short(), unknown)
    path, _ = megatron_70b
    for target in ("megatron", "mindspeed"):
        doc = _export(path, target)
        flags = doc["text"].split("\n\n")[0]
        argv = [a for line in flags.splitlines() if not line.startswith("#") for a in shlex.split(line.rstrip("\\"))]
        assert argv == doc["args"] and set(_flags(doc)) <= accepted_flags(target)


def test_mindspeed_fsdp2_route_has_its_config_and_no_recompute_flags() -> None:
    dense = ModelSpec(name="dense", num_layers=8, hidden=1024, heads=16, vocab=32000)
    s = Strategy(dp=8, dp_shard=8, micro_batch_num=2, recompute=RecomputePlan("full"))
    got = export(s, dense, RunOptions(framework="mindspeed"), "mindspeed")
    assert "--use-torch-fsdp2" in got.args and "--fsdp2-config-path" in got.args
    assert "--use-distributed-optimizer" not in got.args
    assert not [a for a in got.args if a.startswith("--recompute-")]
    assert "sharding_size: 8" in got.text and "recompute_modules:" in got.text
    assert not got.diagnostics
    selective = export(replace(s, recompute=RecomputePlan("selective")), dense, RunOptions(framework="mindspeed"),
                       "mindspeed")
    assert [w.path for w in selective.diagnostics] == ["recompute.mode"]  # the route checkpoints whole layers


def test_apply_keeps_the_expert_shard_consistent() -> None:
    text = ("model: {name: moe}\naccelerator: {tp_size: 1, pp_size: 1, ep_size: 8}\n"
            "fsdp_config: {dp_shard_size: 64, edp_shard_size: 8}\ntraining: {global_batch_size: 64}\n")
    s = Strategy(dp=64, dp_shard=32, ep=4, micro_batch_num=1)
    out = strategy_edits(text, s)
    assert out.error is None, out.error
    assert "edp_shard_size: 16" in out.new_text and "ep_size: 4" in out.new_text


def _fields(x: Any) -> dict[str, Any]:
    return {f: getattr(x, f) for f in x.__dataclass_fields__}


ROOT = Path(__file__).resolve().parents[3]
PRICED_FILES = sorted([*ROOT.glob("examples/**/*.yaml"), *(ROOT / "tests" / "corpus").glob("*.yaml")])


@pytest.mark.parametrize("path", PRICED_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_mfu_below_one_on_every_priced_plan(path: Path) -> None:
    """MFU is the model's FLOPs over the dense BF16 peak (engine.results.MFU_CONVENTION): below 1 on every plan the
    examples and the test corpus price, stated or searched, FP8 or not."""
    from engine.cost import estimate_config

    cfg = check_file(str(path)).config
    if cfg is None or cfg.model is None or cfg.cluster is None:
        return
    est, _ = estimate_config(cfg) if cfg.stated is not None else (None, ())
    priced = [est] if est is not None else []
    if cfg.global_batch_size:
        priced += list(search(cfg, top=5).top)
    fp8 = RunOptions(**{**_fields(cfg.run), "fp8": True})
    if est is not None and cfg.cluster.device.fp8_tflops > 0:
        from engine.cost import estimate

        priced.append(estimate(cfg.model, cfg.cluster, fp8, est.strategy, est.budget_gib))
    assert all(0 <= e.mfu < 1 and 0 <= e.causal_mfu < 1 for e in priced), [(e.strategy.short(), e.mfu) for e in priced]


def test_recompute_modules_auto_leaves_the_stated_plan_its_own_modules(tmp_path: Path) -> None:
    """`recompute_modules: auto` lets the search choose modules; the stated plan is priced with its train.yaml's."""
    extra = ("accelerator: {tp_size: 8, pp_size: 2}\n"
             "activation_checkpoint: {mode: selective, recompute_modules: [core_attn, mlp]}\n")
    path = _folder(tmp_path, extra=extra)
    path.write_text(path.read_text().replace("recompute: auto", "recompute: auto\nrecompute_modules: auto"))
    cfg = check_file(str(path)).config
    assert cfg is not None and cfg.run.recompute_modules == ("auto",)
    source = stated_source(cfg)
    assert source is not None
    run, s = stated_run(cfg, source)
    assert run.recompute_modules == ("core_attn", "mlp")
    stated = compare_stated(cfg, search(cfg, top=3)).estimate
    from engine.cost import estimate

    assert cfg.model is not None and cfg.cluster is not None and stated is not None
    assert stated.to_json() == estimate(cfg.model, cfg.cluster, run, s, stated.budget_gib).to_json()


def test_torchtitan_before_gradient_accumulation_runs_one_micro_batch_without_pp(tmp_path: Path) -> None:
    """torchtitan accumulated no gradients before TT-GRADACC (v0.1.0): a step was one local batch, split only by a
    pipeline. A search at such a release offers no plan without pp and with several micro-batches (a counted
    refusal); a stated one gets HP530 with the one-micro-batch fix; the current release runs both."""
    old = _folder(tmp_path, framework="torchtitan", gbs=512, est=", framework_version: '9dec370'")
    code, doc = _cli(run_search, "search", [str(old), "--json", "--top", "10"])
    assert code == 0 and doc["top"], doc.get("diagnostics")
    assert all(e["strategy"]["pp"] > 1 or e["strategy"]["micro_batch_num"] == 1 for e in doc["top"])
    assert any("accumulates no gradients" in reason for reason in doc["refused"])
    stated = tmp_path / "stated.yaml"
    stated.write_text(old.read_text().replace(
        "parallelism: {dp: auto, fsdp: auto, tp: auto, pp: auto, cp: auto, ep: 1, vpp: auto, micro_batch_size: auto,\n"
        "              micro_batch_num: auto, sequence_parallel: auto}",
        "parallelism: {dp: 32, fsdp: 32, tp: 2, pp: 1, cp: 1, ep: 1, vpp: 1, micro_batch_size: 2,\n"
        "              sequence_parallel: true}"))
    loaded = check_file(str(stated))
    assert loaded.config is not None and loaded.config.stated is not None
    from engine.cost.strategy_rules import estimate_config

    _est, diags = estimate_config(loaded.config)
    hp530 = [d for d in diags if d.code == "HP530" and "accumulates no gradients" in d.message]
    assert hp530 and hp530[0].data["nearest_valid"] == 16  # 512 / dp 32: one micro-batch of the whole local batch
    now = stated.read_text().replace("framework_version: '9dec370'", "framework_version: '0.1'")
    stated.write_text(now)
    loaded = check_file(str(stated))
    assert loaded.config is not None
    assert not [d for d in estimate_config(loaded.config)[1] if "accumulates no gradients" in d.message]


def _stated_torchtitan(tmp_path: Path, *, pp: int, vpp: int, mbs: int) -> Path:
    """The 70B on 64 H100 under torchtitan (512 sequences), every degree stated: dp 64/pp over FSDP, tp 1."""
    path = _folder(tmp_path, framework="torchtitan", gbs=512)
    dp = 64 // pp
    schedule = "\npp_config: {pipeline_schedule: interleaved}" if vpp > 1 else ""
    path.write_text(path.read_text().replace(
        "parallelism: {dp: auto, fsdp: auto, tp: auto, pp: auto, cp: auto, ep: 1, vpp: auto, micro_batch_size: auto,\n"
        "              micro_batch_num: auto, sequence_parallel: auto}",
        f"parallelism: {{dp: {dp}, fsdp: {dp}, tp: 1, pp: {pp}, cp: 1, ep: 1, vpp: {vpp}, micro_batch_size: {mbs},\n"
        f"              sequence_parallel: false}}{schedule}"))
    return path


@pytest.mark.parametrize(("pp", "mbs", "local"), [(1, 2, 2), (4, 2, 32)])
def test_torchtitan_export_accumulates_as_the_plan_does(tmp_path: Path, pp: int, mbs: int, local: int) -> None:
    """torchtitan runs global / (local_batch_size · dp) accumulation steps ([TT-GRADACC]) and splits a local batch
    into micro-batches only under a pipeline: without pp the local batch is one micro-batch of the plan, with pp
    it holds all the schedule's. The TOML's steps × micro-batches per step give the plan's micro-batches."""
    path = _stated_torchtitan(tmp_path, pp=pp, vpp=1, mbs=mbs)
    dp = 64 // pp
    _code, doc = _cli(run_export, "export", [str(path), "--to", "torchtitan", "--json"])  # fits or not
    toml = tomllib.loads(doc["text"])
    tr, par = toml["training"], toml["parallelism"]
    assert tr["local_batch_size"] == local and tr["global_batch_size"] == 512
    steps = tr["global_batch_size"] // (tr["local_batch_size"] * par["data_parallel_shard_degree"]
                                        * par["data_parallel_replicate_degree"])
    per_step = tr["local_batch_size"] // par["pipeline_parallel_microbatch_size"] if pp > 1 else 1
    assert steps * per_step == 512 // (dp * mbs)


def test_expert_tp_beside_tp_is_the_stacks_rule(tmp_path: Path) -> None:
    """Megatron-Core from 0.10 lays the expert layers out on their own grid (MoE Parallel Folding), so etp 4 runs
    beside tp 1; a stack that carves expert TP from TP (HyperParallel's trainer: etp = tp or 1) cannot. The
    search's space and the stated plan's HP504 ask the same rule (Framework.etp_fits): Grok-1's run at tp 1."""
    src = ROOT / "benchmarks" / "calibration_runs" / "grok1-314b-512xh100-nemo"
    (tmp_path / "train.yaml").write_text((src / "train.yaml").read_text())
    text = (src / "search.yaml").read_text()
    assert "  dp: 8\n" in text and "  tp: 4\n" in text and "  etp: 4\n" in text and "micro_batch_num: 128" in text
    stated = text.replace("  dp: 8\n", "  dp: 32\n").replace("  tp: 4\n", "  tp: 1\n").replace(
        "micro_batch_num: 128", "micro_batch_num: 32")

    def hp504(framework: str) -> list[Any]:
        path = tmp_path / f"{framework}.yaml"
        path.write_text(stated.replace("framework: megatron", f"framework: {framework}"))
        loaded = check_file(str(path))
        assert loaded.config is not None and loaded.config.stated is not None
        from engine.cost.strategy_rules import estimate_config

        return [d for d in estimate_config(loaded.config)[1] if d.code == "HP504" and "etp" in d.message]

    assert hp504("megatron") == []
    (d,) = hp504("hyperparallel")
    assert d.path == "parallelism.etp" and d.data["nearest_valid"] == 1  # gcd(tp 1, etp 4)
    searched = tmp_path / "searched.yaml"
    searched.write_text(text.replace("  dp: 8\n", "  dp: auto\n").replace("  tp: 4\n", "  tp: auto\n")
                        .replace("micro_batch_num: 128", "micro_batch_num: auto")
                        .replace("framework: megatron", "framework: hyperparallel"))
    _code, doc = _cli(run_search, "search", [str(searched), "--json", "--top", "10"])
    assert all(e["strategy"]["tp"] % 4 == 0 for e in doc["top"]), [e["strategy"]["tp"] for e in doc["top"]]
    assert any("etp does not divide tp" in reason for reason in doc["refused"])


@pytest.mark.parametrize(("pp", "vpp", "per"), [(8, 2, None), (2, 4, 11), (2, 5, 9), (8, 4, "HP753")])
def test_torchtitan_stages_come_from_its_layers_per_stage(tmp_path: Path, pp: int, vpp: int, per: Any) -> None:
    """torchtitan makes ⌈(80 layers + embedding + output) / layers_per_stage⌉ virtual stages, which must be pp·vpp
    (TT-SRC pipeline_llm), or 2 per rank where it is unset: vpp 2 writes none, vpp 4 over pp 2 writes 11
    (⌈82/11⌉ = 8), and pp 8 · vpp 4 = 32 stages no whole number gives (HP753, and never a searched plan)."""
    path = _stated_torchtitan(tmp_path, pp=pp, vpp=vpp, mbs=1)
    _code, doc = _cli(run_export, "export", [str(path), "--to", "torchtitan", "--json"])  # fits or not
    par = tomllib.loads(doc["text"])["parallelism"]
    said = [d for d in doc["diagnostics"] if d["code"] == "HP753" and d["path"] == "vpp"]
    if per == "HP753":
        assert said and "pipeline_parallel_layers_per_stage" not in par
        return
    assert not said and par.get("pipeline_parallel_layers_per_stage") == per
    assert read_torchtitan(doc["text"], 80).vpp == vpp


def test_torchtitan_is_never_offered_a_stage_count_it_cannot_make(tmp_path: Path) -> None:
    path = _folder(tmp_path, framework="torchtitan", gbs=512)
    code, doc = _cli(run_search, "search", [str(path), "--json", "--top", "10"])
    assert code == 0 and doc["top"]
    space = FRAMEWORKS["torchtitan"].space
    for e in doc["top"]:
        s = e["strategy"]
        assert space.runs_virtual_stages(82, s["pp"], s["vpp"]), s


TRAINER_8B = """\
model:
  _target_: hyper_parallel.models.HyperAutoModelForCausalLM.from_pretrained
  pretrained_model_name_or_path: meta-llama/Llama-3.1-8B
  torch_dtype: bfloat16
training: {{train_iters: 10, global_batch_size: 64, micro_batch_size: 1, backend: hccl}}
accelerator: {{tp_size: 1, cp_size: 1, ep_size: 1, pp_size: 1, sequence_parallel: false, loss_parallel: false}}
fsdp_config: {{dp_shard_size: 8, reshard_after_forward: true}}
activation_checkpoint: {{mode: full}}
compile: {{enabled: {compile}}}
dataset: {{data_transform: {{max_seq_len: 4096}}}}
optimizer: {{_target_: hyper_parallel.components.optim.AdamW}}
"""


def test_hyperparallels_trainer_is_offered_no_pipeline_with_compile(tmp_path: Path) -> None:
    """The AutoModels trainer refuses compile.enabled with pp > 1 (HP423 on the file, [HP] Corrections): its search
    offers pp 1 only, and the compile the file states is priced (fused element-wise work: a shorter step)."""
    steps = {}
    for on in ("true", "false"):
        (tmp_path / "train.yaml").write_text(TRAINER_8B.format(compile=on))
        (tmp_path / "search.yaml").write_text(
            "train_yaml: ./train.yaml\ncluster: {num_nodes: 8, cards_per_node: 8, device_type: A2}\n"
            "parallelism: {dp: auto, fsdp: auto, tp: auto, pp: auto, cp: 1, ep: 1, micro_batch_size: auto}\n"
            "constraint: {global_batch_size: 512}\n")
        code, doc = _cli(run_search, "search", [str(tmp_path / "search.yaml"), "--json", "--top", "10"])
        assert code == 0 and doc["top"]
        if on == "true":
            assert {e["strategy"]["pp"] for e in doc["top"]} == {1}
            assert any("with compile" in reason for reason in doc["refused"])
        stated = check_file(str(tmp_path / "train.yaml"),
                            overrides=ClusterOverrides(devices=8, device_type="A2", explicit=True))
        assert stated.config is not None and stated.config.run.compile == (on == "true")
        steps[on] = stated.config
    from engine.cost.strategy_rules import estimate_config

    fast, slow = (estimate_config(steps[k])[0] for k in ("true", "false"))
    assert fast is not None and slow is not None and fast.step_time_s < slow.step_time_s


def test_a_whole_domain_fsdp_shard_in_the_train_yaml_is_kept_by_the_search(tmp_path: Path) -> None:
    """`fsdp_config.dp_shard_size: -1` shards over the whole data-parallel domain dp·cp: a search config naming the
    train.yaml inherits it per candidate (it was dropped, and the plans priced without FSDP)."""
    (tmp_path / "train.yaml").write_text(TRAIN_70B.format(gbs=256, seq=4096,
                                                          extra="fsdp_config: {dp_shard_size: -1}\n"))
    (tmp_path / "search.yaml").write_text("train_yaml: ./train.yaml\ncluster: {num_nodes: 8, cards_per_node: 8, "
                                          "device_type: H100}\nestimator: {framework: torchtitan}\n")
    code, doc = _cli(run_search, "search", [str(tmp_path / "search.yaml"), "--json", "--top", "10"])
    assert code == 0 and doc["top"]
    for e in doc["top"]:
        s = e["strategy"]
        assert s["dp_shard"] == s["dp"] * s["cp"], s


@pytest.mark.parametrize(("framework", "gbs", "refused"), [
    ("megatron", 20, True), ("megatron", 16, False), ("torchtitan", 20, False), ("torchtitan", 18, True),
    ("hyperparallel", 18, False)])
def test_interleaved_micro_batches_are_grouped_as_each_stack_runs_them(tmp_path: Path, framework: str, gbs: int,
                                                                      refused: bool) -> None:
    """dp 2 · tp 8 · pp 4 · vpp 2 with 10 / 8 / 9 micro-batches: Megatron-Core needs a multiple of pp (MCORE-SCHED),
    torchtitan's torch.distributed.pipelining rounds that divide them (TORCH-PIPE), HyperParallel any count. The
    stated plan gets HP507 exactly where the stack refuses it, and the search offers it exactly where it runs."""
    path = _folder(tmp_path, framework=framework, gbs=gbs, seq=4096)
    stated = path.read_text().replace(
        "parallelism: {dp: auto, fsdp: auto, tp: auto, pp: auto, cp: auto, ep: 1, vpp: auto, micro_batch_size: auto,\n"
        "              micro_batch_num: auto, sequence_parallel: auto}",
        "parallelism: {dp: 2, fsdp: 1, tp: 8, pp: 4, cp: 1, ep: 1, vpp: 2, micro_batch_size: 1, "
        "sequence_parallel: true}\npp_config: {pipeline_schedule: interleaved}")
    path.write_text(stated)
    doc = estimate_in_process(path)
    assert [d["code"] for d in doc["diagnostics"] if d["code"] == "HP507"] == (["HP507"] if refused else [])
    path.write_text(stated.replace("fsdp: 1", "fsdp: auto").replace("vpp: 2", "vpp: [1, 2]"))
    _code, doc = _cli(run_search, "search", [str(path), "--json", "--top", "50"])
    offered = {e["strategy"]["vpp"] for e in doc["top"]}
    assert 1 in offered and (2 not in offered) == refused, offered
    assert any("does not group" in reason for reason in doc["refused"]) == refused
