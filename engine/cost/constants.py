"""Every constant of the cost model, in one place, each with its source or the calibration case that set it.

Nothing else in engine/cost holds a magic number: formulas take their coefficients from here, so a reader
can audit what is physics (byte widths, formula coefficients from papers), what is measured hardware
(MAMF, collective efficiency) and what was fitted to [CAL] (marked FITTED,
with the cases that set it; docs/cost-model.md tells how).
"""

from __future__ import annotations

# ---------------------------------------------------------------------------------------------- units
GIB = float(1 << 30)
GB = 1e9
TERA = 1e12

# ------------------------------------------------------------------------------------- byte widths
# KOR22 §4: activations are 16-bit (2 bytes), dropout masks 1 byte; logits kept in fp32 (4 bytes, KOR22 §4.3).
ACT_BYTES = 2.0
MASK_BYTES = 1.0
LOGIT_BYTES = 4.0
# Flash attention keeps one fp32 log-sum-exp per query and head (Dao et al. 2022, Alg. 2).
FLASH_LSE_BYTES = 4.0
# (What a ring attention's steps move outside the kernel is each stack's: engine.catalog.frameworks.RingMerge.)
# FP8 (TransformerEngine): the FP8 copy of each weight and of its transpose, cached between micro-batches.
FP8_WEIGHT_CACHE_BYTES = 2.0
# FP8 (TransformerEngine, [TE-FP8]): a linear layer saves its input for the weight-gradient GEMM as the FP8 cast it
# already made for the forward GEMM (te.Linear / LayerNormLinear / GroupedLinear), 1 byte per element.
FP8_ACT_BYTES = 1.0
# Weights all-gathered in FP8 (Megatron --fp8-param-gather: "keep the compute param in fp8 ... and perform the param
# all-gather in fp8", MLM-FP8PARAM; torchao's FSDP float8 all-gather): 1 byte per linear-layer weight element.
FP8_GATHER_BYTES = 1.0
# A loss run in token chunks (torchtitan's ChunkedLossWrapper, [TT-SRC] torchtitan/components/loss.py) keeps, beside
# one chunk's logits, the contiguous chunk copies of the final hidden states (2 bytes per element) and the fp32
# GradAccumulator it assembles their gradient in (4): 6 bytes per hidden element of the rank's tokens.
CHUNKED_LOSS_HIDDEN_BYTES = 6.0

