"""A plan as another stack's arguments (`hp-plan export FILE --to megatron|torchtitan|mindspeed`), and the
reverse reading the tests use to show the mapping round-trips.

Mapping (docs/explain.md has the same table; flag names as Megatron-LM's megatron/training/arguments.py,
MindSpeed-LLM's feature managers and torchtitan's torchtitan/config/job_config.py spell them):

| strategy | Megatron-LM / MindSpeed-LLM | torchtitan (TOML) |
|---|---|---|
| tp | --tensor-model-parallel-size | parallelism.tensor_parallel_degree |
| pp | --pipeline-model-parallel-size | parallelism.pipeline_parallel_degree |
| cp | --context-parallel-size | parallelism.context_parallel_degree |
| ep | --expert-model-parallel-size | parallelism.expert_parallel_degree |
| etp | --expert-tensor-parallel-size | (none: etp 1 only) |
| vpp (interleaved) | --num-layers-per-virtual-pipeline-stage L/(pp·vpp) | pipeline_parallel_schedule "Interleaved1F1B", pipeline_parallel_layers_per_stage L/(pp·vpp) |
| pipeline_schedule 1F1B | (the default) | pipeline_parallel_schedule "1F1B" |
| sequence_parallel | --sequence-parallel | (always on with tp > 1) |
| micro_batch_size | --micro-batch-size | parallelism.pipeline_parallel_microbatch_size |
| global_batch_size | --global-batch-size | training.global_batch_size, training.local_batch_size = mbs·m |
| dp | world / (tp·pp·cp) (the launcher's world size) | data_parallel_replicate_degree × data_parallel_shard_degree |
| dp_shard (FSDP) | --use-torch-fsdp2 (whole DP group only) | data_parallel_shard_degree = dp_shard / cp, replicate = dp·cp / dp_shard |
| optimizer_shard (ZeRO-1) | --use-distributed-optimizer, --num-distributed-optimizer-instances dp·cp / o | (none: FSDP shards instead) |
| recompute full | --recompute-granularity full --recompute-method uniform --recompute-num-layers 1 | activation_checkpoint.mode "full" |
| recompute selective | --recompute-granularity selective | activation_checkpoint.mode "selective", selective_ac_option "op" |
| recompute_modules | --recompute-modules m1 m2 … (MindSpeed: no shared_experts) | (none) |
| grad_dtype bf16 / optimizer_state_dtype bf16 | --grad-reduce-in-bf16 / --use-precision-aware-optimizer --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16 | training.mixed_precision_reduce "bfloat16" / (none) |
| recompute off | (no flag) | activation_checkpoint.mode "none" |
| cp_algo ring / ulysses / hybrid | Megatron --cp-comm-type p2p / a2a / a2a+p2p; MindSpeed --context-parallel-algo megatron_cp_algo / ulysses_cp_algo / hybrid_cp_algo | (ring only: context_parallel_rotate_method) |
| seq_len | --seq-length | training.seq_len |

What a stack cannot express gets an HP753 warning naming the setting, never a silent approximation.
"""

from __future__ import annotations

import shlex
import tomllib
from dataclasses import dataclass, replace
from typing import Any

from engine.cost.layout import effective_layout
from engine.diagnostics import Diagnostic
from engine.specs import ModelSpec, RecomputePlan, RunOptions, Strategy

TARGETS = ("megatron", "torchtitan", "mindspeed")
MEGATRON_CP = {"ring": "p2p", "ulysses": "a2a", "hybrid": "a2a+p2p"}
MINDSPEED_CP = {"ring": "megatron_cp_algo", "ulysses": "ulysses_cp_algo", "hybrid": "hybrid_cp_algo"}


@dataclass(frozen=True, slots=True)
class Exported:
    """The arguments for `target`: `text` is what to paste (flags one per line, or a TOML fragment)."""

    target: str
    text: str
    args: tuple[str, ...]
    diagnostics: tuple[Diagnostic, ...]

    def to_json(self) -> dict[str, Any]:
        return {"target": self.target, "text": self.text, "args": list(self.args),
                "diagnostics": [d.to_json() for d in self.diagnostics]}


def _warn(setting: str, target: str, why: str) -> Diagnostic:
    return Diagnostic("HP753", f"{setting}: {why} ({target} has no argument for it)", path=setting)


