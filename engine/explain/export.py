"""A plan as another stack's arguments (`hp-plan export FILE --to megatron|torchtitan|mindspeed`), and the
reverse reading the tests use to show the mapping round-trips.

Mapping (docs/explain.md has the same table; flag names as Megatron-LM's megatron/training/arguments.py,
MindSpeed-LLM's feature managers and torchtitan's torchtitan/config/job_config.py spell them; every Megatron-LM and
MindSpeed flag is one the stack accepts at the release engine/catalog/data/*_flags.txt names):

| strategy | Megatron-LM / MindSpeed-LLM | torchtitan (TOML) |
|---|---|---|
| tp | --tensor-model-parallel-size | parallelism.tensor_parallel_degree |
| pp | --pipeline-model-parallel-size | parallelism.pipeline_parallel_degree |
| cp | --context-parallel-size | parallelism.context_parallel_degree |
| ep | --expert-model-parallel-size | parallelism.expert_parallel_degree |
| etp | --expert-tensor-parallel-size | (none: etp 1 only) |
| vpp (interleaved) | --num-layers-per-virtual-pipeline-stage L/(pp·vpp) | pipeline_parallel_schedule "Interleaved1F1B", pipeline_parallel_layers_per_stage L/(pp·vpp) |
| pipeline_schedule 1F1B | (the default) | pipeline_parallel_schedule "1F1B" |
| pipeline_schedule dualpipev | MindSpeed --schedules-method dualpipev (with moe_a2a_overlap: --moe-fb-overlap); Megatron-LM: none (HP753) | (none: HP753) |
| sequence_parallel | --sequence-parallel whenever tp > 1 (Megatron refuses --tp-comm-overlap without it) | (always on with tp > 1) |
| micro_batch_size | --micro-batch-size | parallelism.pipeline_parallel_microbatch_size |
| global_batch_size | --global-batch-size | training.global_batch_size; training.local_batch_size = mbs (pp 1: the steps accumulate m) or mbs·m (pp > 1) |
| dp | world / (tp·pp·cp) (the launcher's world size) | data_parallel_replicate_degree × data_parallel_shard_degree |
| dp_shard (FSDP) | Megatron: --use-megatron-fsdp --data-parallel-sharding-strategy optim_grads_params --ckpt-format fsdp_dtensor; MindSpeed: --use-torch-fsdp2 --fsdp2-config-path fsdp2_config.yaml (the YAML follows the flags); whole dp·cp, pp 1 only | data_parallel_shard_degree = dp_shard / cp, replicate = dp·cp / dp_shard |
| optimizer_shard (ZeRO-1) | --use-distributed-optimizer, --num-distributed-optimizer-instances dp·cp / o | (none: FSDP shards instead) |
| fp8 (recipe), fp8_param_gather | Megatron: --fp8-format hybrid --fp8-recipe delayed / tensorwise / blockwise / mxfp8, --fp8-param-gather | (HP753: torchao's float8 converter, its keys by release) |
| capacity_factor (token drop), moe_router_force_load_balancing | --moe-expert-capacity-factor F --moe-pad-expert-input-to-capacity; Megatron: --moe-router-force-load-balancing (MindSpeed: HP753) | (HP753: dropless, no forced balance) |
| moe_dispatcher, MoE overlaps | --moe-grouped-gemm, --moe-token-dispatcher-type alltoall (allgather), or flex --moe-flex-dispatcher-backend deepep; --moe-shared-expert-overlap; --overlap-moe-expert-parallel-comm --delay-wgrad-compute / MindSpeed --moe-alltoall-overlap-comm | expert_parallel_degree |
| offloaded layers | Megatron --cpu-offloading-num-layers N (pp 1, no recompute) | (none) |
| fused kernels, tp_comm_overlap | TE default / --tp-comm-overlap; MindSpeed --use-flash-attn --use-fused-rmsnorm --use-fused-swiglu --use-fused-rotary-pos-emb, --use-ascend-mc2 | enable_async_tensor_parallel |
| recompute full | --recompute-granularity full --recompute-method uniform --recompute-num-layers 1 | activation_checkpoint.mode "full" |
| recompute selective | --recompute-granularity selective | activation_checkpoint.mode "selective", selective_ac_option "op" |
| recompute_modules | --recompute-modules m1 m2 … (MindSpeed: no shared_experts) | (none) |
| grad_dtype bf16 / optimizer_state_dtype bf16 | --grad-reduce-in-bf16 / --use-precision-aware-optimizer --exp-avg-dtype bf16 --exp-avg-sq-dtype bf16 | training.mixed_precision_reduce "bfloat16" / (none) |
| recompute off | (no flag) | activation_checkpoint.mode "none" |
| cp_algo ring / ulysses / hybrid / allgather | Megatron --cp-comm-type p2p / a2a / a2a+p2p / all_gather; MindSpeed --context-parallel-algo megatron_cp_algo / ulysses_cp_algo / hybrid_cp_algo (no all-gather: HP753) | (ring only: context_parallel_rotate_method) |
| seq_len | --seq-length | training.seq_len |

What a stack cannot express gets an HP753 warning naming the setting, never a silent approximation.
"""