# ------------------------------------------------------------------------------------- compute
# Best-shape matmul efficiency (MAMF / peak) per device: engine.catalog.devices.matmul_efficiency
# ([HW] §3.1, MLE-ACC), the catalog's single source of that fact.
# FITTED (grid fit on N1 + N2 + K5, benchmarks/accuracy.py --fit): the fraction of best-shape MAMF that a training run's large GEMMs achieve
# end to end (cuBLAS on real shapes, launch gaps, clocks under power limits). Refitted in 0.01 steps when
# GEMM_HALF_FLOPS came in: weighted mean |e| on N1 + N2 + K5 4.38 % at 0.79, 4.04 % at 0.80, 3.89 % at 0.81,
# 3.98 % at 0.82.
GEMM_FRACTION_OF_MAMF = 0.81
# The same fraction prices the stacks whose linear layers are plain PyTorch GEMMs between FSDP2 hooks and DTensor
# dispatch (torchtitan, HyperParallel's trainer): torch.mm and TransformerEngine call the same cuBLAS(Lt) kernels,
# and what those stacks do differently (eager element-wise kernels, SDPA attention, FSDP2 traffic) is priced
# term by term (engine.catalog.frameworks). Checked, not fitted: torchtitan's Llama 3 8B on 64 A100
# (llama3-8b-64xa100-torchtitan) reads -1.9 % with it. Its two runs on the 500 W H100 96 GB read below this rate:
# that part's sustained share (engine.catalog.devices.H100_96G_SUSTAINED_SHARE, fitted on them).
# FITTED (the two dense MindSpeed-LLM runs of [CAL] §10: ascend-llama2-7b-8xa2-mindspeed and
# ascend-llama2-70b-32xa2-mindspeed): the same fraction for Megatron-Core modules on torch_npu / CANN GEMM
# kernels (Framework.npu_gemms). The MoE run (Qwen3-30B-A3B) is left out of the fit: its error is the MoE path's
# (docs/cost-model.md §8.1), and a GEMM fraction fitted on it would move every dense plan with it.
# benchmarks/accuracy.py --fit, fit_fraction: grid 0.60-1.00 in 0.01, smallest worst |e| over the two runs.
# Refitted when the HCCS collective efficiency was read as bus bandwidth (engine.catalog.devices.HCCS_COLL_EFF,
# 0.76 -> 0.665): 0.87 then read 70B +4.0 % / 7B -2.6 %, 0.88 reads +3.2 % / -3.4 %. Leave-one-out: fitted on the
# 7B alone 0.84 reads the 70B +6.5 %; on the 70B alone 0.92 reads the 7B -6.4 %. The 70B's --use-mc2 is not run by
# its release (MC2_ACHIEVED_SHARE below): priced without it.
MINDSPEED_GEMM_FRACTION_OF_MAMF = 0.88
# FITTED (the two MindSpeed-LLM MoE runs: ascend-qwen3-30b-a3b-16xa2-mindspeed, GroupedMLP on `npu_gmm`, 128
# experts top-8, alltoall_seq at ep 8; ascend-mixtral-8x22b-64xa2-mindspeed, SequentialMLP (its script passes no
# --moe-grouped-gemm), 8 experts top-2, alltoall at etp 8): the share of the rate above that MindSpeed's routed-expert
# MLP reaches end to end on 910B, with what it waits for between its kernels. Why this term: with every other term
# as priced, the time the two runs miss is proportional to their experts' GEMM work (1.87x and 1.66x the priced
# expert GEMMs per layer and micro-batch, forward + backward + recompute), not to the layer count (a fixed cost per
# MoE layer would need 11 ms on Qwen3 and 68 ms on Mixtral), nor to the permuted bytes (5x more on Qwen3, whose gap
# is 1/6 of Mixtral's).
# The two runs cannot separate a slow expert kernel from the waits its data-dependent shapes cost (the tokens per
# expert read on the host before each grouped GEMM or per-expert split, `.tolist()` / `.cpu()` in Megatron-Core's
# dispatcher and experts, which drains the queue); both scale with the experts' work here. No published 910B
# grouped-GEMM rate at these shapes [U]. benchmarks/accuracy.py --fit, fit_fraction: grid 0.20-1.00 in 0.01,
# smallest worst |e| over the two runs: 0.39 (Qwen3 -5.0 %, Mixtral +3.2 %; at 1, -31.0 % and -40.6 %).
# Leave-one-out: on Qwen3 alone 0.35 reads Mixtral +11.3 %; on Mixtral alone 0.41 reads Qwen3 -7.1 %
# (docs/cost-model.md §8.5). Megatron's GPU stacks are not affected (Framework.npu_gemms).
MINDSPEED_EXPERT_GEMM_SHARE = 0.39
# FITTED (the two dense Blackwell runs of [CAL] §11: llama31-405b-128xgb200-nemo, BF16 on GB200, and
# llama3-8b-8xb200-mbridge-fp8, FP8 on B200): the share of the Hopper/Ampere-fitted fraction above that a
# training run's GEMMs keep on Blackwell. The catalog's Blackwell MAMF ([HW] §3.1, MLE-ACC: B200 0.776, GB200
# 0.729 of the dense peak) is a best-shape benchmark; the runs' GEMMs reach less of it than Hopper's do of its
# own (both runs were priced 16-17 % fast with every other term as on Hopper, [CAL] §11). One factor for the
# generation, every stack (the stacks' fractions above are relative to the same cuBLAS kernels).
# benchmarks/accuracy.py --fit, fit_fraction: grid 0.60-1.00 in 0.01, smallest worst |e| over the two runs.
# 0.83 (with the FP8 casts priced, engine.cost.fp8, and the 8B run's file stating its FP8-CS recipe: tensorwise
# casts, weights gathered in FP8) reads 405B -1.3 %, 8B FP8 +1.6 % (docs/cost-model.md §8.2).
# The Qwen3-235B MoE run on GB200 is left out of the fit (its error is the MoE path's).
BLACKWELL_GEMM_FACTOR = 0.83
# Shape penalty: a GEMM whose smallest dimension is x runs at x / (x + GEMM_HALF_DIM) of the large-shape
# efficiency (tile quantisation and poor occupancy on thin shards; cf. Calculon's size-bucketed table,
# [HW] §3.3). 128 = one tensor-core CTA tile edge: a dimension of 128 reaches half efficiency.
GEMM_HALF_DIM = 128.0
# Size penalty: a GEMM (or attention kernel) call of F FLOPs runs at F / (F + GEMM_HALF_FLOPS) of the large-call
# efficiency: launch, tail and occupancy costs that a small problem cannot amortise. The form and value are a
# fit to Calculon's op-size efficiency table ([HW] §3.3, systems/a100_80g.json and h100_80g_nvl8.json:
# ≥ 128 GFLOP 0.95, ≥ 16 GFLOP 0.90, ≥ 1 GFLOP 0.60, below 0.10; relative to the top bucket 1.0, 0.95, 0.63,
# 0.11): F0 = 0.6 GFLOP gives 0.995 at 128, 0.96 at 16, 0.63 at 1 and 0.14 at 0.1 GFLOP. It is what makes the
# tokens a GEMM sees (micro-batch × sequence shard) matter: a 124M model's QKV GEMM is 3.6 GFLOP at one
# 1,024-token sequence (0.86) and 58 GFLOP at 16 (0.99). Not fitted on the calibration runs.
GEMM_HALF_FLOPS = 0.6e9
# The attention kernel's rate as a fraction of peak is a framework fact: engine.catalog.frameworks
# (Megatron's FLASH_ATTN_FRACTION = 0.50 there).
# Memory-bound element-wise work (norms, activations, dropout, softmax without flash, residual adds):
# bytes of HBM traffic per byte of activation the layer keeps, forward; backward moves twice that.
# FITTED (same fit; N1's small models and K5-22B are the most sensitive). KOR22 Table 4 (a 22B layer,
# not fitted) then reads +4 % to +8 %.
ELEMENTWISE_TRAFFIC_PER_KEPT_BYTE = 1.5
# Eager element-wise kernels (torchtitan / HyperParallel without torch.compile: RMSNorm as pow, mean, rsqrt
# and two multiplies; RoPE as slices, multiplies and a concatenation; SiLU and the gate multiply apart; each
# a separate read and write of the activation, [CAL] §10) move this many times the HBM traffic of
# the fused kernels the fit above describes. FITTED on one named pair: torchtitan's Llama 3.1 8B on 8 H100
# 96 GB, eager 5,762 vs compiled 6,667 tokens/s/GPU (llama31-8b-8xh100-96g-torchtitan-compile notes: the
# same table's eager row; step +15.7 % eager).
EAGER_ELEMENTWISE_FACTOR = 2.4
HBM_EFFICIENCY = 0.80  # achievable fraction of HBM bandwidth for streaming kernels ([HW] §3.3, Calculon ≥ 10 MB: 0.75-0.90)
# Backward over forward FLOPs: 2 for GEMMs (dgrad + wgrad); flash attention's backward re-runs QK^T: 2.5.
BWD_GEMM_RATIO = 2.0
BWD_FLASH_RATIO = 2.5
BWD_ELEMENTWISE_RATIO = 2.0