def export(s: Strategy, model: ModelSpec, run: RunOptions, target: str) -> Exported:
    """The plan `s` (for `model`, run options `run`) as `target`'s arguments."""
    if target == "torchtitan":
        return _torchtitan(s, model, run)
    if target not in ("megatron", "mindspeed"):
        raise ValueError(f"unknown export target {target!r}; one of {', '.join(TARGETS)}")
    return _megatron(s, model, run, target)


def _recompute_warnings(s: Strategy, target: str) -> list[Diagnostic]:
    out = []
    if s.recompute.layers:
        out.append(_warn("recompute.layers", target, f"per-layer recompute {dict(_ranges(s.recompute))} is exported "
                         f"as the base mode {s.recompute.mode}"))
    if s.recompute.offload:
        # [HP] §8.6: the plan's offloaded layers, priced with their activations on the host; the flags run them off
        names = ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in s.recompute.offload)
        out.append(Diagnostic("HP753", f"recompute.offload: activation offload of layers {names} is not exported: "
                              f"the {target} flags run those layers with recompute off, their activations kept on "
                              "the device (priced off the device)", path="recompute.offload"))
    return out


def _ranges(plan: RecomputePlan) -> list[tuple[str, str]]:
    return [(f"{a}-{b}" if a != b else str(a), m) for a, b, m in plan.layers]


def _megatron_layout(s: Strategy, run: RunOptions, target: str, warns: list[Diagnostic]) -> list[str]:
    """The stated pipeline layout (engine.specs.PipelineLayout) as Megatron-LM's flags (MLM-ARGS): the
    embedding/loss accounting and the first/last-stage layer counts; HyperParallel's per-stage offsets have
    no such flag (HP753)."""
    lay = run.pipeline_layout
    if s.pp <= 1 or not lay.stated:
        return []
    if lay.offset:
        warns.append(_warn("offset", target, f"per-stage layer offsets {[list(o) for o in lay.offset]}"))
        return []
    out: list[str] = []
    if lay.embedding_in_split:
        out.append("--account-for-embedding-in-pipeline-split")
    if lay.loss_in_split:
        out.append("--account-for-loss-in-pipeline-split")
    if lay.first_stage_layers:
        out += ["--decoder-first-pipeline-num-layers", str(lay.first_stage_layers)]
    if lay.last_stage_layers:
        out += ["--decoder-last-pipeline-num-layers", str(lay.last_stage_layers)]
    return out


