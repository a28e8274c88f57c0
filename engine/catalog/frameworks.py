"""Frameworks: the stack that runs the plan (docs/formats.md §5), as stated facts the cost model prices.

The same strategy runs at different speeds under different stacks. A `Framework` is not a fudge factor: each
field is a fact about the stack's kernels, overlaps, sharding and recompute policies, with its source in
docs/cost-model.md §5 ([CAL] §10 quotes the stacks' own code and scripts). What a framework's
trainer cannot execute (`schedules`, `selective_policies`) becomes a diagnostic on the stated
plan and a filter on the search (engine.cost.strategy_rules).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from types import MappingProxyType
from typing import Any

from engine.specs import RECOMPUTE_MODULES, DeviceSpec, ModelSpec, PipelineLayout, RunOptions


def _rates(**kw: float) -> Mapping[str, float]:
    return MappingProxyType(dict(kw))


@dataclass(frozen=True, slots=True)
class StackSpace:
    """What the stack's launcher runs: the strategy space the search offers for it (docs/cost-model.md §8.6 gives
    each with its source). A plan outside it is never recommended for that stack; each rule is a counted refusal.

    fsdp: the stack's FSDP route ("" = none): "hsdp" (FSDP2 over any divisor of dp·cp, replicated over the rest:
      torchtitan's data_parallel_shard/replicate degrees, HyperParallel's fsdp_config), "whole" (one shard group
      over the whole dp·cp: Megatron-LM's `--use-megatron-fsdp`, MindSpeed's `--use-torch-fsdp2` with its
      fsdp2_config.yaml). `fsdp_with_pp` / `fsdp_with_ep`: whether that route runs with pipeline / expert
      parallelism (Megatron-LM arguments.py asserts pp == 1 and ep == 1 for torch FSDP2, MLM-ARGS; Megatron-FSDP
      is offered here without pp too, as NVIDIA's Megatron-FSDP recipes run it).
    distributed_optimizer: the optimizer states, fp32 master weights and gradients' reduce-scatter sharded over
      dp·cp (Megatron-Core's `--use-distributed-optimizer`, ZeRO-1), what the stack's recipes run: the search
      prices it on (over the whole dp·cp) wherever no FSDP runs, and a stated plan that states no shard gets it.
    sp_with_cp: sequence parallelism combines with context parallelism (NeMo / Megatron-Bridge recipes run
      TP + SP + CP; HyperParallel's checker refuses it, [HP] §5.6.1). `sp_with_tp`: sequence parallelism is
      what the stack runs whenever tp > 1 (Megatron-LM refuses `--tp-comm-overlap` without it; torchtitan's TP
      always shards norms over the sequence), so the search offers only that.
    offload: the stack's activation offload of whole layers ("" = none): "layers" (Megatron-Core's
      `--cpu-offloading-num-layers`; its TransformerConfig raises on it with pipeline parallelism or recompute, so
      the search does not choose it, export writes it for a plan that meets those terms), "per_layer" (the
      per-layer offload HyperParallel's search chooses beside recompute, [HP] §8.6: the only stack the search
      offers offload for).
    devices: the device generations the stack runs on (engine.specs.DeviceSpec.generation; () = any):
      Megatron-LM / TransformerEngine are CUDA stacks, MindSpeed is Megatron on Ascend.
    dualpipev_with_cp: DualPipeV (a schedule in Framework.schedules) runs with context parallelism; MindSpeed's
      docs/features/dualpipev.md says its DualPipeV is not yet compatible with long-sequence (context) parallelism,
      VPP, swap-attention or asynchronous DDP ([MS-DUALPIPEV]): a plan stating both is refused (HP530).
    flags: the stack's accepted flags (engine/catalog/data/<name>_flags.txt, read from its argument definitions
      at a pinned commit), "" = the stack takes no command-line flags (TOML, YAML).
    cp_algos: the context-parallel algorithms the stack runs (engine.specs.CpAlgo): Megatron-Core's
      `--cp-comm-type` p2p / a2a / a2a+p2p / all_gather (MLM-ARGS); MindSpeed's `--context-parallel-algo`
      megatron_cp_algo / ulysses_cp_algo / hybrid_cp_algo (no all-gather); torchtitan's ring only (its
      `context_parallel_rotate_method` chooses how the ring exchanges KV, [TT-SRC]); HyperParallel's
      colossalai_cp / ulysses_cp / hybrid_cp ([HP] §4.2). Another stated algorithm is priced as the stack's
      ring and said so (HP533).
    uneven_interleave: the stack runs an interleaved split whose chunks hold unequal layer counts (Megatron-Core
      told each chunk's layers by `--pipeline-model-parallel-layout`, MCORE-PPLAYOUT; torchtitan's own split;
      HyperParallel, whose validator's only layer rule is pp ≤ layers, [HP] §3.2). MindSpeed-LLM does not: its
      uneven split (`--num-layer-list`) refuses virtual pipeline stages (MS-NUMLAYERLIST), so there an interleaved
      plan needs its layers, with any no-op padding, in pp·vpp equal chunks (a counted refusal; HP416 names the
      padding on a stated plan).
    compile_with_pp: the stack runs torch.compile together with pipeline parallelism (HyperParallel's AutoModels
      trainer refuses them together, "compile is not supported together with pipeline parallelism", [HP]
      Corrections: with `compile.enabled` its search offers pp 1 only, a counted refusal; HP423 on the file).
    stages_from_layers: the stack derives a pipeline's virtual stages from the layers per stage (torchtitan's
      `pipeline_llm`, [TT-SRC]: ⌈(L + first_stage_less_layers + last_stage_less_layers) / layers_per_stage⌉,
      which must divide by pp; unset, 2 per rank for a multi-stage schedule): an interleaved plan runs only where
      vpp is 2 or some whole layers_per_stage gives pp·vpp stages (runs_virtual_stages).
    grad_accumulation: the stack accumulates gradients over micro-batches without a pipeline (torchtitan from
      TT-GRADACC: its accumulation steps are `global_batch_size // (local_batch_size · dp)`); before it a step ran
      one local batch, split into micro-batches only by a pipeline schedule, so a plan without pp runs one
      micro-batch (a counted refusal; HP530 on a stated plan).
    hybrid_even_split: a hybrid pattern that marks no stage boundaries (Megatron-Core's `|`; a pattern with them
      is not priced by kind, engine.config.model_facts) is cut by position into equal stages and runs no virtual
      stages (MCORE-HYBRID: `select_pipeline_segment` raises "Number of layers ... must be evenly divisible by
      pipeline-model-parallel-size" unless the first/last-stage layer counts are stated, and "Virtual pipeline
      parallelism ... is not supported when hybrid_layer_pattern has no pipe ('|') separators"; core_v0.12.0's
      MambaStack asserts no virtual stages and slices num_layers // pp alike); MindSpeed-LLM runs its Mamba2 hybrids
      on that Megatron-Core model (MS-SSM). The search offers such a model only plans that meet it (counted
      refusals); a stated plan that does not gets HP530.
    interleave_groups: how the stack's interleaved 1F1B takes a micro-batch count m for pp ranks
      (interleave_runs): "pp" (Megatron-Core and MindSpeed on it: microbatch_group_size_per_vp_stage defaults to
      pp and the last group must be empty or at least pp, MCORE-SCHED; older releases assert m % pp == 0 outright),
      "rounds" (torch.distributed.pipelining's ScheduleInterleaved1F1B, torchtitan's: max(1, m // pp) rounds that
      must divide m, TORCH-PIPE), "any" (HyperParallel's own ScheduleInterleaved1F1B takes m below, above or not a
      multiple of pp, [HP] Corrections 1).
    """

    fsdp: str = "hsdp"
    fsdp_with_pp: bool = True
    fsdp_with_ep: bool = True
    distributed_optimizer: bool = False
    sp_with_cp: bool = True
    sp_with_tp: bool = False
    offload: str = ""
    dualpipev_with_cp: bool = True
    devices: tuple[str, ...] = ()
    flags: str = ""
    cp_algos: tuple[str, ...] = ("ring", "ulysses", "hybrid", "allgather")
    uneven_interleave: bool = True
    hybrid_even_split: bool = False
    grad_accumulation: bool = True
    stages_from_layers: bool = False
    compile_with_pp: bool = True
    interleave_groups: str = "pp"

    def hybrid_split(self, model: ModelSpec, layout: PipelineLayout) -> str:
        """How the stack splits `model`'s hybrid pattern across pipeline stages (hybrid_even_split): "" where it is
        no hybrid model or the stack states no rule, "stated" where `layout` states the first/last stages' layers
        (only the virtual stages are refused; the layout's own rules place the layers), else "even" (pp must divide
        the layers, no virtual stages). The search's rules (engine.search.space) and the stated plan's HP530
        (engine.cost.strategy_rules) both read it."""
        if model.hybrid is None or not self.hybrid_even_split:
            return ""
        return "stated" if (layout.first_stage_layers or layout.last_stage_layers) else "even"

    def runs_virtual_stages(self, slots: Any, pp: Any, vpp: Any) -> Any:
        """Whether the stack runs pp·vpp chunks over `slots` split layers (element-wise; stages_from_layers): any
        where it takes the chunk count as stated; else vpp 1 or 2 (its default), or a whole layers_per_stage n
        with ⌈slots / n⌉ = pp·vpp, which exists where (pp·vpp − 1)·⌈slots / (pp·vpp)⌉ < slots."""
        n = pp * vpp
        if not self.stages_from_layers:
            return n >= 1  # every chunk count (element-wise true, in the arguments' shape)
        return (vpp <= 2) | ((n - 1) * (-(-slots // n)) < slots)

    def interleave_runs(self, mbn: Any, pp: Any) -> Any:
        """Whether the stack's interleaved schedule runs `mbn` micro-batches on `pp` ranks (element-wise;
        interleave_groups)."""
        if self.interleave_groups == "any":
            return mbn >= 1
        if self.interleave_groups == "rounds":  # max(1, mbn // pp) rounds, written to take arrays too
            return mbn % (mbn // pp + (mbn < pp)) == 0
        return mbn % pp == 0

    def cp_algo(self, stated: str) -> str:
        """The context-parallel algorithm priced: the stated one where the stack runs it, else its ring."""
        return stated if stated in self.cp_algos else "ring"

    def layer_offload_refusals(self, layers: int, *, pp: int, recompute: bool, num_layers: int) -> list[str]:
        """Why the stack cannot offload the activations of its first `layers` layers in this plan ([] = it can).
        Megatron-Core's TransformerConfig (MCORE-OFFLOAD) raises on CPU offloading with
        pipeline parallelism, with activation recomputation, or with a layer count not below the model's; a
        stack without the whole-layer route ("layers") has none at all. One home for the rule: the stated plan
        is priced with the offload only where this is empty (engine.cost.offload.with_layer_offload), HP530 says why
        not."""
        if self.offload != "layers":
            return ["it has no CPU offloading of whole layers"]
        why = []
        if pp > 1:
            why.append(f"with pipeline parallelism (pp {pp})")
        if recompute:
            why.append("with activation recompute")
        if layers >= num_layers:
            why.append(f"of {layers} layers (it takes fewer than the model's {num_layers})")
        return why


_MEGATRON_SPACE = StackSpace(fsdp="whole", fsdp_with_pp=False, distributed_optimizer=True, sp_with_cp=True,
                             sp_with_tp=True, offload="layers", devices=("volta", "ampere", "hopper", "blackwell"),
                             flags="megatron", hybrid_even_split=True)
# MindSpeed's FSDP2 route is Megatron's `--use-torch-fsdp2` with `--fsdp2-config-path` (MindSpeed docs
# features/fsdp2.md): not with pp or ep, not with the distributed optimizer, not with Megatron's --recompute-* flags.
_MINDSPEED_SPACE = StackSpace(fsdp="whole", fsdp_with_pp=False, fsdp_with_ep=False, distributed_optimizer=True,
                              sp_with_cp=True, sp_with_tp=True, dualpipev_with_cp=False, devices=("ascend",),
                              flags="mindspeed", cp_algos=("ring", "ulysses", "hybrid"), uneven_interleave=False,
                              hybrid_even_split=True)
_TORCHTITAN_SPACE = StackSpace(fsdp="hsdp", sp_with_cp=True, sp_with_tp=True, cp_algos=("ring",),
                               stages_from_layers=True, interleave_groups="rounds")
# HyperParallel's own rules ([HP] §5.6): FSDP over any divisor of dp·cp, SP searched and never with CP.
_HYPERPARALLEL_SPACE = StackSpace(fsdp="hsdp", sp_with_cp=False, offload="per_layer",
                                  cp_algos=("ring", "ulysses", "hybrid"), compile_with_pp=False,
                                  interleave_groups="any")


@dataclass(frozen=True, slots=True)
class RingMerge:
    """HBM bytes a ring attention's steps after the first move outside the attention kernel, per element and step
    (docs/cost-model.md §3.2, "Long context"): forward per output element (`out`) and per K/V element (`kv_fwd`, a
    copy made to send them on), backward per q element (`q`) and per K/V element (`kv`)."""

    out: float
    kv_fwd: float
    q: float
    kv: float


# TransformerEngine's ring ([TE-CP]): forward `flash_attn_fwd_out_correction`, out.add_(out_per_step ·
# exp(lse_step − lse)); backward dq and dkv accumulated with add_ per step: a read of the step's partial result and a
# read and write of the running one, 3 × 2 bytes at the 16-bit floor; the KV are sent from their packed buffer. Stated,
# not fitted; the default for a stack whose ring is not read (HyperParallel's colossalai_cp).
TE_RING_MERGE = RingMerge(out=6.0, kv_fwd=0.0, q=6.0, kv=6.0)
# PyTorch's ring ([PT-CP], torch.distributed.tensor.experimental, torchtitan's CP), in eager fp32 ops, counted on the
# last rank of the ring, whose every step takes the whole local query and half the KV (the slowest: the others
# merge half their rows but copy the whole running result back): forward `_SDPAMerger` casts the step's output to
# fp32 (2 + 4), then out − sigmoid(Δlse)·(out − block_out) in three element-wise ops (12 + 8 + 12), 38 per output
# element; `torch.cat` of k and v to send them on, 4 per K/V element; backward dq += the step's bf16 dq (4 + 2 + 4),
# 10 per q element; dk, dv added to one half of the fp32 accumulator and `torch.cat` back whole (5 + 8), then
# `torch.cat` of dk and dv in fp32 to send them on (8), and the forward's K/V copy again (4): 25 per K/V element. The
# fp32 zeros the backward starts from and the final casts, once a layer, are not priced. Stated, not fitted.
PYTORCH_RING_MERGE = RingMerge(out=38.0, kv_fwd=4.0, q=10.0, kv=25.0)


@dataclass(frozen=True, slots=True)
class ReleaseFact:
    """A fact of a framework that holds from one release on: before `since`, the field `field` of its Framework
    (`space.<name>`: of its StackSpace) reads `before` (what the older release ran). `what` says it plainly,
    `source` where the release notes say so."""

    field: str
    since: str
    before: Any
    what: str
    source: str


@dataclass(frozen=True, slots=True)
class Releases:
    """The releases of a framework whose facts change (`estimator.framework_version`, docs/formats.md §2): `versions`
    oldest first, the last the current one (what the Framework's own fields state, the default); `aliases` other
    spellings of a version; `facts` what holds from which release; `label` what the version numbers."""

    label: str
    versions: tuple[str, ...]
    facts: tuple[ReleaseFact, ...]
    aliases: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def current(self) -> str:
        return self.versions[-1]

    def normalise(self, text: str) -> str | None:
        """The version `text` names (case and a leading "v" / "core_r" / "core_v" ignored, "0.12.0" = "0.12"),
        or None when this framework has no such release."""
        key = text.strip().lower()
        for prefix in ("core_r", "core_v", "v"):
            if key.startswith(prefix):
                key = key[len(prefix):]
                break
        key = self.aliases.get(key, key)
        if key in self.versions:
            return key
        short = ".".join(key.split(".")[:2])
        return short if short in self.versions else None

    def missing(self, version: str) -> tuple[ReleaseFact, ...]:
        """The facts `version` does not have yet (their `since` is a later release)."""
        at = self.versions.index(version)
        return tuple(f for f in self.facts if self.versions.index(f.since) > at)


@dataclass(frozen=True, slots=True)
class Framework:
    """Facts of one training stack (docs/cost-model.md §5 gives each with its source).

    npu_gemms: linear layers run as Megatron-Core modules on torch_npu / CANN GEMM kernels (MindSpeed-LLM on
      Ascend): priced at constants.MINDSPEED_GEMM_FRACTION_OF_MAMF; the routed experts' MLP (GroupedMLP on
      `npu_gmm`, or SequentialMLP's loop over the local experts) at constants.MINDSPEED_EXPERT_GEMM_SHARE of it.
    mc2: `tp_comm_overlap` is MindSpeed's MC2 (`--use-mc2`, CANN's fused matmul + HCCL kernels, [MS-MC2]),
      which reaches constants.MC2_ACHIEVED_SHARE of the per-block overlap bound on 910B.
    tp_comm_overlap_not_on: catalog devices the stack's `tp_comm_overlap_name` option does not run on, though the
      stack does: MindSpeed's MC2 "is not supported on Atlas 900 A3" ([MS-MC2], its notes), so an A3 plan that
      states it is priced without it and told so (HP533), and its launch line leaves it out.
    fused_elementwise: norms, RoPE, activation and gate multiply run as fused kernels (TransformerEngine,
      Ascend fused operators) rather than eager PyTorch ops; `compile_fuses`: torch.compile / graph mode fuses
      them when `estimator.compile` is on.
    attention_kernel / attention_rate: the causal attention kernel and its forward rate as a fraction of the
      device's BF16 peak, per device generation ("" = any other generation).
    tp_overlap: a share of the tensor-parallel collectives hides under GEMMs without any option (Megatron's
      asynchronous backward all-reduce beside the weight-gradient GEMM); False: every TP collective is exposed
      (plain DTensor TP). `tp_comm_overlap_name`: the option that pipelines TP collectives with GEMMs;
      `tp_comm_overlap_backward`: whether that option pipelines the backward's collectives too (TransformerEngine
      userbuffers and MC2 do); False: the forward's only (torchtitan's async TP, [TT-ASYNCTP]: ~20 % faster
      forward passes and ~8 % end to end on Llama 3 70B with full recompute, where the forward and its recomputed
      copy are about half of the step: the forward's gain alone, 0.5 × (1 − 1/1.2) = 8 %).
    fsdp2: per-parameter FSDP2 (`fully_shard`): gathers prefetched one layer ahead (the first layer's gather
      and the last one's reduce-scatter stay exposed), gradients reduce-scattered in `fsdp_reduce_bytes`; each
      block's collective one NCCL call over the shard group, priced at NCCL's rate across nodes (through all
      of a node's NICs), not the flat ring fitted on DeepSpeed's ZeRO-3 (engine.cost.communication.fsdp_exposed).
    selective_policies: what `recompute: selective` can mean on this stack (the first is its default).
    recompute_modules: the submodules the stack's `--recompute-modules` can recompute (policy "modules",
      engine.specs.RECOMPUTE_MODULES; Megatron-Core TransformerConfig.recompute_modules, MindSpeed-LLM's
      --recompute-modules); () = the stack has no recompute by module.
    loss_parallel: the cross-entropy runs on the vocabulary-parallel logits (÷ tp); else over the full
      vocabulary on every TP rank. loss_bytes_per_logit: bytes per logit the loss holds at its peak:
      Megatron's fused vocab-parallel cross-entropy keeps the fp32 logits (4, KOR22 §4.3); a PyTorch loss in
      fp32 streams the bf16 logits, their fp32 upcast and the fp32 softmax gradient (2 + 4 + 4 = 10; the
      loss's HBM traffic, engine.cost.timing).
    loss_kind / loss_peak_bytes: how the loss is computed and the bytes per logit alive at its memory peak
      (engine.cost.memory.fixed_activations; docs/cost-model.md §2.3 counts the tensors). "fused":
      Megatron's vocab-parallel cross-entropy upcasts the logits once and computes the softmax and its
      gradient in place in that fp32 buffer (4, KOR22 §4.3). "eager_fp32": `cross_entropy(logits.float())`
      as torchtitan's `cross_entropy_loss` runs it ([TT-SRC]); the peak is in the loss's backward, with the saved fp32
      log-softmax, the fp32 gradient nll_loss hands it and the fp32 gradient log_softmax's backward makes
      alive together (4 + 4 + 4 = 12; the bf16 logits are freed before backward, `del pred` in
      torchtitan's train step; the forward peak, bf16 logits + upcast + log-softmax, is 10).
      `loss_parallel_peak_bytes` (0 = the same): the peak when the loss runs vocabulary-parallel over tp > 1
      (PyTorch's `loss_parallel`, torch/distributed/tensor/parallel/loss.py [PT-FSDP2]): its backward,
      `(grad_input + exp(x)) * grad_output`, holds the saved fp32 log-softmax, the zeros grad_input, exp(x)
      and their sum (4 + 4 + 4 + 4 = 16); its forward the bf16 logits, the upcast, the shifted logits and
      their exp (2 + 4 + 4 + 4 = 14). HyperParallel's trainer with `accelerator.loss_parallel: true` is priced
      the same [U].
    schedules: the pipeline schedules the trainer runs (every stack here pipelines: HyperParallel's
      hyper_parallel/core/pipeline_parallel has PipelineStage with GPipe, 1F1B and interleaved 1F1B, [HP] Corrections 1).
      "dualpipev": DeepSeek's DualPipe cut in half (deepseek-ai/DualPipe README, [DUALPIPE]), MindSpeed-LLM's
      `--schedules-method dualpipev` ([MS-DUALPIPEV]); Megatron-LM core has no DualPipe schedule (its
      arguments.py has no such flag, engine/catalog/data/megatron_flags.txt), torchtitan's config at the pinned
      commit none: HP530 there.
    default_layout: how the trainer splits the layers over the pipeline chunks when the files state no layout
      (engine.cost.layout; the planner's even split unless the stack has its own); `layout_keys`: the stack's
      own options for a stated layout (docs/formats.md §2.1), "" = none. `chooses_accounting`: the stack
      offers the embedding and loss counted in the split as options (Megatron-Core's
      account_for_embedding/loss_in_pipeline_split), so the search may choose them where the files state none.
      `layer_layout`: the stack takes a per-chunk layer layout (Megatron-Core's `--pipeline-model-parallel-layout`,
      MCORE-PPLAYOUT, from 0.13), so any split the planner prices, uneven ones too, is one it can be told to run:
      `export` writes the priced split as that flag where no other option says it. `noop_layers`: the stack pads
      the layer count with identity layers (MindSpeed-LLM's `--noop-layers`, MS-NOOP), so a split that needs
      them (DeepSeek-V3's 61 layers over DualPipeV's 2·pp stages) is one it runs.
    fp8_saved_inputs: under FP8 the linear layers save their inputs for backward as the FP8 cast (1 byte
      per element, constants.FP8_ACT_BYTES): TransformerEngine's ([TE-FP8]) Linear, LayerNormLinear and GroupedLinear
      keep the FP8 input they fed the forward GEMM. False: the inputs stay 16-bit (torchao's Float8Linear
      is not priced as saving FP8 inputs, [U]).
    loss_chunks: token chunks the output layer and loss run in, each chunk's backward before the next, so one
      chunk's logits are alive (engine.cost.memory.fixed_activations). torchtitan's model configs (llama3_8b / 70b /
      405b, qwen3, deepseek_v3, sft_qwen3_8b_math) wrap their cross-entropy in ChunkedLossWrapper, 8 chunks by
      default, since mid-2026 ([TT-SRC] torchtitan/components/loss.py); a run of an older release (the
      TT-BENCH runs of 2024-12) states `estimator.loss_chunks: 1`. 1 elsewhere.
    compiled_loss_peak_bytes: bytes per logit alive at the loss's peak when the trainer compiles its plain
      cross-entropy with the model (`estimator.compile`; one chunk, not vocabulary-parallel), 0 = it does not.
      torchtitan's `build_cross_entropy_loss` wraps `cross_entropy(pred.float(), labels)` in torch.compile under
      `training.compile` ([TT-SRC] torchtitan/components/loss.py, from 2025-04-02): Inductor fuses the upcast,
      log-softmax and loss into reductions and their backward into one kernel, so what is alive is the bf16
      logits saved for it and the bf16 gradient it writes (2 + 2 = 4), not the eager 12.
    zero3_gathers_modules: the stack's ZeRO-3 (`fsdp` with reshard after forward) is DeepSpeed's as NAR21 ran it
      inside Megatron: each module's own parameters are gathered as it runs and released after, so the working
      buffer is DS-EST's "4 × largest layer's params" with DeepSpeed's meaning of a layer, one module's own
      parameters (`model_to_params`: `m.parameters(recurse=False)`, [DS-EST]): engine.cost.memory.gather_unit.
      False: the gather unit is the transformer block (FSDP2's `fully_shard` per block, [PT-FSDP2];
      Megatron-FSDP's per-module buckets). Megatron's release "2021" only (MEGATRON_RELEASES).
    fsdp_flat_ring: the stack's FSDP collectives move every byte through each rank's own NIC, at the flat ring's
      rate (collectives.Links.gather_flat_coef): what DeepSpeed's ZeRO-3 achieved in NAR21 Table 2 (FITTED on
      N2-01…06: 3 × (n−1)/n·2Ψ bytes per GPU over 25 GB/s × COLL_EFF_INTER within 10 %, independent of the GPU
      count, where the hierarchical form predicts 8× less). False: NCCL collectives over the shard group leave
      a node through all its NICs at once (Links.gather_coef), as FSDP2, Megatron-Core's own FSDP
      (Megatron-FSDP, `--use-megatron-fsdp`) and MindSpeed's `--use-torch-fsdp2` run them. Megatron's release
      "2021" (the Megatron-LM with DeepSpeed's ZeRO-3 of NAR21) only.
    pp_unsharded: under pipeline parallelism the FSDP2 stage keeps its weights gathered (16-bit) between
      micro-batches and accumulates unsharded gradients (in `fsdp_reduce_bytes`) until the last micro-batch's
      backward reduce-scatters them ([TT-SRC], [PT-FSDP2]): torchtitan's apply_fsdp passes reshard_after_forward=False when PP is
      on, and torch.distributed.pipelining turns gradient sync on only for the last backward.
    pp_recv_per_microbatch: the pipeline runs on torch.distributed.pipelining, whose stages allocate a receive
      buffer per micro-batch for their input and for their output gradient and keep them
      (engine.cost.memory.pipeline_buffers, [PT-PP]); False: one send and one receive buffer (Megatron's p2p).
    allocator_overhead: reserved over allocated bytes − 1 of the stack's device allocator at the memory
      peak (engine.cost.memory.allocator_ratio): the PyTorch caching allocator keeps freed blocks cached, and
      its high-water mark of reserved memory (what torchtitan logs as "memory") exceeds the live tensors by
      them. 0 = priced as allocated (Megatron's and DeepSpeed's published figures are formula figures).
      torchtitan's is FITTED (TORCHTITAN_ALLOCATOR_OVERHEAD below).
    ep_overlap: what the run option `moe_a2a_overlap` means on this stack ("" = the stack offers no expert
      all-to-all overlap): "batch" (Megatron-Core --overlap-moe-expert-parallel-comm, MCore v0.14: the
      all-to-alls of one micro-batch run under another micro-batch's compute of the same layer, 1F1B
      forward/backward merged) or "chunked" (MindSpeed --moe-alltoall-overlap-comm: asynchronous all-to-alls
      under the same micro-batch's expert computation, split into sub-graphs forward and backward).
      `shared_expert_overlap`: `moe_shared_expert_overlap` runs the shared expert while the dispatch and
      combine all-to-alls are in flight (Megatron and MindSpeed --moe-shared-expert-overlap).
      `ep_overlap_names`: the stack's own option names, for messages and docs.
    calibrated_on: the [CAL] cases its constants were checked against (empty: uncalibrated).
    swaps_attention: the stack runs `swap_attention` (MindSpeed --swap-attention: every layer's attention-block
      activations copied to the host after its forward, prefetched before its backward; engine.cost.swap;
      HyperParallel's trainer key `activation_swap: attention`, [HP] Corrections 4, priced the same way [U]: its
      reference states that the attention activations go to the host, not its copy schedule).
    deepep: the stack runs DeepEP dispatch where `estimator.moe_dispatcher: deepep` asks it (else the
      all-to-all dispatcher is priced and said so, HP533).
    allgather_dispatch: the stack runs Megatron-Core's all-gather token dispatcher (`--moe-token-dispatcher-type
      allgather`, MCORE-MOE; MindSpeed keeps Megatron's choices, MS-DISPATCH) where `moe_dispatcher: allgather`
      asks it (else the all-to-all is priced, HP533).
    probs_in_activation: the router's probabilities multiply the routed experts' activation output (Megatron-Core
      0.13, "memory efficient token permutation", [MCORE-MOE]; `experts.py` post-multiplies them in the
      activation), so the combine's backward needs only the routing map and the experts' outputs are not kept;
      False: the combine multiplies them and keeps each routed copy's output for their gradient
      (engine.cost.memory.unsaved_expert_outputs).
    expert_fold: the expert layers have their own rank layout (Megatron-Core's MoE Parallel Folding, 0.10:
      `expert_decoder_rank_generator` orders tp = etp, ep, dp like the dense grid, [MCORE-PS]), so an EP group's
      ranks are etp apart and an expert-data-parallel group's etp·ep; False: EP is carved out of the data
      parallel ranks after tp and cp (tp·cp apart, the layout before folding; also priced so where a stack's
      layout is not read [U]). engine.cost.rows.Rows.ep_stride.
    releases / release: the releases whose facts differ (`Releases`; None: one set of facts for every release) and
      the release these facts are for (framework_of applies `estimator.framework_version`; "" = no releases
      known; the fields as written here are the current release's).
    param_gather_overlap: whether the distributed optimizer's weight all-gather is overlapped with the next step's
      first forward when the files do not say (RunOptions.overlap_param_gather): NeMo's and Megatron-Bridge's
      recipes turn it on; MindSpeed-LLM's scripts pass `--overlap-param-gather` rarely (2 of the 7 of 19
      v1.0.RC3.0 mcore pretraining scripts read that use the distributed optimizer, where 6 of the 7 pass
      `--overlap-grad-reduce`, [MS-LLM]), and Megatron's own default is off. FSDP2 stacks prefetch their gathers
      (`fsdp2`): unused.
    ring_merge: the bytes a ring attention's steps after the first move outside the kernel, per element and step
      (RingMerge): TransformerEngine's (TE_RING_MERGE, also where a stack's own ring is not read) or PyTorch's
      fp32 eager merges (PYTORCH_RING_MERGE, torchtitan).
    grad_accum_fusion / grouped_grad_accum_fusion: what the stack's recipes usually run when the files do not
      say (RunOptions.gradient_accumulation_fusion / gemm_gradient_accumulation_fusion): the weight-gradient
      GEMMs (dense; grouped expert GEMMs) accumulate into the fp32 main gradients in their epilogue. Megatron
      defaults to on ([MCORE-DDP]); MindSpeed-LLM's example scripts turn the dense one off
      (`--no-gradient-accumulation-fusion` in 60 of 66 mcore pretraining scripts at v1.0.RC3.0, 32 of 49 at
      master, all three [CAL] §10 scripts) and 13 of the 24 grouped-GEMM scripts at master turn the grouped one
      on (`--gemm-gradient-accumulation-fusion`, [MS-LLM]). FSDP2 stacks keep no main gradients: unused.
    """

    name: str
    label: str
    fused_elementwise: bool
    compile_fuses: bool
    attention_kernel: str
    attention_rate: Mapping[str, float]
    tp_overlap: bool
    tp_comm_overlap_name: str
    fsdp2: bool
    fsdp_reduce_bytes: float
    selective_policies: tuple[str, ...]
    loss_parallel: bool
    loss_bytes_per_logit: float
    loss_kind: str
    loss_peak_bytes: float
    schedules: tuple[str, ...]
    calibrated_on: tuple[str, ...] = ()
    loss_parallel_peak_bytes: float = 0.0
    recompute_modules: tuple[str, ...] = ()
    pp_unsharded: bool = False
    fp8_saved_inputs: bool = False
    loss_chunks: int = 1
    compiled_loss_peak_bytes: float = 0.0
    zero3_gathers_modules: bool = False
    fsdp_flat_ring: bool = False
    fp8_keeps: str = ""
    ep_overlap: str = ""
    shared_expert_overlap: bool = False
    ep_overlap_names: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)
    default_layout: PipelineLayout = field(default_factory=PipelineLayout)
    layout_keys: str = ""
    chooses_accounting: bool = False
    layer_layout: bool = False
    noop_layers: bool = False
    grad_accum_fusion: bool = True
    npu_gemms: bool = False
    mc2: bool = False
    grouped_grad_accum_fusion: bool = True
    pp_recv_per_microbatch: bool = False
    allocator_overhead: float = 0.0
    swaps_attention: bool = False
    space: StackSpace = field(default_factory=StackSpace)
    deepep: bool = True
    allgather_dispatch: bool = False
    expert_fold: bool = False
    probs_in_activation: bool = False
    tp_comm_overlap_backward: bool = True
    tp_comm_overlap_not_on: tuple[str, ...] = ()
    param_gather_overlap: bool = True
    ring_merge: RingMerge = TE_RING_MERGE
    releases: Releases | None = None
    release: str = ""

    def attention_fraction(self, device: DeviceSpec) -> float:
        """Forward rate of the causal attention kernel as a fraction of the device's peak."""
        return self.attention_rate.get(device.generation, self.attention_rate[""])

    def tp_comm_overlap_on(self, device: DeviceSpec) -> bool:
        """Whether the stack's TP comm-GEMM overlap option runs on `device`: one home for what the price, the
        stated plan's HP533 and the exported launch line ask."""
        return bool(self.tp_comm_overlap_name) and device.name not in self.tp_comm_overlap_not_on

    def fused(self, run: RunOptions) -> bool:
        """Element-wise kernels fused: by the stack itself, or by torch.compile where it is on."""
        return self.fused_elementwise or (self.compile_fuses and run.compile)

    def dp_overlaps(self, run: RunOptions) -> tuple[bool, bool]:
        """(gradient reduction, weight all-gather) overlapped: as the run states, else this stack's recipes' usual
        setting (`param_gather_overlap`)."""
        gather = self.param_gather_overlap if run.overlap_param_gather is None else run.overlap_param_gather
        return run.overlap_grad_reduce, gather

    def grad_accumulation_fused(self, run: RunOptions) -> tuple[bool, bool]:
        """(dense, grouped expert) weight-gradient GEMMs accumulating into the main gradients in their
        epilogue: as the run states, else this stack's recipes' usual setting."""
        dense = self.grad_accum_fusion if run.gradient_accumulation_fusion is None else run.gradient_accumulation_fusion
        grouped = (self.grouped_grad_accum_fusion if run.gemm_gradient_accumulation_fusion is None
                   else run.gemm_gradient_accumulation_fusion)
        return dense, grouped

    def etp_fits(self, tp: Any, etp: Any) -> Any:
        """Whether the stack runs expert tensor parallelism `etp` beside `tp` (element-wise on ints or arrays):
        with MoE Parallel Folding (expert_fold) the expert layers have their own rank grid and any etp that the
        ranks hold runs; before it the expert TP group is carved from the TP group, so etp must divide tp
        (HyperParallel's legacy trainer: etp = tp or 1, [HP] §2.2). One home for the rule: the search's space
        (a counted refusal) and the stated plan's HP504 both ask it."""
        return (etp == 1) | (tp % etp == 0) | self.expert_fold

    @property
    def qualified(self) -> str:
        """The name, with the release where an older one than the current is priced ("megatron (Megatron-Core
        0.12)"): what messages about a missing feature name, since the current release has it."""
        rel = self.releases
        if rel is None or not self.release or self.release == rel.current:
            return self.name
        return f"{self.name} ({rel.label} {self.release})"

    @property
    def calibrated(self) -> bool:
        return bool(self.calibrated_on)

    @property
    def caches_fp8_weights(self) -> bool:
        """TransformerEngine's FP8 (Megatron, MindSpeed) keeps each weight's FP8 copy and its transpose across
        the micro-batches of a step; torchao's dynamic casting on the FSDP2 stacks re-quantises the weight at
        every use and keeps none ([TE-FP8]; engine.cost.fp8)."""
        return not self.fsdp2


# Reserved over allocated bytes − 1 of the PyTorch caching allocator at torchtitan's memory peak (Framework.
# allocator_overhead). torchtitan logs as "memory" the allocator's `reserved_bytes.all.peak` ([TT-SRC]
# torchtitan/metrics.py, DeviceMemoryMonitor.get_peak_stats), which counts the freed blocks the allocator keeps
# cached on top of the live tensors, and not the CUDA context or NCCL's own buffers (RESERVED_GIB, outside the
# allocator). FITTED on six named runs of benchmarks/memory_runs (the first row of each of torchtitan's six
# benchmark tables: tt-8b-8gpu-eager, tt-8b-8gpu-cp1-32k, tt-8b-128gpu-eager, tt-70b-256gpu-2d,
# tt-405b-512gpu-3d-1f1b, tt-405b-512gpu-4d-cp1-32k; `benchmarks/memory_peaks.py --fit`: grid 0.00-0.30 in
# 0.01, smallest mean |e| on those six: 0.14, 2.4 %); the other eleven runs are held out. See docs/cost-model.md §2.4.
TORCHTITAN_ALLOCATOR_OVERHEAD = 0.14

# Megatron-Core's attention through TransformerEngine / cuDNN fused attention: FA2 reaches ~50-70 % of
# A100/H100 peak forward and less backward (Dao 2023, §4.1); 0.50 is the cost model's value since its first
# fit on N1 + N2 + K5 (engine/cost/constants.py) and prices the M family (FA on H100) within its errors.
FLASH_ATTN_FRACTION = 0.50
_TE_ATTN = _rates(**{"": FLASH_ATTN_FRACTION})
# PyTorch SDPA dispatches FlashAttention-2: ~35 % of H100 peak forward (FA3 paper, Shah et al. 2024), 50-73 %
# of A100 peak (Dao 2023): 0.50 on Ampere; torch_npu's fused attention on Ascend: no published rate [U],
# priced as MindSpeed's.
_SDPA_ATTN = _rates(**{"": 0.50, "hopper": 0.35, "blackwell": 0.35, "ascend": 0.50})

# Megatron-Core releases whose facts differ (`estimator.framework_version: "0.12"`, also "core_r0.12.0", "v0.12"):
# oldest first, the last the current one, the release engine/catalog/data/megatron_flags.txt was read at
# (core_v0.19.0). 0.17, 0.18 and 0.19 change none of the facts priced here: the defaults of the options the cost
# model reads (TransformerConfig, DistributedDataParallelConfig, ModelParallelConfig at core_v0.16.0 against
# core_v0.19.0) are the same, and what they add (paged stashing of MoE activations, fine-grained activation
# offloading by fraction, the dispatch backward overlapped with the experts' weight gradients, NCCL EP) is off by
# default and not priced. A NeMo container names its Megatron-Core in the "Software Component Versions" page
# ([NEMO-VERSIONS]: 24.07 ships 0.8, 24.09 ships 0.9; [MB-VERSIONS]: 25.09 ships 0.14, 25.11 0.15, 26.02 0.16,
# 26.04 0.17, 26.06 0.18), so a run from a performance table that names only its container states that
# ("nemo-25.11", or "25.11": no Megatron-Core release is numbered so). A later container is not on that page at
# the commit read: HP535 says so and prices the current release.
_NEMO_CONTAINERS = {"24.07": "0.8", "24.09": "0.9", "25.09": "0.14", "25.11": "0.15", "26.02": "0.16",
                    "26.04": "0.17", "26.06": "0.18"}
MEGATRON_RELEASES = Releases(
    label="Megatron-Core",
    versions=("2021", "0.8", "0.9", "0.10", "0.11", "0.12", "0.13", "0.14", "0.15", "0.16", "0.17", "0.18",
              "0.19"),
    aliases=MappingProxyType({**{f"nemo-{c}": v for c, v in _NEMO_CONTAINERS.items()}, **_NEMO_CONTAINERS,
                              "nar21": "2021", "kor22": "2021"}),
    facts=(
        ReleaseFact("fsdp_flat_ring", "0.8", True, "FSDP collectives at NCCL's rate over all of a node's NICs; "
                    "before Megatron-Core, NAR21's ZeRO-3 (DeepSpeed beside Megatron-LM) moved every byte "
                    "through each rank's own NIC (the flat ring fitted on its Table 2)",
                    "[CAL] §2 (NAR21 Table 2); Framework.fsdp_flat_ring"),
        ReleaseFact("zero3_gathers_modules", "0.8", True, "FSDP gathering a transformer block at a time; NAR21's "
                    "DeepSpeed ZeRO-3 gathered module by module", "[DS-EST]; [PT-FSDP2]"),
        ReleaseFact("expert_fold", "0.10", False, "MoE Parallel Folding (expert groups laid out on their own: "
                    "an EP group's ranks etp apart, not tp·cp)",
                    "[MCORE-CHANGELOG] 0.10.0 'MoE Parallel Folding'; [MCORE-PS]"),
        ReleaseFact("deepep", "0.12", False, "DeepEP dispatch (--moe-enable-deepep, the flex dispatcher)",
                    "[MCORE-CHANGELOG] 0.12.0 'DeepEP support'; [MCORE-MOE]"),
        ReleaseFact("probs_in_activation", "0.13", False, "the router's probabilities applied in the experts' "
                    "activation: the routed copies' outputs are not kept for the backward",
                    "[MCORE-MOE] v0.13 'Memory efficient token permutation'"),
        ReleaseFact("recompute_modules", "0.12", (), "recompute by module (--recompute-modules)",
                    "[MLM-ARGS] core_v0.12.0: --recompute-modules and TransformerConfig.recompute_modules, absent at "
                    "core_v0.11.0 and core_v0.12.0rc2 ([MCORE-CHANGELOG] lists it under 0.13.0)"),
        ReleaseFact("layer_layout", "0.13", False, "a per-chunk layer layout (--pipeline-model-parallel-layout)",
                    "[MCORE-CHANGELOG] 0.13.0; [MCORE-PPLAYOUT]"),
        ReleaseFact("selective_policies", "0.12", ("attention",), "selective recompute by module",
                    "[MLM-ARGS] core_v0.12.0 (as recompute_modules)"),
        ReleaseFact("ep_overlap", "0.14", "", "the batch-level expert all-to-all overlap "
                    "(--overlap-moe-expert-parallel-comm)", "[MCORE-MOE] v0.14"),
    ),
)

# torchtitan releases whose facts differ (`estimator.framework_version: "0.1"`, also "v0.1.0", or the commit / month
# of a published run): "0.0" before the first tag, v0.1.0 (2025-06-17), v0.2.0 (2025-10-17; 0.2.1, 0.2.2), "main"
# the current source engine/catalog facts were read at (ChunkedLossWrapper by default, mid-2026). Aliases name the
# runs this repository prices: TT-BENCH 2024-12 (9dec370), the A100 run (04133643, 2024-04), the 2025-06 async-TP
# page ("2025-06") and the H200 page's e7c0cae (2025-06-13, four days before v0.1.0, with its loss code), and the
# NVFP4 page's 73aed7f6 (main).
TORCHTITAN_RELEASES = Releases(
    label="torchtitan",
    versions=("0.0", "0.1", "0.2", "main"),
    aliases=MappingProxyType({"9dec370": "0.0", "04133643": "0.0", "2025-06": "0.1", "e7c0cae": "0.1",
                              "73aed7f6": "main"}),
    facts=(
        ReleaseFact("compiled_loss_peak_bytes", "0.1", 0.0, "the cross-entropy compiled with the model "
                    "(training.compile)", "[TT-LOSS] build_cross_entropy_loss (#1033, 2025-04-02); #755 "
                    "(2024-12-18) had turned it off"),
        ReleaseFact("loss_chunks", "main", 1, "the chunked loss (ChunkedLossWrapper, 8 chunks)",
                    "[TT-LOSS] ChunkedLossWrapper in the model configs, #3779 (2026-06)"),
        ReleaseFact("space.grad_accumulation", "0.1", False, "gradient accumulation without a pipeline "
                    "(training.global_batch_size over local_batch_size · dp)", "[TT-GRADACC] #1238 (2025-06)"),
    ),
)

# MindSpeed-LLM releases whose facts differ (`estimator.framework_version: "1.0.RC3"`; also its tag "v1.0.RC3.0", the
# MindSpeed core tag it pins, "1.0.RC3_core_r0.6.0", and "2.2" for "2.2.0"): oldest first, the last the current
# one (v26.1.0, 2026-08-04). Each fact is read in the tags' own code [MS-LLM-REL]: what a release's argument checks
# switch off whatever the launch script passes counts as absent there. The Megatron-LM each builds on: core_r0.6.0
# (1.0.RC2 - 1.0.0), core_r0.8.0 (2.0.0, 2.1.0), core_v0.12.1 (2.2.0 on). A commit of the development branch
# between two tags prices as the tag before it (the Qwen3-30B-A3B run's master 9d6963b1, 2026-06-03: 26.0.0).
_MINDSPEED_VERSIONS = ("1.0.RC1", "1.0.RC2", "1.0.RC3", "1.0.0", "2.0.0", "2.1.0", "2.2.0", "2.3.0", "26.0.0",
                       "26.1.0")
_MINDSPEED_CORE_TAGS = {"1.0.RC2": ("0.6.0",), "1.0.RC3": ("0.6.0", "0.7.0"), "1.0.0": ("0.6.0", "0.7.0"), "2.0.0": ("0.8.0",),
                        "2.1.0": ("0.8.0", "0.12.1"), "2.2.0": ("0.12.1",), "2.3.0": ("0.12.1",), "26.0.0": ("0.12.1",)}


def _mindspeed_aliases() -> Mapping[str, str]:
    """Every spelling of a MindSpeed-LLM release that Releases.normalise (which lowers the case) is to find."""
    out: dict[str, str] = {"master-9d6963b1": "26.0.0", "9d6963b1": "26.0.0"}
    for v in _MINDSPEED_VERSIONS:
        low = v.lower()
        out[low] = out[f"{low}.0"] = v  # "1.0.rc3", the tag "v1.0.RC3.0"
        if low.endswith(".0"):
            out[low.removesuffix(".0")] = v  # "2.2"
            out.update({f"{low.removesuffix('.0')}.{patch}": v for patch in range(1, 10)})  # a patch: "2.2.1"
        for core in _MINDSPEED_CORE_TAGS.get(v, ()):
            out[f"{low}_core_r{core}"] = v
    return MappingProxyType(out)


MINDSPEED_RELEASES = Releases(
    label="MindSpeed-LLM",
    versions=_MINDSPEED_VERSIONS,
    aliases=_mindspeed_aliases(),
    facts=(
        ReleaseFact("tp_comm_overlap_name", "2.2.0", "", "MC2 (--use-mc2): up to 2.1.0 its argument checks set "
                    "use_mc2 off whatever the script passes (its README: comment that line out to run MC2)",
                    "[MS-LLM-REL] validate_args_decorator `args.use_mc2 = False` at v1.0.RC2.0 - v2.1.0; from "
                    "v2.2.0 the deprecated-arguments feature sets use_ascend_mc2 from --use-mc2 after that check"),
        ReleaseFact("swaps_attention", "1.0.RC3", False, "the attention swap to the host (--swap-attention)",
                    "[MS-LLM-REL] modellink/arguments.py @v1.0.RC3.0 adds --swap-attention"),
        ReleaseFact("schedules", "2.0.0", ("1F1B", "interleaved"), "DualPipeV (--schedules-method dualpipev)",
                    "[MS-LLM-REL] mindspeed_llm/training/arguments.py @v2.0.0"),
        ReleaseFact("ep_overlap", "2.0.0", "", "the expert all-to-all overlap (--moe-alltoall-overlap-comm; the "
                    "argument checks set it off before)", "[MS-LLM-REL] _add_dummy_args @v1.0.RC3.0, v1.0.0"),
        ReleaseFact("noop_layers", "2.0.0", False, "no-op layers (--noop-layers; the argument checks set them to "
                    "None before)", "[MS-LLM-REL] _add_dummy_args @v1.0.RC3.0, v1.0.0"),
        ReleaseFact("space.fsdp", "2.2.0", "", "the FSDP2 route (--use-torch-fsdp2 --fsdp2-config-path)",
                    "[MS-LLM-REL] examples/mcore/qwen3/*_fsdp2_A3.sh @v2.2.0; MindSpeed docs/features/fsdp2.md "
                    "@v2.2.0_core_r0.12.1"),
    ),
)

FRAMEWORKS: Mapping[str, Framework] = MappingProxyType({
    "megatron": Framework(
        name="megatron", label="Megatron-LM / Megatron-Core / NeMo", allgather_dispatch=True,
        fused_elementwise=True, compile_fuses=False,
        attention_kernel="TransformerEngine fused attention (cuDNN / FlashAttention)", attention_rate=_TE_ATTN,
        tp_overlap=True, tp_comm_overlap_name="--tp-comm-overlap (TransformerEngine userbuffers)", fsdp2=False,
        fsdp_reduce_bytes=0.0, selective_policies=("attention", "modules"), loss_parallel=True,
        loss_bytes_per_logit=4.0, loss_kind="fused", loss_peak_bytes=4.0, schedules=("1F1B", "interleaved"),
        recompute_modules=RECOMPUTE_MODULES,
        calibrated_on=("N1", "N2", "K5", "M", "grok1-314b-512xh100-nemo"),
        fp8_keeps="TransformerEngine FP8: linear-layer GEMMs in FP8 (delayed scaling); attention, norms, router, "
                  "output layer and loss in BF16/FP32; an FP8 transposed weight copy kept per parameter",
        ep_overlap="batch", shared_expert_overlap=True, fp8_saved_inputs=True,
        ep_overlap_names="--overlap-moe-expert-parallel-comm (MCore v0.14), --moe-shared-expert-overlap",
        expert_fold=True, probs_in_activation=True,
        layout_keys="account_for_embedding_in_pipeline_split, account_for_loss_in_pipeline_split, "
                    "num_layers_in_first_pipeline_stage, num_layers_in_last_pipeline_stage (Megatron-Core "
                    "TransformerConfig; MCORE-PP), pipeline_model_parallel_layout (MCORE-PPLAYOUT)", chooses_accounting=True,
        layer_layout=True, space=_MEGATRON_SPACE,
        releases=MEGATRON_RELEASES, release=MEGATRON_RELEASES.current),
    "mindspeed": Framework(
        name="mindspeed", label="MindSpeed-LLM (Megatron-Core on Ascend)", allgather_dispatch=True,
        fused_elementwise=True,
        compile_fuses=False, attention_kernel="Ascend FlashAttention (npu_fusion_attention, --use-flash-attn)",
        attention_rate=_rates(**{"": 0.50}), tp_overlap=True,
        tp_comm_overlap_name="MC2 (matmul fused with the TP collective)", fsdp2=False, fsdp_reduce_bytes=0.0,
        selective_policies=("attention", "modules"), loss_parallel=True, loss_bytes_per_logit=4.0,
        loss_kind="fused", loss_peak_bytes=4.0,
        recompute_modules=tuple(x for x in RECOMPUTE_MODULES if x != "shared_experts"),
        schedules=("1F1B", "interleaved", "dualpipev"),
        calibrated_on=("ascend-llama2-70b-32xa2-mindspeed", "ascend-llama2-7b-8xa2-mindspeed",
                       "ascend-llama2-34b-16xa2-mindspeed", "ascend-qwen3-30b-a3b-16xa2-mindspeed",
                       "ascend-mixtral-8x22b-64xa2-mindspeed"),
        fp8_keeps="no FP8 on 910B (A2/A3 have no FP8 tensor units)",
        ep_overlap="chunked", shared_expert_overlap=True,
        ep_overlap_names="--moe-alltoall-overlap-comm, --moe-shared-expert-overlap", grad_accum_fusion=False,
        param_gather_overlap=False,
        npu_gemms=True, mc2=True, tp_comm_overlap_not_on=("A3",), swaps_attention=True, noop_layers=True,
        space=_MINDSPEED_SPACE,
        releases=MINDSPEED_RELEASES, release=MINDSPEED_RELEASES.current),
    "torchtitan": Framework(
        name="torchtitan", label="torchtitan (FSDP2 + DTensor TP/PP/CP)", fused_elementwise=False,
        compile_fuses=True, attention_kernel="PyTorch SDPA (FlashAttention-2 on H100)", attention_rate=_SDPA_ATTN,
        tp_overlap=False, tp_comm_overlap_name="async TP (torch._inductor micro-pipelining)",
        tp_comm_overlap_backward=False, fsdp2=True,
        fsdp_reduce_bytes=4.0, selective_policies=("op",), loss_parallel=True, loss_bytes_per_logit=10.0,
        loss_kind="eager_fp32", loss_peak_bytes=12.0,
        schedules=("1F1B", "interleaved"),
        calibrated_on=("llama31-8b-8xh100-96g-torchtitan-compile", "llama31-70b-256xh100-96g-torchtitan-fsdp32tp8"),
        pp_unsharded=True, loss_parallel_peak_bytes=16.0, pp_recv_per_microbatch=True, loss_chunks=8,
        ring_merge=PYTORCH_RING_MERGE,
        compiled_loss_peak_bytes=4.0, allocator_overhead=TORCHTITAN_ALLOCATOR_OVERHEAD,
        fp8_keeps="torchao Float8 linear layers (dynamic scaling); attention, norms and the output layer in "
                  "BF16; FSDP2 all-gathers the weights in FP8",
        default_layout=PipelineLayout(embedding_in_split=True, loss_in_split=True, remainder_first=True),
        layout_keys="pipeline_parallel_first_stage_less_layers / pipeline_parallel_last_stage_less_layers (the "
                    "embedding's and output's weight in its split, 1 each by default; TT-SRC)",
        space=_TORCHTITAN_SPACE, releases=TORCHTITAN_RELEASES, release=TORCHTITAN_RELEASES.current),
    "hyperparallel": Framework(
        name="hyperparallel", label="HyperParallel trainer (FSDP2-style, PyTorch / torch_npu kernels)",
        fused_elementwise=False, compile_fuses=True,
        attention_kernel="PyTorch SDPA / torch_npu fused attention",
        attention_rate=_SDPA_ATTN, tp_overlap=False, tp_comm_overlap_name="", fsdp2=True, fsdp_reduce_bytes=4.0,
        selective_policies=("hyperparallel",), loss_parallel=False, loss_bytes_per_logit=10.0,
        loss_kind="eager_fp32", loss_peak_bytes=12.0, loss_parallel_peak_bytes=16.0,
        schedules=("1F1B", "interleaved", "gpipe"),
        fp8_keeps="FP8 linear layers where the device has FP8 GEMMs; attention, norms, output layer in BF16",
        layout_keys="offset, emb_out_in_offset, mtp_in_offset (its cost model's, [HP] §6.7)",
        swaps_attention=True, space=_HYPERPARALLEL_SPACE),
})

DEFAULT_FRAMEWORK = "hyperparallel"
FRAMEWORK_ALIASES = {"nemo": "megatron", "megatron-lm": "megatron", "megatron-core": "megatron", "mcore": "megatron",
                     "mindspeed-llm": "mindspeed", "titan": "torchtitan", "hyper_parallel": "hyperparallel",
                     "hyper-parallel": "hyperparallel"}


def find_framework(name: str | None) -> Framework | None:
    """Case-insensitive lookup by name or alias; None when unknown."""
    if name is None:
        return FRAMEWORKS[DEFAULT_FRAMEWORK]
    key = str(name).strip().lower()
    return FRAMEWORKS.get(FRAMEWORK_ALIASES.get(key, key))


def framework_of(run: RunOptions) -> Framework:
    """The framework a RunOptions prices (unknown names were refused where they were read), with the facts of the
    release it states (`estimator.framework_version`; unknown or unstated: the current release's)."""
    fw = find_framework(run.framework) or FRAMEWORKS[DEFAULT_FRAMEWORK]
    if fw.releases is None or not run.framework_version:
        return fw
    return at_release(fw.name, run.framework_version)


@lru_cache(maxsize=64)
def at_release(name: str, version: str) -> Framework:
    """FRAMEWORKS[name] as release `version` ran it: each fact the release does not have yet reads its older
    value (ReleaseFact.before). Cached: pricing asks for it per block of rows."""
    fw = FRAMEWORKS[name]
    rel = fw.releases
    v = rel.normalise(version) if rel is not None else None
    if rel is None or v is None:
        return fw
    missing = rel.missing(v)
    space = {f.field.removeprefix("space."): f.before for f in missing if f.field.startswith("space.")}
    own = {f.field: f.before for f in missing if not f.field.startswith("space.")}
    return replace(fw, release=v, space=replace(fw.space, **space) if space else fw.space, **own)


def release_label(fw: Framework, stated: str) -> str:
    """The release an estimate names: the version priced, with the stated spelling beside it where that is an
    alias (a published run's commit or month) rather than the version itself ("0.0 (9dec370)"); the stated text
    for a framework without releases."""
    rel = fw.releases
    if rel is None or not fw.release:
        return stated
    if stated and stated.strip().lower() in rel.aliases:
        return f"{fw.release} ({stated})"
    return fw.release


def effective_policy(fw: Framework, run: RunOptions) -> str:
    """The selective-recompute policy priced: the stated one where the framework offers it, else the
    framework's own (a stated policy it does not offer gets a diagnostic: engine.cost.strategy_rules)."""
    if priced_modules(fw, run):
        return "modules"
    if run.selective_policy == "modules":  # modules without a module list: the stack's default list
        return "attention" if "attention" in fw.selective_policies else fw.selective_policies[0]
    return run.selective_policy if run.selective_policy in fw.selective_policies else fw.selective_policies[0]


def priced_modules(fw: Framework, run: RunOptions) -> tuple[str, ...]:
    """The stated recompute modules this framework runs (the others get HP531 where they are stated)."""
    return tuple(x for x in run.recompute_modules if x in fw.recompute_modules)


def calibration_hint(fw: Framework) -> str:
    """What an estimate says about how far its framework's figures are checked."""
    if fw.calibrated:
        return f"{fw.name} checked against {len(fw.calibrated_on)} published run families ([CAL])"
    return (f"{fw.name} is uncalibrated: priced from its stack's facts; measure a run and fit it with "
            "`hp-plan calibrate RUNS -o ratios.yaml`, then set estimator.ratios_file")


def taken_layout(run: RunOptions) -> PipelineLayout:
    """The stated pipeline layout as far as the framework takes it: a per-chunk layer layout counts only on a
    stack that can be told one (Framework.layer_layout), no-op layers only on one that pads with them
    (Framework.noop_layers); HP533 says so where it cannot, so neither their price nor the checks of the stack
    that can (HP422) apply to them there."""
    lay = run.pipeline_layout
    fw = framework_of(run)
    if lay.layer_layout and not fw.layer_layout:
        lay = replace(lay, layer_layout=())
    if lay.noop_layers and not fw.noop_layers:
        lay = replace(lay, noop_layers=())
    return lay


def effective_layout(run: RunOptions) -> PipelineLayout:
    """The pipeline layout priced (engine.cost.layout): what the files state and the framework takes
    (taken_layout), else the framework's own split (torchtitan counts the embedding and the output as layers),
    else the even split."""
    lay = taken_layout(run)
    return lay if lay.stated else framework_of(run).default_layout