# ------------------------------------------------------------------------------------- communication
# Fraction of the one-direction link rate a ring collective achieves: NVLink 78-82 % ([HW] §3.2,
# MLE-NET 8×A100 / 8×H200); scale-out FITTED (N1 + N2 + K5 grid; N2 ZeRO-3 and K5-530B-DP8 carry it;
# MLE-NET reports 73-74 % at > 1 GiB payloads on EFA).
COLL_EFF_INTRA = 0.78
COLL_EFF_INTER = 0.70
# Latency per ring step (s): NVLink ~ a few µs, IB ~ 5-10 µs (Calculon 10 / 20 µs per transfer).
LAT_INTRA_S = 3e-6
LAT_INTER_S = 8e-6
# Point-to-point (pipeline) efficiency of one link (nvbandwidth pairwise copy 88 %, [HW] §3.2).
P2P_EFF = 0.85

# ------------------------------------------------------------------------------------- overlap
# FITTED (N1 + N2 + K5 grid over [0.3, 0.7]): share of tensor-parallel collective time hidden under GEMMs
# (Megatron overlaps the backward all-reduce with the weight-gradient GEMM; KOR22 §6.2 note). At 0.7 the
# NF-13 choice (tp 8 fastest for the 162B GPT on 64 A100) flips to tp 16.
TP_OVERLAP = 0.30
# With tp_comm_overlap (Megatron --tp-comm-overlap: TransformerEngine userbuffers). TE's default methods
# (transformer_engine/pytorch/module/base.py, initialize_ub): forward all-gathers "ring_exchange" (the local
# chunk's GEMM needs no transfer, the rest arrive under the previous chunk's GEMM: nothing shows),
# forward reduce-scatters "pipeline" in num_splits = 4 chunks (the last chunk's reduce-scatter shows:
# 1/4 of the reduce-scatter, 1/8 of the all-gather + reduce-scatter pair), backward collectives "bulk"
# (run beside the other backward GEMM: hidden up to that GEMM's time). Not fitted.
TP_COMM_OVERLAP_SPLITS = 4
# NOT MEASURED [U]: how much of the per-block bound above MindSpeed's MC2 ([MS-MC2]: `npu_all_gather_base_mm` /
# `npu_mm_reduce_scatter_base`, CANN's fused matmul + HCCL kernels; Framework.mc2) reaches on 910B, as a share of
# the way from MC2 off (0: the linear layers' asynchronous backward all-reduce only, TP_OVERLAP) to the bound (1).
# No source publishes it, and no shown run ran MC2: the two whose scripts pass --use-mc2 at tp 8
# (ascend-llama2-34b-16xa2-mindspeed, ascend-llama2-70b-32xa2-mindspeed) ran MindSpeed-LLM 1.0.RC3, whose argument
# checks set use_mc2 off whatever the script passes (engine.catalog.frameworks.MINDSPEED_RELEASES, [MS-LLM-REL]).
# That is why a share fitted on them had landed at 0.00, the grid's edge (the runs read -6.4 % / +3.2 % at 0 and
# -20.4 % / -9.5 % at 1): they measured the plain path. Priced at 0, no overlap credited that no run has shown, so
# a plan never looks faster for a fusion whose effect is unknown; the releases that run MC2 (2.2.0 on) price it
# so until a run of theirs measures it (`hp-plan calibrate` fits a user's own tp_comm share).
MC2_ACHIEVED_SHARE = 0.0
# FSDP / ZeRO-3 parameter gathers and gradient reduce-scatters are prefetched layer by layer: this share of
# the compute time can hide them (N2-01/N2-04: step ≈ max(compute, communication)). FITTED on N2.
FSDP_OVERLAP = 0.95
# With RunOptions.overlap_grad_reduce / overlap_param_gather (Megatron --overlap-grad-reduce /
# --overlap-param-gather, stated by the MLM-README runs, M family): the share of the last micro-batch's
# backward (first micro-batch's forward) during which the bucketed gradient reduction (ZeRO-1 weight
# all-gather) proceeds at full speed on its own stream (price.dp_exposed_time). Not fitted.
DP_OVERLAP = 1.0
# Megatron-Core DDP bucket size (distributed_data_parallel.py, core_r0.8.0: bucket_size = max(40000000,
# 1000000 × data-parallel size) parameters): with overlap_grad_reduce / overlap_param_gather only the last
# gradient bucket's reduction (the first weight bucket's gather) cannot overlap compute.
DP_BUCKET_PARAMS = 40e6
DP_BUCKET_PARAMS_PER_RANK = 1e6
# Ring context parallelism (Megatron / TransformerEngine's ring attention, HyperParallel colossalai_cp) sends
# each step's KV block to the next rank while the current block's attention runs; a step shows what its
# transfer takes beyond that step's compute, and at least the link latency (the wait for the receive). The
# backward passes KV and dKV (twice the bytes) and returns the last dKV block after the last step. No fitted
# coefficient: engine.cost.communication.ring_cp_exposed.
# Pipeline send/receive is partly asynchronous (Megatron batched isend/irecv).
P2P_OVERLAP = 0.0