def _megatron(s: Strategy, model: ModelSpec, run: RunOptions, target: str) -> Exported:
    args: list[str] = ["--tensor-model-parallel-size", str(s.tp), "--pipeline-model-parallel-size", str(s.pp),
                       "--context-parallel-size", str(s.cp), "--expert-model-parallel-size", str(s.ep),
                       "--expert-tensor-parallel-size", str(s.etp),
                       "--micro-batch-size", str(s.micro_batch_size), "--global-batch-size", str(s.global_batch_size),
                       "--seq-length", str(model.seq_len)]
    warns: list[Diagnostic] = []
    layout_args = _megatron_layout(s, run, target, warns)
    if s.pipeline_schedule == "interleaved" and s.vpp > 1:
        if model.num_layers % (s.pp * s.vpp) == 0 and not layout_args:
            args += ["--num-layers-per-virtual-pipeline-stage", str(model.num_layers // (s.pp * s.vpp))]
        else:
            args += ["--num-virtual-stages-per-pipeline-rank", str(s.vpp)]
            if not layout_args:
                warns.append(_warn("vpp", target, f"{model.num_layers} layers do not split evenly into "
                                   f"{s.pp}×{s.vpp} chunks; set --decoder-first-pipeline-num-layers / "
                                   "--decoder-last-pipeline-num-layers (or --account-for-embedding-in-pipeline-split "
                                   "--account-for-loss-in-pipeline-split) to the split you want"))
    args += layout_args
    if s.sequence_parallel and s.tp > 1:
        args.append("--sequence-parallel")
    dpcp = s.dp * s.cp
    if s.dp_shard > 1:
        args.append("--use-torch-fsdp2")
        if s.dp_shard != dpcp:
            warns.append(_warn("dp_shard", target, f"FSDP over {s.dp_shard} of the {dpcp} data-parallel ranks "
                               "(HSDP) is exported as FSDP2 over all of them"))
        if s.pp > 1:
            warns.append(_warn("dp_shard", target, "Megatron's FSDP2 path does not run with pipeline parallelism"))
    elif s.optimizer_shard > 1:
        args.append("--use-distributed-optimizer")
        if dpcp // s.optimizer_shard > 1:
            args += ["--num-distributed-optimizer-instances", str(dpcp // s.optimizer_shard)]
    mode = s.recompute.mode
    if mode == "full":
        args += ["--recompute-granularity", "full", "--recompute-method", "uniform", "--recompute-num-layers", "1"]
    elif mode == "selective":
        args += ["--recompute-granularity", "selective"]
        args += _recompute_modules(run, target, warns)
    warns += _recompute_warnings(s, target)
    args += _state_dtypes(run)
    if s.cp > 1:
        if target == "mindspeed":
            args += ["--context-parallel-algo", MINDSPEED_CP[run.cp_algo]]
        else:
            args += ["--cp-comm-type", MEGATRON_CP[run.cp_algo]]
    if run.tp_comm_overlap and s.tp > 1:
        args.append("--tp-comm-overlap")
    args += _grad_accumulation_args(model, run, target)
    if s.dp_shard <= 1 and dpcp > 1:
        if run.overlap_grad_reduce:
            args.append("--overlap-grad-reduce")
        if run.overlap_param_gather and s.optimizer_shard > 1:
            args.append("--overlap-param-gather")
    lines = [f"# {target}: world size {s.world_size} (launch {s.world_size} ranks; data parallel = world / "
             f"(tp·pp·cp) = {s.dp})"]
    pairs = _pairs(args)
    lines += [" ".join(shlex.quote(x) for x in p) + " \\" for p in pairs]
    if lines[-1].endswith(" \\"):
        lines[-1] = lines[-1][:-2]
    return Exported(target, "\n".join(lines) + "\n", tuple(args), tuple(warns))


def _grad_accumulation_args(model: ModelSpec, run: RunOptions, target: str) -> list[str]:
    """The weight-gradient accumulation the plan was priced with, as the target's flags (Megatron fuses by
    default; the target framework's usual setting where the files state none, engine.catalog.frameworks)."""
    from engine.catalog.frameworks import FRAMEWORKS

    dense, grouped = FRAMEWORKS[target].grad_accumulation_fused(run)
    args = [] if dense else ["--no-gradient-accumulation-fusion"]
    if target == "mindspeed" and model.is_moe and grouped:
        args.append("--gemm-gradient-accumulation-fusion")
    return args


def _recompute_modules(run: RunOptions, target: str, warns: list[Diagnostic]) -> list[str]:
    """`--recompute-modules m1 m2` for the stated modules the target runs (MindSpeed-LLM has no
    shared_experts module: HP753 for it)."""
    from engine.catalog.frameworks import FRAMEWORKS

    offered = FRAMEWORKS[target].recompute_modules
    mods = [x for x in run.recompute_modules if x in offered]
    for x in run.recompute_modules:
        if x not in offered and x != "auto":
            warns.append(_warn("recompute_modules", target, f"the recompute module {x}"))
    return ["--recompute-modules", *mods] if mods else []


def _state_dtypes(run: RunOptions) -> list[str]:
    """Gradient and optimizer-state widths as Megatron spells them: --grad-reduce-in-bf16 for 16-bit
    gradients, the precision-aware optimizer with bf16 moments for 16-bit Adam states."""
    out = ["--grad-reduce-in-bf16"] if run.grad_bytes == 2 else []
    if run.optimizer_state_bytes == 2:
        out += ["--use-precision-aware-optimizer", "--exp-avg-dtype", "bf16", "--exp-avg-sq-dtype", "bf16"]
    return out


def _pairs(args: list[str]) -> list[list[str]]:
    """Flags with their value, one group per flag (for one flag a line)."""
    out: list[list[str]] = []
    for a in args:
        if a.startswith("--") or not out:
            out.append([a])
        else:
            out[-1].append(a)
    return out


def _torchtitan(s: Strategy, model: ModelSpec, run: RunOptions) -> Exported:
    target = "torchtitan"
    warns: list[Diagnostic] = []
    fs = max(s.dp_shard, 1)
    if fs % s.cp:
        warns.append(_warn("dp_shard", target, f"torchtitan shards FSDP over dp_shard × cp; {fs} is not a "
                           f"multiple of cp {s.cp}"))
    shard = max(fs // s.cp, 1)
    replicate = max(s.dp // shard, 1)
    if s.etp > 1:
        warns.append(_warn("etp", target, f"expert tensor parallelism {s.etp}"))
    if s.optimizer_shard > 1 and fs <= 1:
        warns.append(_warn("optimizer_shard", target, f"ZeRO-1 optimizer sharding over {s.optimizer_shard} ranks "
                           "(use FSDP: data_parallel_shard_degree)"))
    if s.tp > 1 and not s.sequence_parallel:
        warns.append(_warn("sequence_parallel", target, "torchtitan always shards norms and dropout over the "
                           "tensor-parallel group (sequence parallel)"))
    if s.cp > 1 and run.cp_algo != "ring":
        warns.append(_warn("cp_algo", target, f"context parallel algorithm {run.cp_algo}"))
    warns += _recompute_warnings(s, target)
    interleaved = s.pipeline_schedule == "interleaved" and s.vpp > 1
    mode = {"off": "none", "selective": "selective", "full": "full"}[s.recompute.mode]
    lines = [f"# torchtitan: world size {s.world_size}", "[training]",
             f"local_batch_size = {s.micro_batch_size * s.micro_batch_num}",
             f"global_batch_size = {s.global_batch_size}", f"seq_len = {model.seq_len}",
             *(['mixed_precision_reduce = "bfloat16"'] if run.grad_bytes == 2 else []), "",
             "[parallelism]", f"data_parallel_replicate_degree = {replicate}",
             f"data_parallel_shard_degree = {shard}", f"tensor_parallel_degree = {s.tp}",
             f"pipeline_parallel_degree = {s.pp}", f"context_parallel_degree = {s.cp}",
             f"expert_parallel_degree = {s.ep}",
             f"pipeline_parallel_schedule = \"{'Interleaved1F1B' if interleaved else '1F1B'}\"",
             f"pipeline_parallel_microbatch_size = {s.micro_batch_size}"]
    lines += _torchtitan_layout(s, model, run, interleaved, warns)
    if fs > 1:
        lines.append(f"fsdp_reshard_after_forward = \"{'always' if run.reshard_after_forward else 'never'}\"")
    if run.tp_comm_overlap and s.tp > 1:
        lines.append("enable_async_tensor_parallel = true")
    lines += ["", "[activation_checkpoint]", f"mode = \"{mode}\""]
    if mode == "selective":
        lines.append('selective_ac_option = "op"')
        if run.recompute_modules and run.recompute_modules != ("auto",):
            warns.append(_warn("recompute_modules", target, f"recompute by module {list(run.recompute_modules)} "
                               "(exported as the op policy)"))
    text = "\n".join(lines) + "\n"
    return Exported(target, text, (), tuple(warns))


def _torchtitan_layout(s: Strategy, model: ModelSpec, run: RunOptions, interleaved: bool,
                       warns: list[Diagnostic]) -> list[str]:
    """The priced pipeline layout in torchtitan's keys (TT-SRC `generate_llm_fqn_per_model_part`): the
    embedding's and output's weight in the split (`pipeline_parallel_first/last_stage_less_layers`) and the
    layers per model chunk; per-stage counts and offsets have no such key (HP753)."""
    if s.pp <= 1:
        return []
    lay = effective_layout(run)
    if lay.offset or lay.first_stage_layers or lay.last_stage_layers:
        warns.append(_warn("pipeline layout", "torchtitan", "per-stage layer counts (write them as "
                           "module_fqns_per_model_part)"))
        return []
    e, lo = int(lay.embedding_in_split), int(lay.loss_in_split)
    out = [f"pipeline_parallel_first_stage_less_layers = {e}", f"pipeline_parallel_last_stage_less_layers = {lo}"]
    chunks = s.pp * (s.vpp if interleaved else 1)
    total = model.num_layers + e + lo
    if interleaved:
        out.append(f"pipeline_parallel_layers_per_stage = {max(total // chunks, 1)}")
    if total % chunks and not lay.remainder_first:
        warns.append(_warn("vpp", "torchtitan", f"{total} layers{' with the embedding and output' if e + lo else ''} "
                           f"do not split evenly into {chunks} model chunks (torchtitan gives the extra ones to the "
                           "first chunks); set module_fqns_per_model_part to the split priced"))
    return out


def read_megatron(args: list[str] | tuple[str, ...], world: int, num_layers: int) -> Strategy:
    """The strategy Megatron/MindSpeed arguments describe on `world` ranks (the reverse of export)."""
    val: dict[str, str] = {}
    flags: set[str] = set()
    for group in _pairs(list(args)):
        flags.add(group[0])
        if len(group) > 1:
            val[group[0]] = group[1]
    tp = int(val.get("--tensor-model-parallel-size", 1))
    pp = int(val.get("--pipeline-model-parallel-size", 1))
    cp = int(val.get("--context-parallel-size", 1))
    mbs = int(val.get("--micro-batch-size", 1))
    gbs = int(val.get("--global-batch-size", mbs))
    dp = world // (tp * pp * cp)
    per_chunk = int(val.get("--num-layers-per-virtual-pipeline-stage", 0))
    vpp = num_layers // (pp * per_chunk) if per_chunk else int(val.get("--num-virtual-stages-per-pipeline-rank", 1))
    opt = 1
    if "--use-distributed-optimizer" in flags:
        opt = dp * cp // int(val.get("--num-distributed-optimizer-instances", 1))
    mode = val.get("--recompute-granularity", "off")
    return Strategy(dp=dp, dp_shard=dp * cp if "--use-torch-fsdp2" in flags else 1, tp=tp, pp=pp, cp=cp,
                    ep=int(val.get("--expert-model-parallel-size", 1)),
                    etp=int(val.get("--expert-tensor-parallel-size", 1)), vpp=vpp, micro_batch_size=mbs,
                    micro_batch_num=gbs // (dp * mbs), sequence_parallel="--sequence-parallel" in flags,
                    recompute=RecomputePlan(mode=mode),  # type: ignore[arg-type]
                    pipeline_schedule="interleaved" if vpp > 1 else "1F1B", optimizer_shard=opt)


def read_torchtitan(text: str, num_layers: int) -> Strategy:
    """The strategy a torchtitan TOML fragment describes (the reverse of export)."""
    doc = tomllib.loads(text)
    par, tr, ac = doc.get("parallelism", {}), doc.get("training", {}), doc.get("activation_checkpoint", {})
    tp, pp, cp = par.get("tensor_parallel_degree", 1), par.get("pipeline_parallel_degree", 1), \
        par.get("context_parallel_degree", 1)
    rep, shard = par.get("data_parallel_replicate_degree", 1), par.get("data_parallel_shard_degree", 1)
    mbs = par.get("pipeline_parallel_microbatch_size", 1)
    dp = rep * shard
    interleaved = par.get("pipeline_parallel_schedule") == "Interleaved1F1B"
    # torchtitan's model chunks: ⌈(layers + the embedding's and output's weight) / layers per stage⌉ (TT-SRC)
    weights = par.get("pipeline_parallel_first_stage_less_layers", 1) + par.get(
        "pipeline_parallel_last_stage_less_layers", 1)
    vpp = -(-(num_layers + weights) // par["pipeline_parallel_layers_per_stage"]) // pp if interleaved else 1
    fs = shard * cp if shard > 1 else 1
    mode = {"none": "off", "selective": "selective", "full": "full"}[ac.get("mode", "none")]
    s = Strategy(dp=dp, dp_shard=fs, tp=tp, pp=pp, cp=cp, ep=par.get("expert_parallel_degree", 1), vpp=vpp,
                 micro_batch_size=mbs, micro_batch_num=tr.get("local_batch_size", mbs) // mbs,
                 sequence_parallel=tp > 1, recompute=RecomputePlan(mode=mode),  # type: ignore[arg-type]
                 pipeline_schedule="interleaved" if interleaved else "1F1B")
    return replace(s, optimizer_shard=1)