from __future__ import annotations

import shlex
import tomllib
from dataclasses import dataclass, replace
from typing import Any

from engine.catalog.frameworks import FRAMEWORKS, framework_of
from engine.config.layer_layout import layout_text, parse_layout_text
from engine.cost.layout import effective_layout, layout_or_default
from engine.diagnostics import Diagnostic
from engine.specs import DeviceSpec, ModelSpec, PipelineLayout, RecomputePlan, RunOptions, Strategy, noop_text

TARGETS = ("megatron", "torchtitan", "mindspeed")
MEGATRON_CP = {"ring": "p2p", "ulysses": "a2a", "hybrid": "a2a+p2p", "allgather": "all_gather"}
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


def export(s: Strategy, model: ModelSpec, run: RunOptions, target: str,
           device: DeviceSpec | None = None) -> Exported:
    """The plan `s` (for `model`, run options `run`, on `device` where known) as `target`'s arguments."""
    if target == "torchtitan":
        return _torchtitan(s, model, run)
    if target not in ("megatron", "mindspeed"):
        raise ValueError(f"unknown export target {target!r}; one of {', '.join(TARGETS)}")
    return _megatron(s, model, run, target, device)


def _recompute_warnings(s: Strategy, target: str) -> list[Diagnostic]:
    out = []
    if s.recompute.layers:
        out.append(_warn("recompute.layers", target, f"per-layer recompute {dict(_ranges(s.recompute))} is exported "
                         f"as the base mode {s.recompute.mode}"))
    if s.recompute.offload and target == "torchtitan":  # Megatron-style targets: _offload_args
        # [HP] §8.6: the plan's offloaded layers, priced with their activations on the host; torchtitan has no
        # activation offload of whole layers, so its config runs them with recompute off, kept on the device
        names = ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in s.recompute.offload)
        out.append(Diagnostic("HP753", f"recompute.offload: activation offload of layers {names} is not exported: "
                              "torchtitan has no layer offload; its config runs those layers with recompute off, "
                              "their activations kept on the device (priced off the device)", path="recompute.offload"))
    return out


def _ranges(plan: RecomputePlan) -> list[tuple[str, str]]:
    return [(f"{a}-{b}" if a != b else str(a), m) for a, b, m in plan.layers]


def _chunks_per_stage(s: Strategy) -> int:
    """The virtual chunks per pipeline stage the plan runs: its vpp under the interleaved schedule, else 1."""
    return s.vpp if s.pipeline_schedule == "interleaved" and s.vpp > 1 else 1


def _megatron_layout(s: Strategy, model: ModelSpec, run: RunOptions, target: str,
                     warns: list[Diagnostic]) -> list[str]:
    """The pipeline layout priced (engine.specs.PipelineLayout) as Megatron-LM's flags (MLM-ARGS): the
    embedding/loss accounting, the first/last-stage layer counts or the per-chunk layer layout (Megatron-LM
    only); HyperParallel's per-stage offsets as the layers they place (_split_args; HP753 where no flag takes
    them). Where the files state none, the split of the stack that priced the plan is the layout: torchtitan's counts the embedding and the output as layers,
    which Megatron-LM's accounting flags reproduce where the count divides (else `_priced_split` lists it)."""
    lay = run.pipeline_layout
    if s.pp <= 1:
        return []
    if not lay.stated:
        own = effective_layout(run)
        v = _chunks_per_stage(s)
        counted = model.num_layers + int(own.embedding_in_split) + int(own.loss_in_split)
        if not (own.embedding_in_split or own.loss_in_split) or counted % (s.pp * v):
            return []
        lay = replace(own, remainder_first=False)  # nothing remains over: the accounting's split is the priced one
    if lay.noop_layers:
        return _noop_args(lay, model, run, target, warns)
    if lay.offset:
        # HyperParallel's per-stage offsets: the stages' own layer counts, which MindSpeed-LLM (no vpp) and a
        # Megatron-Core that takes a layer layout run as they are
        v = _chunks_per_stage(s)
        chunks, _ = layout_or_default(model.num_layers, model.mtp_depth, s.pp, v, lay)
        args = _split_args(chunks, model, run, target)
        if args is None:
            warns.append(_warn("offset", target, f"per-stage layer offsets {[list(o) for o in lay.offset]}"))
            return []
        return args
    if lay.layer_layout:
        if not _takes_layer_layout(run, target):
            warns.append(_warn("pipeline_model_parallel_layout", target, "a per-chunk layer layout"))
            return []
        return ["--pipeline-model-parallel-layout", layout_text(lay.layer_layout)]
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