# ------------------------------------------------------------------------------------- optimizer step
# Adam step streams, per parameter held by the rank: fp32 master r/w (8), m r/w (8), v r/w (8), fp32 grad
# read (4), 16-bit weight write (2) = 30 bytes (memory bound).
OPTIMIZER_BYTES_PER_PARAM = 30.0
# Unfused gradient accumulation (RunOptions.gradient_accumulation_fusion off), per parameter and micro-batch:
# the weight-gradient GEMM writes a 16-bit gradient (param bytes) that the main-grad hook reads back and adds
# to the main gradient (read + write, grad bytes each): 2 × param bytes + 2 × grad bytes (12 for bf16 weights
# and fp32 main grads), streamed at the HBM rate. Megatron-LM's
# `param.main_grad.add_(param.grad.data)` in its DDP backward hook vs the fused wgrad_gemm_accum_fp32 [MCORE-DDP].

# ------------------------------------------------------------------------------------- memory reserve
# Reserve per device outside the framework's allocator: CUDA context, kernel modules, NCCL channels and their
# buffers (allocated by CUDA/NCCL directly, so not in torch.cuda.memory_stats). HyperParallel adds a fixed 1 GiB
# safety margin ([HP] §6.12); PyTorch's CUDA context alone is ~0.5 GiB on Hopper. Fixed, so the per-layer
# recompute choice stays additive; the allocator's own cached blocks are Framework.allocator_overhead.
RESERVED_GIB = 1.5
# The allocator's reserve over its live tensors is a framework fact: engine.catalog.frameworks
# (TORCHTITAN_ALLOCATOR_OVERHEAD, fitted there on named runs). RESERVED_GIB is what lies outside the allocator.
# The memory verdict's uncertainty is the estimate's own memory band (engine.cost.band; engine.results.verdict).

