"""Checks a stated strategy against its model and cluster before pricing (HP5xx), and `estimate_config`.

A strategy that breaks one of these rules cannot run, so it gets diagnostics instead of a number
(docs/formats.md §2 rules; [HP] §5.6 validity checks; Megatron's interleaving rule).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from operator import attrgetter

from engine import degree_facts as facts
from engine.catalog.frameworks import (
    FRAMEWORKS,
    Framework,
    effective_policy,
    framework_of,
    priced_modules,
    taken_layout,
)
from engine.config.stated_layout import noop_fix, noop_pad
from engine.config.types import Config, Location
from engine.cost.estimate import estimate
from engine.cost.layout import effective_layout
from engine.cost.release_spread import beyond_band, release_prices, spread_message
from engine.diagnostics import Diagnostic, Severity, has_errors
from engine.facts import (
    CP_SEQUENCE,
    EP_DENSE,
    EP_EXPERTS,
    EP_RANKS,
    FSDP_SHARD,
    MICRO_BATCHES,
    OPTIMIZER_SHARD,
    PP_LAYERS,
    TP_HEADS,
    WORLD_SIZE,
)
from engine.integers import listed_divisors
from engine.positions import DOCUMENT_START
from engine.results import Estimate, ReleaseSpread
from engine.specs import ClusterSpec, ModelSpec, PipelineLayout, RunOptions, Strategy, noop_text

# Where each strategy field may be written, most specific first (search config, then train.yaml forms).
FIELD_PATHS: dict[str, tuple[str, ...]] = {
    "dp": ("parallelism.dp", "train.accelerator.dp_replicate"),
    "fsdp": ("parallelism.fsdp", "fsdp_config.dp_shard_size", "train.accelerator.dp_shard"),
    "tp": ("parallelism.tp", "accelerator.tp_size", "train.accelerator.tp_degree"),
    "pp": ("parallelism.pp", "accelerator.pp_size", "train.accelerator.pipeline_parallel_degree"),
    "cp": ("parallelism.cp", "accelerator.cp_size", "train.accelerator.context_parallel_degree"),
    "ep": ("parallelism.ep", "accelerator.ep_size", "train.accelerator.expert_parallel_degree"),
    "etp": ("parallelism.etp", "accelerator.expert_tensor_parallel_degree",
            "train.accelerator.expert_tensor_parallel_degree"),
    "vpp": ("parallelism.vpp", "pp_config.pp_interleave_num", "accelerator.pp_interleave_num"),
    "micro_batch_size": ("parallelism.micro_batch_size", "training.micro_batch_size", "train.micro_batch_size"),
    "micro_batch_num": ("parallelism.micro_batch_num", "constraint.global_batch_size",
                        "training.global_batch_size", "train.global_batch_size"),
    "sequence_parallel": ("parallelism.sequence_parallel", "accelerator.sequence_parallel",
                          "model.use_seq_parallel"),
    "optimizer_shard": ("accelerator.optimizer_weight_shard_size", "model.optimizer_weight_shard_size"),
    "schedule": ("pp_config.pipeline_schedule", "accelerator.pipeline_scheduler"),
    "heads": ("model.num_attention_heads", "model.config_overrides.num_attention_heads"),
    "world": ("cluster.num_nodes", "context.device_num", "cluster.cards_per_node"),
    "seq_len": ("model.max_position_embeddings", "dataset.data_transform.max_seq_len"),
    "memory": ("constraint.memory_limit_gb", "context.max_device_memory", "cluster.device_memory_gb"),
    "framework": ("estimator.framework",),
    "framework_version": ("estimator.framework_version", "estimator.framework"),
    "fp8": ("estimator.fp8", "accelerator.fp8"),
    "selective_policy": ("selective_policy", "activation_checkpoint.selective_policy"),
    "recompute_modules": ("recompute_modules", "activation_checkpoint.recompute_modules"),
    "tp_comm_overlap": ("tp_comm_overlap", "accelerator.tp_comm_overlap"),
    "moe_a2a_overlap": ("moe_a2a_overlap", "accelerator.moe_a2a_overlap"),
    "moe_shared_expert_overlap": ("moe_shared_expert_overlap", "accelerator.moe_shared_expert_overlap"),
    "swap_attention": ("swap_attention", "accelerator.swap_attention", "activation_swap"),
    "cpu_offload_layers": ("cpu_offloading_num_layers",),
    "layer_layout": ("pp_config.pipeline_model_parallel_layout", "accelerator.pipeline_model_parallel_layout"),
    "noop_layers": ("pp_config.noop_layers", "accelerator.noop_layers"),
    "moe_dispatcher": ("estimator.moe_dispatcher",),
    "offload": ("offload",),
    "cp_algo": ("estimator.cp_algo", "accelerator.context_parallel_algo", "plan_overrides.inner_wrapper",
                "dataloader.get_batch.cp_algorithm"),
}
# The stated strategy's keys, in the order a budget finding without a budget key is anchored on them.
_STATED_ANCHORS = ("tp", "pp", "fsdp", "cp", "ep", "micro_batch_size")
_DIM_NAMES = {"dp", "fsdp", "tp", "pp", "cp", "ep", "etp", "vpp", "micro_batch_size", "micro_batch_num",
              "sequence_parallel"}


@dataclass(frozen=True, slots=True)
class Problem:
    """An unpositioned finding: code, message, and the strategy field it concerns."""

    code: str
    message: str
    field: str
    fact: str = ""  # the fact's key (engine.facts) when another stage states it too: the merge reads it
    # MindSpeed's no-op layers that would make the split run (HP505 under DualPipeV): a search config's quick fix
    # writes them (estimate_config turns them into `set_at`, docs/settings.md)
    noop_pad: tuple[int, ...] = ()
    # The value a quick fix sets at `field` (`nearest_valid`), where one value is the fix: the nearest the rule and
    # the cluster both take.
    nearest: int | None = None


def check_strategy(model: ModelSpec, cluster: ClusterSpec | None, s: Strategy,
                   layout: PipelineLayout | None = None) -> list[Problem]:
    """Every reason the strategy cannot run on this model and cluster (empty list = valid); with a stated
    pipeline layout, the embedding and loss it counts in the split count as chunk slots (HP505). A layout the
    framework refuses for this pp·vpp is the reader's finding (HP422, engine.validate.pipeline): pricing never
    fails on one (engine.cost.layout.layout_or_default prices the framework's even split)."""
    layout = layout or PipelineLayout()
    out: list[Problem] = []
    for name, v in (("dp", s.dp), ("fsdp", s.dp_shard), ("tp", s.tp), ("pp", s.pp), ("cp", s.cp), ("ep", s.ep),
                    ("etp", s.etp), ("vpp", s.vpp), ("micro_batch_size", s.micro_batch_size),
                    ("micro_batch_num", s.micro_batch_num), ("optimizer_shard", s.optimizer_shard)):
        if v < 1:
            out.append(Problem("HP511", f"{name} is {v}; every degree must be at least 1", name))
    if out:
        return out
    if cluster is not None and facts.world_size(cluster.world_size, s.tp, s.pp, s.cp, s.dp) is not None:
        out.append(Problem(
            "HP502", f"dp·tp·pp·cp = {s.dp}·{s.tp}·{s.pp}·{s.cp} = {s.world_size}, but the cluster has "
            f"{cluster.world_size} devices ({cluster.num_nodes} nodes × {cluster.cards_per_node})", "world",
            WORLD_SIZE))
    out += _head_problems(model, s)
    out += _expert_problems(model, s)
    out += _pipeline_problems(model, s, layout)
    dom = s.dp * s.cp
    if facts.fsdp_shard(s.dp_shard, dom) is not None:
        out.append(Problem("HP508", f"fsdp {s.dp_shard} does not divide dp·cp = {dom}", "fsdp", FSDP_SHARD))
    if facts.optimizer_shard(s.optimizer_shard, dom) is not None:
        out.append(Problem("HP508", f"optimizer shard {s.optimizer_shard} does not divide dp·cp = {dom}",
                           "optimizer_shard", OPTIMIZER_SHARD))
    if facts.cp_sequence(s.cp, model.seq_len, chunks_per_rank=1) is not None:
        out.append(Problem("HP509", f"cp {s.cp} does not divide the sequence length {model.seq_len}", "cp",
                           CP_SEQUENCE))
    if s.sequence_parallel and s.tp == 1:
        out.append(Problem("HP510", "sequence_parallel has no effect with tp 1", "sequence_parallel"))
    return out


def _head_problems(model: ModelSpec, s: Strategy) -> list[Problem]:
    """HP503: tp against the head counts this model prices by (engine.degree_facts.tp_width)."""
    kv = model.kv_heads_eff
    bad = facts.tp_width(s.tp, (("attention heads", model.heads), ("key/value heads", kv)))
    if bad is None:
        return []
    ok = listed_divisors(math.gcd(model.heads, kv))  # the common divisors, in sqrt(gcd) steps (bounded)
    return [Problem("HP503", f"tp {s.tp} does not divide the {bad.bound} {bad.label}; tp can be {ok[-6:]}", "tp",
                    TP_HEADS)]


def _expert_problems(model: ModelSpec, s: Strategy) -> list[Problem]:
    """HP510 / HP504 for ep on a dense model, ep against the experts and the ranks it borrows (etp against tp is
    the stack's rule: _etp_problems)."""
    out: list[Problem] = []
    experts = facts.ep_experts(model, s.ep)
    if experts is not None and experts.fact == EP_DENSE:
        out.append(Problem("HP510", f"ep {s.ep} has no effect: {model.name} has no routed experts", "ep", EP_DENSE))
    elif experts is not None:
        out.append(Problem("HP504", f"ep {s.ep} does not divide the {model.num_experts} experts", "ep", EP_EXPERTS))
    elif model.is_moe and facts.ep_ranks(s.ep, s.etp, s.dp * s.cp * s.tp) is not None:
        out.append(Problem("HP504", f"ep·etp = {s.ep * s.etp} does not divide dp·cp·tp = "
                           f"{s.dp * s.cp * s.tp}, the devices expert parallelism borrows", "ep", EP_RANKS))
    return out


def _pipeline_problems(model: ModelSpec, s: Strategy, layout: PipelineLayout) -> list[Problem]:
    """HP505 (chunks against layers), HP506 (micro-batches against stages), HP510 (the schedule); the stack's
    own micro-batch grouping is check_framework's (HP507)."""
    out: list[Problem] = []
    interleaved = s.pipeline_schedule == "interleaved" and s.vpp > 1
    slots = model.num_layers + int(layout.embedding_in_split) + int(layout.loss_in_split) + len(layout.noop_layers)
    over = facts.pp_layers(s.pp, s.vpp if interleaved else 1, slots)
    if over is not None:
        counted = f"{model.num_layers} layers" + (f" (+ the embedding, loss and no-op layers counted in the split: "
                                                  f"{slots})" if slots > model.num_layers else "")
        out.append(Problem("HP505", f"pp·vpp = {over.want} chunks for {counted}: every chunk needs at least one "
                           "layer", "pp", PP_LAYERS))
    if facts.micro_batches(s.micro_batch_num, s.pp) is not None:
        out.append(Problem("HP506", f"{s.micro_batch_num} micro-batches for {s.pp} pipeline stages: the "
                           "pipeline never fills (micro_batch_num ≥ pp)", "micro_batch_num", MICRO_BATCHES))
    out += _dualpipev_problems(model, s, layout)
    if s.vpp > 1 and s.pipeline_schedule != "interleaved":
        out.append(Problem("HP510", f"vpp {s.vpp} has no effect with the {s.pipeline_schedule} schedule (priced "
                           "without virtual chunks); set pipeline_schedule: interleaved", "vpp"))
    if s.pp == 1 and s.vpp > 1 and s.pipeline_schedule == "interleaved":
        out.append(Problem("HP510", "interleaving has no effect without pipeline parallelism", "vpp"))
    return out


def release_problems(fw: Framework, run: RunOptions) -> list[Problem]:
    """HP535: a stated release the framework's catalog does not know (priced as its current release), and the
    features the plan states that the stated release does not have yet (engine.catalog.frameworks.Releases;
    the overlap and recompute modules it lacks get HP533 / HP531 as for any framework)."""
    rel = fw.releases
    if rel is None or not run.framework_version:
        return []
    if rel.normalise(run.framework_version) is None:
        return [Problem("HP535", f"{fw.name} has no release {run.framework_version!r} here ({rel.label} "
                        f"{', '.join(rel.versions)}; quote it, 0.10 is not 0.1): priced as the current "
                        f"{rel.current}", "framework_version")]
    out: list[Problem] = []
    if run.moe_dispatcher == "deepep" and not fw.deepep:
        since = _since(fw, "deepep")
        out.append(Problem("HP535", f"{rel.label} {fw.release} has no DeepEP dispatch (from {since}): priced "
                           "with the all-to-all dispatcher", "framework_version"))
    return out


def _fix_data(config: Config, p: Problem) -> dict[str, object] | None:
    """A problem's quick-fix data where the file can take it: its `nearest` value as `nearest_valid` at its own key;
    the no-op layers of HP505 as `set_at` pp_config.noop_layers, in a search config whose stack pads with them (a
    train.yaml's trainer refuses keys it does not read)."""
    if p.nearest is not None:
        return {"nearest_valid": p.nearest}
    if not p.noop_pad or config.kind != "search" or not framework_of(config.run).noop_layers:
        return None
    return noop_fix(p.noop_pad)


def _dualpipev_problems(model: ModelSpec, s: Strategy, layout: PipelineLayout) -> list[Problem]:
    """DualPipeV's own rules ([DUALPIPE] dualpipev.py asserts micro-batches ≥ 2 × ranks; [MS-DUALPIPEV]: the
    layers, with the no-op layers MindSpeed pads them with (MS-NOOP), a multiple of 2·pp, the V's 2·pp stages of
    equal layers)."""
    if s.pipeline_schedule != "dualpipev":
        return []
    if s.pp == 1:
        return [Problem("HP510", "DualPipeV has no effect without pipeline parallelism", "schedule")]
    out: list[Problem] = []
    slots = model.num_layers + len(layout.noop_layers)
    if slots % (2 * s.pp):
        counted = f"{model.num_layers} layers" + (f" + {len(layout.noop_layers)} no-op = {slots}" if slots >
                                                  model.num_layers else "")
        pad = () if layout.noop_layers else noop_pad(slots, 2 * s.pp)
        hint = f" (MindSpeed-LLM pads them with no-op layers: noop_layers \"{noop_text(pad)}\")" if pad else ""
        out.append(Problem("HP505", f"DualPipeV cuts the model into 2·pp = {2 * s.pp} stages of equal layers; "
                           f"{counted} is not a multiple{hint}", "pp", noop_pad=pad))
    if s.micro_batch_num < 2 * s.pp:
        out.append(Problem("HP506", f"DualPipeV needs at least 2·pp = {2 * s.pp} micro-batches, got "
                           f"{s.micro_batch_num}", "micro_batch_num"))
    return out


def check_framework(config: Config, s: Strategy) -> list[Problem]:
    """What the framework that runs the plan cannot execute or does not offer (engine.catalog.frameworks):
    a pipeline schedule its trainer does not run (HP530), a selective policy it does not offer
    (HP531, priced with its own), FP8 on a device without FP8 GEMMs (HP532, priced in BF16), an expert-parallel
    overlap the stack does not offer (HP533, priced without it: engine.cost.communication._ep_comm)."""
    fw = framework_of(config.run)
    out: list[Problem] = []
    if s.pp > 1 and s.pipeline_schedule not in fw.schedules:
        out.append(Problem("HP530", f"{fw.qualified} does not run the {s.pipeline_schedule} schedule "
                           f"(it runs {', '.join(fw.schedules)})", "schedule"))
    elif s.pp > 1 and s.pipeline_schedule == "dualpipev" and s.cp > 1 and not fw.space.dualpipev_with_cp:
        out.append(Problem("HP530", f"{fw.name} does not run DualPipeV with context parallelism (cp {s.cp}): "
                           "set cp 1 or another schedule", "schedule"))
    out += _interleave_problems(fw, s)
    out += _stack_fsdp_problems(fw, s) + _layer_offload_problems(config, fw, s) + release_problems(fw, config.run)
    out += _hybrid_split_problems(config, fw, s) + _grad_accumulation_problems(fw, s) + _etp_problems(config, fw, s)
    stated_policy = config.run.selective_policy
    uses_selective = s.recompute.mode == "selective" or any(m == "selective" for *_, m in s.recompute.layers)
    if uses_selective and stated_policy not in fw.selective_policies and _locate(config, "selective_policy")[1]:
        out.append(Problem("HP531", f"{fw.qualified} offers no '{stated_policy}' selective recompute; priced with its "
                           f"own policy '{effective_policy(fw, config.run)}' ({', '.join(fw.selective_policies)})",
                           "selective_policy"))
    unoffered = [x for x in config.run.recompute_modules if x not in fw.recompute_modules and x != "auto"]
    if config.run.recompute_modules == ("auto",) and not fw.recompute_modules:
        unoffered = ["auto"]
    if uses_selective and unoffered and _locate(config, "recompute_modules")[1]:
        what = (f"no recompute module {', '.join(unoffered)}" if fw.recompute_modules
                else "no recompute by module (Megatron's --recompute-modules)")
        kept = priced_modules(fw, config.run)
        how = f"priced with {', '.join(kept)}" if kept else f"priced with its own policy '{effective_policy(fw, config.run)}'"
        out.append(Problem("HP531", f"{fw.qualified} offers {what}; {how}", "recompute_modules"))
    if config.run.fp8 and config.cluster is not None and config.cluster.device.fp8_tflops <= 0:
        out.append(Problem("HP532", f"{config.cluster.device.name} has no FP8 GEMMs; priced in BF16", "fp8"))
    elif config.run.fp8 and config.cluster is not None:
        out += _fp8_recipe_problems(config)
    wrong = stack_device_problem(config)
    return out + ([wrong] if wrong is not None else []) + _ep_overlap_problems(config)


def _interleave_problems(fw: Framework, s: Strategy) -> list[Problem]:
    """HP507 where the stack's interleaved schedule does not group the plan's micro-batches
    (StackSpace.interleave_runs: a multiple of pp on Megatron-Core, MCORE-SCHED; rounds that divide them in
    torch.distributed.pipelining, TORCH-PIPE; any count in HyperParallel's own schedule)."""
    m, pp = s.micro_batch_num, s.pp
    if not (s.pipeline_schedule == "interleaved" and s.vpp > 1 and pp > 1) or fw.space.interleave_runs(m, pp):
        return []
    if fw.space.interleave_groups == "rounds":
        rounds = max(1, m // pp)
        why = f"runs max(1, {m} // {pp}) = {rounds} rounds, which must divide the {m} micro-batches"
        ok = [k for k in range(pp, 4 * pp + 1) if fw.space.interleave_runs(k, pp)][:6]
    else:
        why = f"runs micro-batches in groups of pp = {pp}; {m} is not a multiple"
        ok = [pp * k for k in range(1, 7)]
    return [Problem("HP507", f"{fw.name}'s interleaved schedule {why} (it runs {', '.join(map(str, ok))}, ...)",
                    "micro_batch_num")]


def _hybrid_split_problems(config: Config, fw: Framework, s: Strategy) -> list[Problem]:
    """HP530 where the stack cannot split the model's hybrid pattern as the plan asks (StackSpace.hybrid_split,
    MCORE-HYBRID): virtual pipeline stages, or a pp that does not divide the layers where no first/last-stage layer
    counts are stated. Priced all the same, as the even split the cost model places."""
    model = config.model
    how = fw.space.hybrid_split(model, config.run.pipeline_layout) if model is not None else ""
    if not how or s.pp <= 1 or model is None:
        return []
    out = []
    if s.vpp > 1:
        out.append(Problem("HP530", f"{fw.name} runs a hybrid layer pattern without virtual pipeline stages (vpp "
                           f"{s.vpp}): its pattern marks no stage boundaries ('|'); set vpp 1", "vpp", nearest=1))
    if how == "even" and model.num_layers % s.pp:
        divisors = listed_divisors(model.num_layers)
        fits = [p for p in divisors if p > 1]
        # the fix keeps the plan's devices: a pp that divides the layers and the dp·pp ranks tp·cp leave
        near = min((p for p in divisors if s.dp * s.pp % p == 0), key=lambda p: (abs(p - s.pp), p), default=None)
        out.append(Problem("HP530", f"{fw.name} cuts a hybrid layer pattern into pp equal stages: pp {s.pp} does not "
                           f"divide its {model.num_layers} layers"
                           + (f" (pp {', '.join(map(str, fits[:6]))} would)" if fits else "")
                           + "; or state the first/last stages' layers", "pp", nearest=near))
    return out


def _etp_problems(config: Config, fw: Framework, s: Strategy) -> list[Problem]:
    """HP504 where the stack carves the expert TP group from the TP group (Framework.etp_fits: no MoE Parallel
    Folding) and etp does not divide tp; with folding (Megatron-Core from 0.10) any etp the ranks hold runs. The
    fix is gcd(tp, etp): it divides tp, and as a divisor of etp it keeps the expert width and ep·etp dividing."""
    if config.model is None or not config.model.is_moe or s.etp <= 1 or fw.etp_fits(s.tp, s.etp):
        return []
    return [Problem("HP504", f"etp {s.etp} does not divide tp {s.tp}: {fw.qualified} carves the expert "
                    "tensor-parallel group from the tensor-parallel one (no MoE Parallel Folding)", "etp",
                    nearest=math.gcd(s.tp, s.etp))]


def _grad_accumulation_problems(fw: Framework, s: Strategy) -> list[Problem]:
    """HP530 where the plan accumulates gradients over micro-batches without a pipeline and the stated release
    of the stack has no gradient accumulation (StackSpace.grad_accumulation: torchtitan before TT-GRADACC ran one
    local batch a step). Priced as stated; the fix makes the step one micro-batch of the whole local batch."""
    if fw.space.grad_accumulation or s.pp > 1 or s.micro_batch_num <= 1:
        return []
    whole = s.micro_batch_size * s.micro_batch_num
    return [Problem("HP530", f"{fw.qualified} accumulates no gradients: without pipeline parallelism a step is one "
                    f"local batch, not {s.micro_batch_num} micro-batches of {s.micro_batch_size} (set "
                    f"micro_batch_size {whole}, or use a release from {_since(fw, 'space.grad_accumulation')})",
                    "micro_batch_size", nearest=whole)]


def _since(fw: Framework, field: str) -> str:
    """The release a fact of `fw` holds from (ReleaseFact.since), "" where it has none."""
    rel = fw.releases
    return next((f.since for f in rel.facts if f.field == field), "") if rel is not None else ""


def _stack_fsdp_problems(fw: Framework, s: Strategy) -> list[Problem]:
    """HP530 for an FSDP the stack's launcher does not run (StackSpace.fsdp: Megatron-FSDP and MindSpeed's FSDP2
    shard over the whole dp·cp, without pp; MindSpeed's without ep): the search never offers such a plan, and a
    stated one is priced but flagged."""
    st, dom = fw.space, s.dp * s.cp
    if s.dp_shard <= 1:
        return []
    why = []
    if not st.fsdp:
        why.append("it has no FSDP")
    if st.fsdp == "whole" and s.dp_shard != dom:
        why.append(f"its FSDP shards over the whole dp·cp = {dom}, not {s.dp_shard}")
    if not st.fsdp_with_pp and s.pp > 1:
        why.append(f"its FSDP does not run with pipeline parallelism (pp {s.pp})")
    if not st.fsdp_with_ep and s.ep > 1:
        why.append(f"its FSDP route does not run with expert parallelism (ep {s.ep})")
    if not why:
        return []
    return [Problem("HP530", f"{fw.qualified} cannot run fsdp {s.dp_shard} here: " + "; ".join(why) + " (priced as "
                    "stated; its distributed optimizer shards the optimizer states over dp·cp instead)", "fsdp")]


def _offered_by(offers: Callable[[Framework], bool]) -> str:
    """The stacks that offer what a HP533 finding says the plan's stack lacks, as its message names them."""
    return ", ".join(f.name for f in FRAMEWORKS.values() if offers(f))


def search_offload_problems(config: Config) -> list[Problem]:
    """HP533 on a search where the file asks an offload the stack does not run: the search's per-layer offload
    (`offload`, [HP] §8.6) of a stack whose search does not offer it (StackSpace.offload other than "per_layer";
    the user hears what the stack runs instead), or Megatron-Core's `cpu_offloading_num_layers` on a stack
    without it (_stackless_layer_offload). Its plans are priced without it."""
    fw = framework_of(config.run)
    out = [p for p in (_stackless_layer_offload(config, fw),) if p is not None]
    if config.offload_gb_s <= 0 or fw.space.offload == "per_layer":
        return out
    offering = _offered_by(lambda f: f.space.offload == "per_layer")
    own = (" (its own offload is cpu_offloading_num_layers: the first layers' activations, with pp 1 and no "
           "recompute)" if fw.space.offload == "layers" else "")
    return [*out, Problem("HP533", f"{fw.qualified} has no per-layer offload for the search to choose (offload; "
                          f"offered by {offering}): its plans are priced without it{own}", "offload")]


def _stackless_layer_offload(config: Config, fw: Framework) -> Problem | None:
    """HP533 for `cpu_offloading_num_layers` on a stack without CPU offloading of whole layers."""
    if config.run.cpu_offload_layers <= 0 or fw.space.offload == "layers":
        return None
    offering = _offered_by(lambda f: f.space.offload == "layers")
    return Problem("HP533", f"{fw.qualified} has no CPU offloading of whole layers (cpu_offloading_num_layers; "
                   f"offered by {offering}): priced without it", "cpu_offload_layers")


def _layer_offload_problems(config: Config, fw: Framework, s: Strategy) -> list[Problem]:
    """CPU offloading of whole layers the stated plan cannot carry (StackSpace.layer_offload_refusals): HP533 on a
    stack without it, HP530 where Megatron-Core's TransformerConfig would refuse this plan; either way the plan
    is priced without it (engine.cost.offload.with_layer_offload leaves it out)."""
    n = config.run.cpu_offload_layers
    if n <= 0 or config.model is None:
        return []
    stackless = _stackless_layer_offload(config, fw)
    if stackless is not None:
        return [stackless]
    recompute = s.recompute.mode != "off" or any(m != "off" for *_, m in s.recompute.layers)
    why = fw.space.layer_offload_refusals(n, pp=s.pp, recompute=recompute, num_layers=config.model.num_layers)
    if not why:
        return []
    return [Problem("HP530", f"{fw.name} cannot offload {n} layers to the host here: its TransformerConfig refuses "
                    "CPU offloading " + "; ".join(why) + " (priced without it)", "cpu_offload_layers")]


def _fp8_recipe_problems(config: Config) -> list[Problem]:
    """HP532 for a recipe the device cannot run (MXFP8 before Blackwell): priced in BF16 (engine.cost.fp8)."""
    from engine.cost.fp8 import RECIPES, recipe_name

    assert config.cluster is not None
    recipe = RECIPES[recipe_name(config.run)]
    dev = config.cluster.device
    if recipe.generations and dev.generation not in recipe.generations:
        return [Problem("HP532", f"{dev.name} cannot run the {recipe.name} FP8 recipe (it needs "
                        f"{' or '.join(recipe.generations)}); priced in BF16", "fp8")]
    return []


def stack_device_problem(config: Config) -> Problem | None:
    """HP534: the framework does not run on the cluster's device (StackSpace.devices): Megatron-LM and
    TransformerEngine are CUDA stacks, MindSpeed is Megatron on Ascend. Why: such a plan is priced with kernels
    the device does not have (TransformerEngine's on a 910C), so the figure describes no run; the user should
    hear which stack runs there."""
    if config.cluster is None:
        return None
    fw, dev = framework_of(config.run), config.cluster.device
    allowed = fw.space.devices
    if not allowed or not dev.generation or dev.generation in allowed:
        return None
    there = [f.name for f in FRAMEWORKS.values() if f.space.devices and dev.generation in f.space.devices]
    return Problem("HP534", f"{fw.name} does not run on {dev.name} ({dev.generation}; it runs on "
                   f"{', '.join(allowed)}): priced as if it did" + (f"; on {dev.name} the stack is "
                                                                    f"{', '.join(there)} (estimator.framework)"
                                                                    if there else ""), "framework")


def _ep_overlap_problems(config: Config) -> list[Problem]:
    """HP533: a TP comm-GEMM overlap, an expert-parallel overlap, or the attention swap, stated for a stack that
    has none, or a context-parallel algorithm it does not run. Why: the cost model prices the option only where
    the framework runs it (Framework.tp_comm_overlap_name / ep_overlap / shared_expert_overlap /
    swaps_attention; StackSpace.cp_algos, the ring otherwise), so a stated option that the stack lacks silently
    changes nothing; the user should hear that the price excludes it, and which stack offers it."""
    fw = framework_of(config.run)
    out: list[Problem] = []
    for key, what, attr in (("tp_comm_overlap", "TP comm-GEMM overlap", "tp_comm_overlap_name"),
                            ("moe_a2a_overlap", "expert all-to-all overlap", "ep_overlap"),
                            ("moe_shared_expert_overlap", "shared-expert overlap", "shared_expert_overlap"),
                            ("swap_attention", "attention swap to the host", "swaps_attention")):
        if getattr(config.run, key) and not getattr(fw, attr):
            offering = _offered_by(attrgetter(attr))
            out.append(Problem("HP533", f"{fw.qualified} has no {what} ({key}; offered by {offering}): "
                               "priced without it", key))
    dev = config.cluster.device if config.cluster is not None else None
    if config.run.tp_comm_overlap and fw.tp_comm_overlap_name and dev is not None and not fw.tp_comm_overlap_on(dev):
        out.append(Problem("HP533", f"{fw.qualified}'s {fw.tp_comm_overlap_name} does not run on {dev.name} (the "
                           "stack's own notes say it is not supported there): priced without it", "tp_comm_overlap"))
    out += _allgather_problems(config, fw)
    stated = config.run.cp_algo
    if fw.space.cp_algo(stated) != stated:
        offering = _offered_by(lambda f: stated in f.space.cp_algos)
        out.append(Problem("HP533", f"{fw.qualified} has no {stated} context parallelism (cp_algo; offered by "
                           f"{offering}; it runs {', '.join(fw.space.cp_algos)}): priced as its ring", "cp_algo"))
    return out


def _allgather_problems(config: Config, fw: Framework) -> list[Problem]:
    """The all-gather token dispatcher (`moe_dispatcher: allgather`) where the stack has none (HP533, priced with
    the all-to-all), or with what Megatron-Core's TransformerConfig refuses beside it (HP530): the expert-parallel
    overlaps the stack (its release) offers, and a capacity factor (token drop)."""
    model = config.model
    if config.run.moe_dispatcher != "allgather" or model is None or not model.is_moe:
        return []
    if not fw.allgather_dispatch:
        offering = _offered_by(lambda f: f.allgather_dispatch)
        return [Problem("HP533", f"{fw.qualified} has no all-gather token dispatcher (moe_dispatcher; offered by "
                        f"{offering}): priced with the all-to-all", "moe_dispatcher")]
    # the overlaps the stack (or its release) lacks got HP533 in _ep_overlap_problems, once
    offered = {"moe_a2a_overlap": bool(fw.ep_overlap),
               "moe_shared_expert_overlap": fw.shared_expert_overlap and model.num_shared_experts > 0}
    out = [Problem("HP530", f"{fw.name} does not run {k} with the all-gather token dispatcher (its overlaps need "
                   "the all-to-all or flex dispatcher): priced without it", k)
           for k, on in offered.items() if on and getattr(config.run, k)]
    if model.token_drop:
        out.append(Problem("HP530", f"{fw.name} runs a capacity factor (token drop) only with the all-to-all "
                           "dispatchers, not the all-gather one (TransformerConfig refuses it): priced as stated",
                           "moe_dispatcher"))
    return out


def _locate(config: Config, field: str) -> tuple[str, Location | None]:
    if field in _DIM_NAMES:
        dim = config.dimensions.get(field)
        if dim is not None and dim.location is not None:
            paths = FIELD_PATHS.get(field, ())
            hit = next((p for p in paths if p in config.locations), paths[0] if paths else field)
            return hit, dim.location
    for path in FIELD_PATHS.get(field, (field,)):
        if path in config.locations:
            return path, config.locations[path]
    return (FIELD_PATHS.get(field, (field,))[0], None)


def positioned(config: Config, code: str, message: str, field: str, data: dict | None = None,
               fact: str = "") -> Diagnostic:
    """A diagnostic at the value of `field` where the config wrote it (else at the start of the file)."""
    path, loc = _locate(config, field)
    rng = loc.value if loc is not None else DOCUMENT_START
    file = loc.file if loc is not None and loc.file and loc.file != config.path else None
    return Diagnostic(code, message, rng, path, file=file, data=data or {}, fact=fact)


def marginal(d: Diagnostic, est: Estimate) -> Diagnostic:
    """HP520 for a peak over the budget whose error band still reaches below it: a warning that says the
    verdict is marginal (it may fit; measure it), not an error."""
    from dataclasses import replace

    low, _ = est.peak_memory_range_gib
    return replace(d, severity=Severity.WARNING,
                   message=d.message + f": within the memory estimate's band ({est.memory_band}, down to "
                   f"{low:.1f} GiB) the verdict is marginal (it may fit; check the measured peak)",
                   data={**d.data, "verdict": "marginal"})


def _runs_as_stated(config: Config, s: Strategy, found: list[Problem]) -> Callable[[RunOptions], bool]:
    """Whether a release of the plan's stack runs what the files state: it raises no framework finding (HP530,
    HP531, HP533, HP535: an option it lacks, priced without it) beyond `found`, the current release's
    check_framework, and takes the stated pipeline layout as the current one does (a per-chunk layout, no-op
    layers: HP533 from the validation, engine.validate.pipeline)."""
    current = {(p.code, p.field) for p in found}
    layout = taken_layout(config.run)

    def runs(run: RunOptions) -> bool:
        from dataclasses import replace

        return (taken_layout(run) == layout
                and {(p.code, p.field) for p in check_framework(replace(config, run=run), s)} <= current)

    return runs


def _release_finding(config: Config, est: Estimate, spread: ReleaseSpread) -> Diagnostic:
    """HP536 at the stack's key: what the older releases price the plan at, and where its release is stated; in
    a search config that names its stack, the quick fix states the release priced (one click where the run uses
    it; an older one is typed there; a release beside a stack a flag or setting names would not follow it)."""
    fw = FRAMEWORKS[est.framework]
    assert fw.releases is not None
    search = config.kind == "search"
    where = ("estimator.framework_version" if search
             else "a search config's estimator.framework_version, where it prices this file")
    fix = ({"set_at": {"path": "estimator.framework_version", "value": fw.releases.current}}
           if search and "estimator.framework" in config.locations else {})
    return positioned(config, "HP536", spread_message(fw.name, fw.releases.current, spread, est, where),
                      "framework_version", {**spread.to_json(), **fix})


def estimate_config(config: Config) -> tuple[Estimate | None, tuple[Diagnostic, ...]]:
    """Price the strategy a config states (config.stated): validation diagnostics instead of a number when
    it cannot run, plus HP520 when it does not fit the budget."""
    if config.model is None or config.cluster is None:
        missing = "model" if config.model is None else "cluster"
        return None, (positioned(config, "HP512", f"the {missing} is not known, so the strategy cannot be "
                                 "priced (see the other diagnostics)", "heads" if missing == "model" else "world"),)
    s = config.stated
    if s is None:
        open_dims = [d for d, dim in config.dimensions.items() if dim.searched]
        hint = f" (searched: {', '.join(open_dims)})" if open_dims else ""
        field = open_dims[0] if open_dims else "tp"
        return None, (positioned(config, "HP501", "the file does not state every parallel degree, so there is "
                                 f"no single strategy to price{hint}; fix each dimension or run hp-plan search",
                                 field, {"searched": open_dims}),)
    stack = check_framework(config, s)
    problems = [*check_strategy(config.model, config.cluster, s, effective_layout(config.run)), *stack]
    diags = [positioned(config, p.code, p.message, p.field, _fix_data(config, p), fact=p.fact) for p in problems]
    if has_errors(diags):
        return None, tuple(diags)
    budget = config.budget_gib
    if budget is None:
        budget = config.cluster.memory_gib
        diags.append(positioned(config, "HP521", f"no memory budget stated: using the device's "
                                f"{budget:g} GiB", "memory"))
    est = estimate(config.model, config.cluster, config.run, s, budget)
    if not est.fits:
        worst = max(range(len(est.stage_memory_gib)), key=lambda i: est.stage_memory_gib[i])
        data: dict[str, object] = {"peak_gib": est.peak_memory_gib, "budget_gib": budget, "stage": worst}
        message = f"needs {est.peak_memory_gib:.1f} GiB on pipeline stage {worst}, over the {budget:g} GiB budget"
        field = "memory"
        if _locate(config, "memory")[1] is None:
            # No file writes the budget (it comes from the editor settings or a flag): the finding is about
            # the strategy the file states, so it goes on the first stated degree, and says where the budget
            # came from instead of naming a key the file does not have.
            field = next((f for f in _STATED_ANCHORS if _locate(config, f)[1] is not None), "memory")
            if config.budget_source:
                message += f" (from {config.budget_source})"
                data["budget_source"] = config.budget_source
        hp520 = positioned(config, "HP520", message, field, data)
        if est.verdict == "marginal":
            hp520 = marginal(hp520, est)
        diags.append(hp520)
    from dataclasses import replace

    spread = release_prices(config.model, config.cluster, config.run, s, budget, _runs_as_stated(config, s, stack))
    if beyond_band(spread.prices, est):
        diags.append(_release_finding(config, est, spread))
    # docs/formats.md §3: `fits` stays a bool and is true for a marginal verdict.
    est = replace(est, diagnostics=tuple(diags), fits=est.verdict != "does not fit",
                  other_releases=spread if spread.prices or spread.refused_before else None)
    return est, tuple(diags)