def _noop_args(lay: PipelineLayout, model: ModelSpec, run: RunOptions, target: str,
               warns: list[Diagnostic]) -> list[str]:
    """MindSpeed-LLM's no-op layers (MS-NOOP) as its flags: `--num-layers` counts them, `--noop-layers` names them.
    Where the plan was priced without them (a stack that has none, HP533) or the target has none, HP753."""
    if target != "mindspeed":
        warns.append(_warn("noop_layers", target, f"no-op layers {list(lay.noop_layers)} (MindSpeed-LLM's)"))
        return []
    if not framework_of(run).noop_layers:
        warns.append(Diagnostic("HP753", f"noop_layers: the plan was priced on {run.framework}, which has no no-op "
                                f"layers, so with the model's own split: {list(lay.noop_layers)} not exported",
                                path="noop_layers"))
        return []
    return ["--num-layers", str(model.num_layers + len(lay.noop_layers)),
            "--noop-layers", noop_text(lay.noop_layers)]


def _megatron(s: Strategy, model: ModelSpec, run: RunOptions, target: str,
              device: DeviceSpec | None = None) -> Exported:
    """Megatron-LM / MindSpeed-LLM flags for the plan, with every flag the price assumed (each in the stack's
    accepted flags at the pinned release, engine/catalog/data; tests/engine/search/test_stack_space.py)."""
    args: list[str] = ["--tensor-model-parallel-size", str(s.tp), "--pipeline-model-parallel-size", str(s.pp),
                       "--context-parallel-size", str(s.cp), "--expert-model-parallel-size", str(s.ep),
                       "--expert-tensor-parallel-size", str(s.etp),
                       "--micro-batch-size", str(s.micro_batch_size), "--global-batch-size", str(s.global_batch_size),
                       "--seq-length", str(model.seq_len), "--bf16"]
    warns: list[Diagnostic] = []
    args += _megatron_pipeline(s, model, run, target, warns)
    if s.tp > 1:  # Megatron-LM refuses --tp-comm-overlap without it; its recipes run SP whenever tp > 1
        args.append("--sequence-parallel")
        if not s.sequence_parallel:
            warns.append(Diagnostic("HP753", f"sequence_parallel: the plan was priced without sequence parallelism; "
                                    f"{target} runs it with tp {s.tp} (--sequence-parallel)", path="sequence_parallel"))
    fsdp2 = target == "mindspeed" and s.dp_shard > 1
    args += _dp_sharding_args(s, model, run, target, warns)
    if not fsdp2:  # MindSpeed's FSDP2 route recomputes through its fsdp2_config.yaml only
        args += _megatron_recompute(s, run, target, warns)
    elif s.recompute.mode == "selective":
        warns.append(_warn("recompute.mode", target, "selective recompute: MindSpeed's FSDP2 route checkpoints whole "
                           "modules (fsdp2_config.yaml recompute_modules), so its config recomputes whole layers, "
                           "slower and smaller than the selective plan priced"))
    warns += _recompute_warnings(s, target) + _master_weight_warnings(run, target)
    args += _state_dtypes(run)
    if s.cp > 1:
        if target == "mindspeed" and run.cp_algo in MINDSPEED_CP:
            args += ["--context-parallel-algo", MINDSPEED_CP[run.cp_algo]]
        elif target == "mindspeed":
            warns.append(_warn("cp_algo", target, f"context parallel algorithm {run.cp_algo} (exported as the "
                               "default ring, megatron_cp_algo)"))
        else:
            args += ["--cp-comm-type", MEGATRON_CP[run.cp_algo]]
    if run.tp_comm_overlap and s.tp > 1:
        args += _tp_comm_overlap_args(run, target, device, warns)
    args += _grad_accumulation_args(model, run, target)
    args += _fp8_args(run, target, device, warns)
    args += _moe_args(model, run, target, warns, s.pipeline_schedule == "dualpipev" and s.pp > 1)
    args += _offload_args(s, run, target, warns) + _fused_args(target)
    lines = [f"# {target}: world size {s.world_size} (launch {s.world_size} ranks; data parallel = world / "
             f"(tp·pp·cp) = {s.dp})"]
    pairs = _pairs(args)
    lines += [" ".join(shlex.quote(x) for x in p) + " \\" for p in pairs]
    if lines[-1].endswith(" \\"):
        lines[-1] = lines[-1][:-2]
    if fsdp2:
        lines += _fsdp2_config(s, run)
    return Exported(target, "\n".join(lines) + "\n", tuple(args), tuple(warns))