# ------------------------------------------------------------------------------------- MoE
# Dropless routing (no capacity factor stated) lands unevenly: the busiest expert rank receives this factor more
# tokens than the mean (used for all-to-all volume, expert compute and the dispatcher's TP pair); 1.0 = balanced.
# A stated capacity factor (token drop padded to the capacity, or forced balance) bounds every expert at top-k ×
# the factor instead (engine.cost.rows.busiest_rank_copies). Assumed [U], not fitted.
MOE_IMBALANCE = 1.1
# DeepEP's normal (training) kernels send over RDMA at close to the NIC's rate: 43 GB/s (EP 16), 58 (EP 32) and
# 51 (EP 64) "bottleneck bandwidth" through a CX7 400 Gb/s NIC (~50 GB/s) on H800, DeepSeek-V3's setting
# ([DEEPEP] legacy.md "Normal kernels with NVLink and RDMA forwarding"). Priced at the lowest, 43 of 50, for the
# flex dispatcher's inter-node part (DeepEP and HybridEP), instead of NCCL's collective efficiency
# (COLL_EFF_INTER). Stated, not fitted.
DEEPEP_RDMA_SHARE = 0.86
# Megatron-Core's batch-level all-to-all overlap (--overlap-moe-expert-parallel-comm) hides this share of the
# expert all-to-alls' time under the other micro-batch's compute, not all of it: NVIDIA's matched Nsight A/B
# ([MB-EPOVL]: Qwen3-30B-A3B, 16 H100, EP 16, HybridEP, only the overlap changed) measured 36.55 % of the
# communication time concurrent with GEMM and attention, with compute about twice the communication, so the
# compute under it was not what bounded it (the streams contend; the dispatcher's metadata step waits).
# Stated by the source, not fitted. DualPipe's own overlap (DualPipeV) is priced as [DUALPIPE] states it.
MCORE_BATCH_A2A_HIDDEN_SHARE = 0.3655