def _megatron_pipeline(s: Strategy, model: ModelSpec, run: RunOptions, target: str,
                       warns: list[Diagnostic]) -> list[str]:
    """The interleaved schedule's chunks, DualPipeV (MindSpeed `--schedules-method dualpipev`, [MS-DUALPIPEV];
    Megatron-LM has no such schedule: HP753) and the stated pipeline layout as Megatron-LM's flags."""
    args: list[str] = []
    layout_args = _megatron_layout(s, model, run, target, warns) or _priced_split(s, model, run, target, warns)
    if s.pipeline_schedule == "dualpipev" and s.pp > 1:
        if target == "mindspeed":
            args += ["--schedules-method", "dualpipev"]
        else:
            warns.append(_warn("pipeline_schedule", target, "the DualPipeV schedule (exported as 1F1B)"))
    sets_vpp = "--pipeline-model-parallel-layout" in layout_args  # Megatron-LM takes vpp from the layout
    if _chunks_per_stage(s) > 1 and not sets_vpp:
        if model.num_layers % (s.pp * s.vpp) == 0 and not layout_args:
            args += ["--num-layers-per-virtual-pipeline-stage", str(model.num_layers // (s.pp * s.vpp))]
        else:
            args += ["--num-virtual-stages-per-pipeline-rank", str(s.vpp)]
    return args + layout_args


def _takes_layer_layout(run: RunOptions, target: str) -> bool:
    """Whether `target` at the run's release takes `--pipeline-model-parallel-layout` (Framework.layer_layout:
    Megatron-Core from 0.13; MindSpeed's Megatron-Core 0.12 predates it)."""
    if target != "megatron":
        return False
    return (framework_of(run) if run.framework == "megatron" else FRAMEWORKS["megatron"]).layer_layout


def _priced_split(s: Strategy, model: ModelSpec, run: RunOptions, target: str, warns: list[Diagnostic]) -> list[str]:
    """Where the files state no layout and the split the plan was priced with is not Megatron-LM's even one
    (layers that do not divide by pp·vpp, which it refuses to guess, the extra layers on chunks 1, 2, …; or the
    pricing stack's own split, torchtitan's, where its accounting does not divide): that split, written as
    `--pipeline-model-parallel-layout` for a Megatron-Core that takes one (Framework.layer_layout, 0.13 on), or
    for MindSpeed-LLM without vpp as its `--num-layer-list` (MS-NUMLAYERLIST), so the exported plan is the priced
    one; elsewhere HP753 says what to set."""
    v = _chunks_per_stage(s)
    own = effective_layout(run)
    if s.pp <= 1 or s.pipeline_schedule == "dualpipev" or run.pipeline_layout.stated \
            or (model.num_layers % (s.pp * v) == 0 and not own.stated):
        return []
    chunks, _ = layout_or_default(model.num_layers, model.mtp_depth, s.pp, v, own)
    args = _split_args(chunks, model, run, target)
    if args is None:
        split = f"{s.pp}×{v} chunks" if v > 1 else f"{s.pp} stages"
        why = (f"{model.num_layers} layers do not split evenly into {split}" if model.num_layers % (s.pp * v) else
               f"the plan was priced with {run.framework}'s split over {split}, "
               f"{chunks.sum(axis=1).tolist()} layers per stage")
        pad = (", or pad the count with --noop-layers so that it divides (--num-layer-list does not run with "
               "vpp)") if target == "mindspeed" else ""
        warns.append(_warn("pipeline layout", target, f"{why}; set --decoder-first-pipeline-num-layers / "
                           "--decoder-last-pipeline-num-layers (or --account-for-embedding-in-pipeline-split "
                           f"--account-for-loss-in-pipeline-split) to the split you want{pad}"))
        return []
    return args


def _split_args(chunks: Any, model: ModelSpec, run: RunOptions, target: str) -> list[str] | None:
    """A split of the decoder layers into (pp, v) chunks as the target's flags: MindSpeed-LLM's
    `--num-layer-list` with each stage's layers (its dynamic pipeline, MS-NUMLAYERLIST: no vpp), or Megatron-LM's
    `--pipeline-model-parallel-layout` where its release takes one (Framework.layer_layout); None where the
    target has no flag for it."""
    v = chunks.shape[1]
    if target == "mindspeed" and v == 1:
        return ["--num-layer-list", ",".join(str(int(n)) for n in chunks.sum(axis=1))]
    if not _takes_layer_layout(run, target):
        return None
    order = chunks.T.reshape(-1).tolist()  # model order: chunk j = c·pp + i
    last = len(order) - 1
    listed = tuple("E" * (j == 0) + "t" * int(n) + ("m" * model.mtp_depth + "L") * (j == last)
                   for j, n in enumerate(order))
    return ["--pipeline-model-parallel-layout", layout_text(listed)]


def _megatron_recompute(s: Strategy, run: RunOptions, target: str, warns: list[Diagnostic]) -> list[str]:
    mode = s.recompute.mode
    if mode == "full":
        return ["--recompute-granularity", "full", "--recompute-method", "uniform", "--recompute-num-layers", "1"]
    if mode == "selective":
        return ["--recompute-granularity", "selective", *_recompute_modules(run, target, warns)]
    return []


def _dp_sharding_args(s: Strategy, model: ModelSpec, run: RunOptions, target: str,
                      warns: list[Diagnostic]) -> list[str]:
    """How the data-parallel group shards (engine.catalog.frameworks.StackSpace): Megatron-FSDP
    (`--use-megatron-fsdp`, Megatron-LM) or MindSpeed's FSDP2 route (`--use-torch-fsdp2` with its
    fsdp2_config.yaml: no distributed optimizer, untied embeddings, `--ckpt-format torch_dist`), over the whole
    dp·cp and without pp; else the distributed optimizer (ZeRO-1) over its shard; and the data-parallel overlaps."""
    dpcp = s.dp * s.cp
    args: list[str] = []
    if s.dp_shard > 1:
        if s.dp_shard != dpcp or s.pp > 1:
            warns.append(_warn("dp_shard", target, f"FSDP over {s.dp_shard} of the {dpcp} data-parallel ranks"
                               + (f" with pp {s.pp}" if s.pp > 1 else "") + f": {target}'s FSDP shards over the "
                               "whole data-parallel group and does not pipeline; this plan cannot run there"))
        if target == "mindspeed":
            args += ["--use-torch-fsdp2", "--fsdp2-config-path", "fsdp2_config.yaml", "--ckpt-format", "torch_dist",
                     "--untie-embeddings-and-output-weights"]
            if model.tie_embeddings:
                warns.append(_warn("tie_embeddings", target, "MindSpeed's FSDP2 route needs untied embeddings"))
        else:
            strategy = "optim_grads_params" if run.reshard_after_forward else "optim_grads"
            args += ["--use-megatron-fsdp", "--data-parallel-sharding-strategy", strategy,
                     "--ckpt-format", "fsdp_dtensor"]
    elif s.optimizer_shard > 1:
        args.append("--use-distributed-optimizer")
        if dpcp // s.optimizer_shard > 1:
            args += ["--num-distributed-optimizer-instances", str(dpcp // s.optimizer_shard)]
    grad_overlap, gather_overlap = _target_dp_overlaps(run, target)
    if dpcp > 1 and not (target == "mindspeed" and s.dp_shard > 1) and grad_overlap:
        args.append("--overlap-grad-reduce")
        if gather_overlap and (s.optimizer_shard > 1 or s.dp_shard > 1):
            args.append("--overlap-param-gather")
    return args


def _fsdp2_config(s: Strategy, run: RunOptions) -> list[str]:
    """MindSpeed's fsdp2_config.yaml for its FSDP2 route (MindSpeed docs features/fsdp2.md): the shard group,
    resharding, dtypes, and the recompute the plan priced as its `recompute_modules` (Megatron's --recompute-*
    flags are refused on that route)."""
    out = ["", "# fsdp2_config.yaml (--fsdp2-config-path)", f"sharding_size: {s.dp_shard}",
           f"reshard_after_forward: {str(run.reshard_after_forward).lower()}", "param_dtype: bf16",
           f"reduce_dtype: {'bf16' if run.grad_bytes == 2 else 'fp32'}"]
    if s.recompute.mode != "off":
        out.append("recompute_modules: [megatron.core.transformer.transformer_layer.TransformerLayer]")
    return out


def _tp_comm_overlap_args(run: RunOptions, target: str, device: DeviceSpec | None, warns: list[Diagnostic]
                          ) -> list[str]:
    """The TP comm-GEMM overlap's argument, or none with a warning on a device where the target's option does
    not run (Framework.tp_comm_overlap_not_on: MindSpeed's MC2 on A3, [MS-MC2]); the plan was priced without it."""
    fw = FRAMEWORKS[target]
    if device is not None and not fw.tp_comm_overlap_on(device):
        priced = framework_of(run)
        how = ("priced without it" if priced.name == target or not priced.tp_comm_overlap_on(device) else
               f"the plan was priced with {priced.name}'s overlap, so this launch line runs slower than its price")
        warns.append(Diagnostic("HP753", f"tp_comm_overlap: {target}'s {fw.tp_comm_overlap_name} does not run on "
                                f"{device.name}; left out of the arguments ({how})", path="tp_comm_overlap"))
        return []
    return ["--use-ascend-mc2" if target == "mindspeed" else "--tp-comm-overlap"]


def _fp8_args(run: RunOptions, target: str, device: DeviceSpec | None, warns: list[Diagnostic]) -> list[str]:
    """The FP8 recipe priced (engine.cost.fp8) as Megatron-LM's `--fp8-format hybrid --fp8-recipe R`."""
    from engine.cost.fp8 import recipe_name, recipe_of

    if not run.fp8:
        return []
    if target == "mindspeed" or (device is not None and recipe_of(run, device) is None):
        warns.append(_warn("fp8", target, f"FP8 ({recipe_name(run)}): not run on this device, priced in BF16"))
        return []
    # The FP8 weights as the parameter (estimator.fp8_param_gather): priced as 1-byte weights and gathers
    # (engine.cost.fp8), so the flag goes with the recipe.
    gather = ["--fp8-param-gather"] if run.fp8_param_gather else []
    return ["--fp8-format", "hybrid", "--fp8-recipe", recipe_name(run), *gather]


def _moe_args(model: ModelSpec, run: RunOptions, target: str, warns: list[Diagnostic],
              dualpipev: bool = False) -> list[str]:
    """The MoE path priced: grouped expert GEMMs, the dispatcher (all-to-all, all-gather, or DeepEP through
    Megatron-Core's flex dispatcher), and the expert-parallel overlaps the files state (MCORE-MOE; MindSpeed's own names; under
    DualPipeV MindSpeed's cross-micro-batch `--moe-fb-overlap`, [MS-DUALPIPEV])."""
    if not model.is_moe:
        return []
    args = ["--moe-grouped-gemm"]
    if run.moe_dispatcher == "deepep" and target == "megatron":
        args += ["--moe-token-dispatcher-type", "flex", "--moe-flex-dispatcher-backend", "deepep"]
    elif run.moe_dispatcher == "allgather":  # Megatron-Core's and MindSpeed's all-gather dispatcher
        args += ["--moe-token-dispatcher-type", "allgather"]
    else:
        args += ["--moe-token-dispatcher-type", "alltoall"]
        if run.moe_dispatcher == "deepep":
            warns.append(_warn("moe_dispatcher", target, "DeepEP dispatch (exported as the all-to-all dispatcher)"))
    args += _moe_routing_args(model, run, target, warns)
    if run.moe_dispatcher == "allgather" and (run.moe_shared_expert_overlap or run.moe_a2a_overlap):
        # Megatron-Core refuses both overlaps with the all-gather dispatcher (HP530; priced without them)
        warns.append(Diagnostic("HP753", "moe_a2a_overlap / moe_shared_expert_overlap: not exported with the "
                                "all-gather dispatcher (Megatron-Core refuses both with it; the price left them out)",
                                path="moe_a2a_overlap"))
        return args
    if run.moe_shared_expert_overlap and model.num_shared_experts:
        args.append("--moe-shared-expert-overlap")
    if run.moe_a2a_overlap:
        args += ((["--moe-fb-overlap"] if dualpipev else ["--moe-alltoall-overlap-comm"]) if target == "mindspeed"
                 else ["--overlap-moe-expert-parallel-comm", "--delay-wgrad-compute"])
    return args


def _moe_routing_args(model: ModelSpec, run: RunOptions, target: str, warns: list[Diagnostic]) -> list[str]:
    """The routing the price assumed: a stated capacity factor is the token-drop path, experts padded to their
    capacity (`--moe-expert-capacity-factor F --moe-pad-expert-input-to-capacity`); the forced balance of a
    benchmark run (`--moe-router-force-load-balancing`, Megatron-Core only: HP753 for MindSpeed-LLM). Each
    moves the busiest rank's load, so each moves the step (engine.cost.communication)."""
    args: list[str] = []
    if model.token_drop:
        args += ["--moe-expert-capacity-factor", f"{model.capacity_factor:g}", "--moe-pad-expert-input-to-capacity"]
    if run.moe_router_force_load_balancing and not model.token_drop:
        if target == "megatron":
            args.append("--moe-router-force-load-balancing")
        else:
            warns.append(_warn("moe_router_force_load_balancing", target, "the forced expert balance the price "
                               "assumed (a benchmark switch)"))
    return args


def _offload_args(s: Strategy, run: RunOptions, target: str, warns: list[Diagnostic]) -> list[str]:
    """Activation offload of whole layers as Megatron-Core's `--cpu-offloading-num-layers` (its
    TransformerConfig refuses it with pipeline parallelism or recompute, MLM-ARGS core_v0.16.0 to core_v0.19.0), and MindSpeed's
    `--swap-attention` where the price assumed it (engine.cost.swap; other stacks were priced without it, HP533)."""
    swap = ["--swap-attention"] if run.swap_attention and target == "mindspeed" else []
    if not s.recompute.offload:
        return swap
    layers = sum(b - a + 1 for a, b in s.recompute.offload)
    if target == "megatron" and s.pp == 1 and s.recompute.mode == "off" and not s.recompute.layers:
        return ["--cpu-offloading-num-layers", str(layers)]
    warns.append(Diagnostic("HP753", f"recompute.offload: {target} cannot offload these {layers} layers with this plan "
                            "(Megatron-Core's CPU offloading runs without pipeline parallelism and recompute; "
                            "MindSpeed has no layer offload): exported without it, the price assumed it",
                            path="recompute.offload"))
    return []


def _fused_args(target: str) -> list[str]:
    """The fused kernels the price assumes (Framework.fused_elementwise): MindSpeed-LLM's flags for them, as its
    scripts pass them ([CAL] §10, MS-LLM); TransformerEngine fuses them by default under Megatron-LM."""
    if target != "mindspeed":
        return []
    return ["--use-flash-attn", "--use-fused-rmsnorm", "--use-fused-swiglu", "--use-fused-rotary-pos-emb"]


def _target_dp_overlaps(run: RunOptions, target: str) -> tuple[bool, bool]:
    """The data-parallel overlaps the plan was priced with: as stated, else the target framework's usual setting
    (Framework.dp_overlaps: MindSpeed-LLM's scripts rarely overlap the weight all-gather)."""
    from engine.catalog.frameworks import FRAMEWORKS

    return FRAMEWORKS[target].dp_overlaps(run)


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


def _master_weight_warnings(run: RunOptions, target: str) -> list[Diagnostic]:
    """HP753 where the plan was priced without an fp32 master copy of the weights (estimator.master_weights false:
    pure 16-bit training), which none of the targets' flags turn off: Megatron's optimizer and torchtitan's FSDP2
    mixed precision keep one, so the run holds more than priced."""
    if run.master_weights:
        return []
    return [_warn("master_weights", target, "training without an fp32 master copy of the weights, as priced "
                  "(the stack keeps one: the run holds 4 bytes a parameter more, sharded as the optimizer)")]


def _torchtitan_local_batch(s: Strategy) -> int:
    """torchtitan's `training.local_batch_size` for the plan: its accumulation steps are global / (local · dp)
    ([TT-GRADACC]) and a pipeline splits the local batch into micro-batches of `pipeline_parallel_microbatch_size`.
    So without a pipeline the local batch is one micro-batch (the steps accumulate the plan's micro-batches);
    with one it holds them all (one step, the schedule's micro-batches)."""
    return s.micro_batch_size * (s.micro_batch_num if s.pp > 1 else 1)


def _torchtitan_unexported(model: ModelSpec, run: RunOptions) -> list[Diagnostic]:
    """HP753 for what the price assumed and the TOML fragment does not write: the FP8 recipe (torchao's float8
    converter, whose section and keys changed across torchtitan releases: set it in the job config), a stated
    capacity factor (torchtitan's MoE is dropless) and the forced expert balance of a benchmark run; torch.compile
    (its keys changed across releases) and 16-bit Adam moments (no such option)."""
    target = "torchtitan"
    out = []
    if run.compile:
        needs = "; the async TP written here needs it" if run.tp_comm_overlap else ""
        out.append(_warn("compile", target, "torch.compile of the model, as priced (its section and keys changed "
                         f"across torchtitan releases: `training.compile`, later `[compile] enable`){needs}"))
    if run.optimizer_state_bytes == 2:
        out.append(_warn("optimizer_state_dtype", target, "16-bit Adam moments, as priced"))
    if run.fp8:
        gather = " with its weights all-gathered in FP8" if run.fp8_param_gather else ""
        out.append(_warn("fp8", target, f"FP8 linear layers{gather} (torchao's float8 converter: set it in the job "
                         "config's model converters for this torchtitan release)"))
    if model.token_drop:
        out.append(_warn("capacity_factor", target, f"the token-drop path at capacity factor {model.capacity_factor:g} "
                         "(torchtitan's MoE is dropless)"))
    elif run.moe_router_force_load_balancing and model.is_moe:
        out.append(_warn("moe_router_force_load_balancing", target, "the forced expert balance the price assumed"))
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
    if s.pipeline_schedule == "dualpipev" and s.pp > 1:
        warns.append(_warn("pipeline_schedule", target, "the DualPipeV schedule (exported as 1F1B)"))
    warns += _torchtitan_unexported(model, run) + _master_weight_warnings(run, target)
    interleaved = _chunks_per_stage(s) > 1
    mode = {"off": "none", "selective": "selective", "full": "full"}[s.recompute.mode]
    lines = [f"# torchtitan: world size {s.world_size}", "[training]",
             f"local_batch_size = {_torchtitan_local_batch(s)}",
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
    if lay.offset or lay.first_stage_layers or lay.last_stage_layers or lay.layer_layout:
        warns.append(_warn("pipeline layout", "torchtitan", "per-stage layer counts (write them as "
                           "module_fqns_per_model_part)"))
        return []
    e, lo = int(lay.embedding_in_split), int(lay.loss_in_split)
    out = [f"pipeline_parallel_first_stage_less_layers = {e}", f"pipeline_parallel_last_stage_less_layers = {lo}"]
    chunks = s.pp * (s.vpp if interleaved else 1)
    total = model.num_layers + e + lo
    if interleaved and s.vpp > 2:  # its default is 2 stages per rank; another count needs a layers_per_stage n
        per = -(-total // chunks)  # the n with ⌈total / n⌉ = pp·vpp where one exists (runs_virtual_stages)
        if not FRAMEWORKS["torchtitan"].space.runs_virtual_stages(total, s.pp, s.vpp):
            warns.append(_warn("vpp", "torchtitan", f"{chunks} model chunks over {total} layers"
                               f"{' with the embedding and output' if e + lo else ''}: no "
                               "pipeline_parallel_layers_per_stage gives that many stages (set "
                               "module_fqns_per_model_part to the split priced)"))
            return out
        out.append(f"pipeline_parallel_layers_per_stage = {per}")
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
    if "--pipeline-model-parallel-layout" in val:  # Megatron-LM takes vpp from the layout's chunks
        vpp = len(parse_layout_text(val["--pipeline-model-parallel-layout"])) // pp
    opt = 1
    if "--use-distributed-optimizer" in flags:
        opt = dp * cp // int(val.get("--num-distributed-optimizer-instances", 1))
    mode = val.get("--recompute-granularity", "off")
    fsdp = "--use-torch-fsdp2" in flags or "--use-megatron-fsdp" in flags
    return Strategy(dp=dp, dp_shard=dp * cp if fsdp else 1, tp=tp, pp=pp, cp=cp,
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
    per = par.get("pipeline_parallel_layers_per_stage")  # unset: 2 stages per rank (pipeline_llm)
    vpp = (-(-(num_layers + weights) // per) // pp if per else 2) if interleaved else 1
    fs = shard * cp if shard > 1 else 1
    mode = {"none": "off", "selective": "selective", "full": "full"}[ac.get("mode", "none")]
    local = tr.get("local_batch_size", mbs)
    steps = max(tr.get("global_batch_size", local * dp) // (local * dp), 1)  # accumulation steps ([TT-GRADACC])
    mbs = mbs if pp > 1 else local  # without a pipeline the local batch is one micro-batch
    s = Strategy(dp=dp, dp_shard=fs, tp=tp, pp=pp, cp=cp, ep=par.get("expert_parallel_degree", 1), vpp=vpp,
                 micro_batch_size=mbs, micro_batch_num=local // mbs * steps,
                 sequence_parallel=tp > 1, recompute=RecomputePlan(mode=mode),  # type: ignore[arg-type]
                 pipeline_schedule="interleaved" if interleaved else "1F1B")
    return replace(s, optimizer_shard=1)
