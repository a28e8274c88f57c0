"""The row context of one priced block: every per-row quantity the memory and time terms share, built once.

A CandidateTable holds raw integer columns (degrees, sizes, codes); pricing needs them as float arrays
with their floors applied (pp ≥ 1, cp ≥ 1, ...), a few derived sizes (T tokens per rank, the expert
data-parallel group), the device's rates, and where each row's layers sit (stage layout, micro-batches in
flight). `Rows` is that, computed once per block so that engine.cost.memory, engine.cost.timing and
engine.cost.communication read the same values instead of recomputing them. Notation as in engine.cost.price.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from engine.catalog.devices import matmul_efficiency
from engine.catalog.frameworks import Framework, effective_policy, framework_of, priced_modules
from engine.cost import constants as K
from engine.cost.collectives import Links
from engine.cost.dualpipev import dualpipev_in_flight, dualpipev_rows, last_stage
from engine.cost.fp8 import Fp8Recipe, recipe_of
from engine.cost.layout import (
    chunk_kind_counts,
    chunk_layer_stage,
    chunk_type_counts,
    effective_layout,
    in_flight,
    layer_stage,
    layout_or_default,
    mtp_stage,
    stage_type_counts,
    weighted_in_flight,
)
from engine.cost.model import AttnShape, attn_shape, routed_copies
from engine.cost.table import CandidateTable
from engine.specs import HYBRID_KIND_ORDER, ClusterSpec, ModelSpec, PipelineLayout, RunOptions

DENSE, MOE = 0, 1
OFF, SELECTIVE, FULL = 0, 1, 2


@dataclass(frozen=True, slots=True)
class Rows:
    """Per-row arrays (n,) and stage-layout arrays (n, P) of one block, plus the model, run and device rates.

    Degrees are float64 with their floors applied; `sp` is sequence parallelism in effect (tp > 1);
    `sp_div` is what sequence parallelism divides the residual stream by (t, or 1 without it); `edp` the
    expert data-parallel size dp·cp·t/(ep·etp) and `edp_i` it rounded to a group size (≥ 1);
    `moe_copies` the routed copies of a token the busiest expert rank moves and computes (busiest_rank_copies:
    top-k × MOE_IMBALANCE dropless, top-k × the stated capacity factor; 0 for dense models). Stage layout: `counts` (n, P, 2) layers per stage and type,
    `counts_m` (n, P, 2, 3) per mode too when the table has per-layer modes, `mode_row` each row's uniform
    mode, `first`/`last`/`valid` (n, P) stage masks, `mf` micro-batches in flight per stage.

    Framework facts (engine.catalog.frameworks): `fw`; `elem_traffic` HBM bytes per kept activation byte of the
    element-wise work (× EAGER_ELEMENTWISE_FACTOR where the kernels run eager); `attn_frac` the attention
    kernel's rate as a fraction of the datasheet peak, × the part's sustained clock share (a power cap slows
    every tensor-core kernel, attention as much as the GEMMs); `wgemm_rate` the weight GEMMs' rate (FP8 where `fp8` is on and the
    device has FP8 GEMMs), `modules` the recompute modules priced under policy "modules", `lin_bytes` the bytes of each
    saved linear-layer input element (FP8 where the framework saves the FP8 cast), `compiled` whether
    torch.compile runs the checkpointed blocks (what selective "op" keeps, memory._op_policy_terms), `gemm_rate` the BF16 rate (attention core, router, output layer); `loss_div` what
    divides the vocabulary each TP rank's loss streams (t with loss parallel, else 1: the full vocabulary).
    """

    model: ModelSpec
    run: RunOptions
    cluster: ClusterSpec
    table: CandidateTable
    n: int
    P: int
    rows: np.ndarray
    t: np.ndarray
    p_i: np.ndarray
    p: np.ndarray
    cp: np.ndarray
    ep: np.ndarray
    etp: np.ndarray
    v: np.ndarray
    b: np.ndarray
    mb: np.ndarray
    sp: np.ndarray
    sp_div: np.ndarray
    dp: np.ndarray
    fs: np.ndarray
    os_: np.ndarray
    edp: np.ndarray
    edp_i: np.ndarray
    T: np.ndarray
    s: float
    h: float
    V: float
    is_moe: bool
    moe_copies: float
    attn: AttnShape
    peak: float
    gemm_rate: float
    wgemm_rate: float
    fp8: bool
    fw: Framework
    policy: str
    modules: tuple[str, ...]
    lin_bytes: float
    compiled: bool
    elem_traffic: float
    attn_frac: float
    loss_div: np.ndarray
    logit_bytes: float
    hbm: float
    links: Links
    counts: np.ndarray
    counts_m: np.ndarray | None
    mode_row: np.ndarray
    first: np.ndarray
    last: np.ndarray
    valid: np.ndarray
    mf: np.ndarray
    # The FP8 recipe priced (engine.cost.fp8; None: BF16): its casts' HBM traffic and its weight caches.
    fp8_recipe: Fp8Recipe | None = None
    # A hybrid model's decoder layers of each kind per stage (n, P, K), engine.specs.HYBRID_KIND_ORDER
    # (_stage_kinds, layout.chunk_kind_counts; DualPipeV rows, whose V fold no chunk list here says, hold the mix);
    # None for other models. What the stage's parameters are (engine.cost.memory.stage_params).
    kinds: np.ndarray | None = None

    @property
    def dispatcher(self) -> str:
        """The MoE dispatcher priced: the stated one (estimator.moe_dispatcher), all-to-all where the framework's
        release has no DeepEP (Framework.deepep; HP535 says so) or the stack no all-gather dispatcher
        (Framework.allgather_dispatch; HP533)."""
        stated = self.run.moe_dispatcher
        if (stated == "deepep" and not self.fw.deepep) or (stated == "allgather" and not self.fw.allgather_dispatch):
            return "alltoall"
        return stated

    @property
    def fp8_gather(self) -> bool:
        """Whether the weights are all-gathered in FP8, 1 byte per linear weight: FP8 on with fp8_param_gather
        (Megatron's --fp8-param-gather, MLM-FP8PARAM; torchao's FSDP float8 all-gather); their 16 bits otherwise."""
        return self.fp8 and self.run.fp8_param_gather

    @property
    def cp_algo(self) -> str:
        """The context-parallel algorithm priced: the stated one where the stack runs it, else its ring
        (StackSpace.cp_algo; HP533 says so)."""
        return self.fw.space.cp_algo(self.run.cp_algo)

    @property
    def ep_stride(self) -> np.ndarray:
        """(n,) rank distance between an EP group's members: etp where the stack folds its expert layers onto
        their own layout (Framework.expert_fold), else tp·cp (EP carved from the data-parallel ranks)."""
        return self.table.etp if self.fw.expert_fold else self.table.tp * self.table.cp

    @property
    def ep_overlap(self) -> str:
        """The expert all-to-all overlap the run states and its stack offers (Framework.ep_overlap: "batch",
        "chunked"; "" = none: not stated, or the stack's release has none)."""
        return self.fw.ep_overlap if self.run.moe_a2a_overlap else ""

    @property
    def dualpipev(self) -> np.ndarray:
        """(n,) bool: rows run as DualPipeV (engine.cost.dualpipev)."""
        return dualpipev_rows(self.table.schedule, self.p_i)

    @property
    def fb_overlap(self) -> np.ndarray:
        """(n,) bool: DualPipeV rows whose run turns the cross-micro-batch overlap on (`moe_a2a_overlap`, MindSpeed
        `--moe-fb-overlap`, [MS-DUALPIPEV]): the all-to-alls and P2P of one micro-batch hide under another's."""
        return self.dualpipev & bool(self.run.moe_a2a_overlap)

    @property
    def types(self) -> tuple[int, ...]:
        """The layer types this model has (a dense model's "MoE" column repeats the dense one)."""
        return (DENSE, MOE) if self.is_moe else (DENSE,)

    def stage_sum(self, per_layer: np.ndarray) -> np.ndarray:
        """(n, 2, 3) per layer -> (n, P) per stage: Σ over type and mode of layers × value."""
        if self.counts_m is None:  # uniform mode: one column per type
            sel = per_layer[self.rows, :, self.mode_row]  # (n, 2)
            out = self.counts[:, :, 0] * sel[:, None, 0]
            return out + self.counts[:, :, 1] * sel[:, None, 1] if self.is_moe else out
        return _contract(self.counts_m, per_layer[:, None, :, :])

    def at_stage(self, stage: np.ndarray, per_layer: np.ndarray) -> np.ndarray:
        """(n,) Σ over the layers of each row's given stage of a per-layer (n, 2, 3) value."""
        rows = np.arange(len(stage))
        if self.counts_m is None:
            sel = per_layer[rows, :, self.mode_row]
            c = self.counts[rows, stage]
            return c[:, 0] * sel[:, 0] + c[:, 1] * sel[:, 1]
        cm = self.counts_m[rows, stage]  # (n, 2, 3)
        out = cm[:, 0, 0] * per_layer[:, 0, 0]
        for k in range(2):
            for mo in range(3):
                if k or mo:
                    out = out + cm[:, k, mo] * per_layer[:, k, mo]
        return out


def busiest_rank_copies(m: ModelSpec, forced_balance: bool = False) -> float:
    """Routed copies per token the busiest expert rank moves and computes (0 for a dense model). Dropless
    routing (no capacity stated) lands unevenly: the mean copies × MOE_IMBALANCE, unless the run forces the
    balance (RunOptions.moe_router_force_load_balancing: the mean). A stated capacity factor is the token-drop
    path (Megatron-Core `--moe-expert-capacity-factor` with `--moe-pad-expert-input-to-capacity`, as the NeMo
    recipes run it, [CAL] §10-§11): every expert receives exactly its capacity, top-k × the factor, and no rank
    more (without padding, at most that)."""
    if not m.is_moe:
        return 0.0
    return routed_copies(m) if m.token_drop or forced_balance else routed_copies(m) * K.MOE_IMBALANCE


def build_rows(model: ModelSpec, cluster: ClusterSpec, run: RunOptions, table: CandidateTable, P: int) -> Rows:
    """The row context of `table`, with stage arrays P wide (the whole table's largest pp)."""
    m = model
    n = len(table)
    f64 = np.float64
    t = table.tp.astype(f64)
    p_i, v_i = _pipeline_shape(table)
    cp = np.maximum(table.cp, 1).astype(f64)
    ep = np.maximum(table.ep, 1).astype(f64)
    etp = np.maximum(table.etp, 1).astype(f64)
    b = table.micro_batch_size.astype(f64)
    mb = np.maximum(table.micro_batch_num, 1).astype(f64)
    sp = table.sequence_parallel.astype(bool) & (table.tp > 1)
    dp = np.maximum(table.dp, 1).astype(f64)
    edp = np.maximum(dp * cp * t / (ep * etp), 1.0)
    dev = cluster.device
    peak = dev.peak_tflops * K.TERA
    fw = framework_of(run)
    eff = dev.matmul_efficiency or matmul_efficiency(dev.name)
    frac = K.MINDSPEED_GEMM_FRACTION_OF_MAMF if fw.npu_gemms else K.GEMM_FRACTION_OF_MAMF
    if dev.generation == "blackwell":
        frac *= K.BLACKWELL_GEMM_FACTOR
    gemm_rate = peak * eff * dev.clock_fraction * frac
    recipe = recipe_of(run, dev)
    fp8 = recipe is not None
    wgemm_rate = (dev.fp8_tflops * K.TERA * (dev.fp8_matmul_efficiency or eff) * dev.clock_fraction
                  * frac) if fp8 else gemm_rate
    elem = K.ELEMENTWISE_TRAFFIC_PER_KEPT_BYTE * (1.0 if fw.fused(run) else K.EAGER_ELEMENTWISE_FACTOR)
    counts, counts_m, last, kinds = _layout(m, run, table, p_i, v_i, P)
    stage_idx = np.arange(P)[None, :]
    return Rows(
        model=m, run=run, cluster=cluster, table=table, n=n, P=P, rows=np.arange(n),
        t=t, p_i=p_i, p=p_i.astype(f64), cp=cp, ep=ep, etp=etp, v=v_i.astype(f64), b=b, mb=mb,
        sp=sp, sp_div=np.where(sp, t, 1.0), dp=dp,
        fs=np.maximum(table.dp_shard, 1).astype(f64), os_=np.maximum(table.optimizer_shard, 1).astype(f64),
        edp=edp, edp_i=np.maximum(np.round(edp).astype(np.int64), 1),
        T=b * float(m.seq_len) / cp, s=float(m.seq_len), h=float(m.hidden), V=float(m.vocab),
        is_moe=m.is_moe, moe_copies=busiest_rank_copies(m, run.moe_router_force_load_balancing),
        attn=attn_shape(m), peak=peak, gemm_rate=gemm_rate, wgemm_rate=wgemm_rate, fp8=fp8, fw=fw, fp8_recipe=recipe,
        policy=effective_policy(fw, run), modules=priced_modules(fw, run),
        lin_bytes=K.FP8_ACT_BYTES if fp8 and fw.fp8_saved_inputs else K.ACT_BYTES,
        compiled=bool(run.compile and fw.compile_fuses),
        elem_traffic=elem, attn_frac=fw.attention_fraction(dev) * dev.clock_fraction,
        loss_div=t if (fw.loss_parallel if run.loss_parallel is None else run.loss_parallel) else np.ones(n),
        logit_bytes=fw.loss_bytes_per_logit,
        hbm=dev.hbm_tb_s * K.TERA * K.HBM_EFFICIENCY,
        links=Links(cluster.cards_per_node, cluster.intra_node_gb_s, cluster.inter_node_gb_s,
                    full_mesh=dev.full_mesh, coll_eff_intra=dev.coll_eff_intra),
        counts=counts, counts_m=counts_m, mode_row=np.clip(table.recompute, 0, 2), first=stage_idx == 0,
        last=last, valid=stage_idx < p_i[:, None],
        mf=dualpipev_in_flight(dualpipev_rows(table.schedule, p_i), mb,
                               _gpipe_in_flight(table.schedule, mb, _in_flight_distinct(m, run, p_i, v_i, mb, P))),
        kinds=kinds,
    )


def _pipeline_shape(table: CandidateTable) -> tuple[np.ndarray, np.ndarray]:
    """(n,) pipeline stages and (n,) virtual chunks per stage each row is priced with (vpp counts under the
    interleaved schedule only)."""
    return np.maximum(table.pp, 1), np.where(table.schedule == 1, np.maximum(table.vpp, 1), 1)


def layer_counts(model: ModelSpec, run: RunOptions, table: CandidateTable) -> np.ndarray:
    """(n, P, 2) decoder layers of each type on each stage, MTP layers included, P the table's largest pp: the
    layout build_rows prices (Rows.counts, PricedTable.layer_count), read without pricing anything (what a
    search's bound needs per pipeline shape)."""
    p_i, v_i = _pipeline_shape(table)
    return _layout(model, run, table, p_i, v_i, int(p_i.max()) if len(table) else 1)[0]


def _gpipe_in_flight(schedule: np.ndarray, mb: np.ndarray, mf: np.ndarray) -> np.ndarray:
    """GPipe runs every micro-batch's forward before any backward (NAR21 §2.2.1; HyperParallel's ScheduleGPipe,
    [HP] Corrections 1), so each stage holds all m micro-batches' activations at its peak, where 1F1B holds
    min(p − i, m); its bubble is 1F1B's (v = 1)."""
    gpipe = (schedule == 2)[:, None] & (mf > 0)
    return np.where(gpipe, mb[:, None], mf) if gpipe.any() else mf


def _distinct(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(one row of each distinct key, each row's key index). A search's table holds a few pipeline shapes
    over hundreds of rows: the layout is computed once per shape and broadcast (D-009)."""
    _, first, inv = np.unique(key, return_index=True, return_inverse=True)
    return first, inv.reshape(-1)


def _in_flight_distinct(m: ModelSpec, run: RunOptions, p_i: np.ndarray, v_i: np.ndarray, mb: np.ndarray,
                        P: int) -> np.ndarray:
    """layout.in_flight, once per distinct (pp, vpp, micro-batch count): a per-row function, so the same
    digits. Under a stated layout whose chunks differ, each stage's count is weighted by its chunks' layers
    (layout.weighted_in_flight)."""
    lay = effective_layout(run)
    if p_i.size < 2 or float(mb.max()) >= 2**31:
        first, inv = np.arange(p_i.size), np.arange(p_i.size)
    else:
        key = (p_i.astype(np.int64) * (int(v_i.max()) + 1) + v_i) * (int(mb.max()) + 1) + mb.astype(np.int64)
        first, inv = _distinct(key)
    out = in_flight(p_i[first], v_i[first], mb[first], P)
    if lay.stated:
        for k, row in enumerate(first.tolist()):
            p, v = int(p_i[row]), int(v_i[row])
            chunks, applied = layout_or_default(m.num_layers, m.mtp_depth, p, v, lay)
            if applied and v > 1:
                out[k, :p] = np.maximum(weighted_in_flight(chunks, int(mb[row])), 1.0)
    return out[inv]


def _layout(m: ModelSpec, run: RunOptions, table: CandidateTable, p_i: np.ndarray, v_i: np.ndarray,
            P: int) -> tuple[np.ndarray, np.ndarray | None, np.ndarray, np.ndarray | None]:
    """Where each row's layers sit: (layers per stage and type, the same per mode too when the table has
    per-layer modes, the last-stage mask, a hybrid model's layers per stage and kind: Rows.kinds)."""
    n = len(table)
    vmax = int(v_i.max()) if n else 1
    first_dense = m.first_k_dense if m.is_moe else m.num_layers
    # (n, P, 2), once per distinct (pp, vpp, DualPipeV): a per-row function, so the same digits.
    dpv = dualpipev_rows(table.schedule, p_i)
    key = (p_i.astype(np.int64) * (vmax + 1) + v_i) * 2 + dpv
    first, inv = _distinct(key) if n > 1 else (np.arange(n), np.arange(n))
    counts = stage_type_counts(m.num_layers, first_dense, p_i[first], v_i[first], P, vmax)
    lay = effective_layout(run)
    moved_mtp = np.full(len(first), -1, dtype=np.int64)  # a layer layout's MTP stage, -1: the last stage's
    if lay.stated:
        for k, row in enumerate(first.tolist()):
            p = int(p_i[row])
            chunks, applied = layout_or_default(m.num_layers, m.mtp_depth, p, int(v_i[row]), lay, bool(dpv[row]))
            if applied:
                counts[k, :] = 0.0
                counts[k, :chunks.shape[0]] = chunk_type_counts(chunks, first_dense)
                if lay.layer_layout:
                    moved_mtp[k] = mtp_stage(lay, p)
    kinds = _stage_kinds(m, lay, p_i[first], v_i[first], dpv[first], P)
    counts = counts[inv]
    last = last_stage(dpv, p_i, P)
    mtp_type = MOE if m.is_moe else DENSE
    if m.mtp_depth:
        at = moved_mtp[inv]
        mtp_at = np.where((at >= 0)[:, None], np.arange(P)[None, :] == at[:, None], last)
        counts[:, :, mtp_type] += np.where(mtp_at, m.mtp_depth, 0)
    counts_m = None  # (n, P, 2, 3) only with per-layer modes
    if table.layer_modes is not None:
        counts_m = _mode_counts(m, run, table, p_i, v_i, P, first_dense, mtp_type)
    return counts, counts_m, last, None if kinds is None else kinds[inv]


def _stage_kinds(m: ModelSpec, lay: PipelineLayout, p: np.ndarray, v: np.ndarray, dpv: np.ndarray,
                 P: int) -> np.ndarray | None:
    """(shapes, P, K) a hybrid model's decoder layers of each kind per stage, one row per pipeline shape
    (`p`, `v`, DualPipeV), from the chunks the layout places (layout_or_default, as the counts: the stated layout
    where it applies, else the even split); a DualPipeV shape's stages, whose V fold the chunks do not say, hold
    the pattern's mix. None for a model without a hybrid pattern."""
    hy = m.hybrid
    if hy is None or not hy.pattern:
        return None
    shares = np.array(hy.kind_shares())
    out = np.zeros((p.size, P, len(HYBRID_KIND_ORDER)))
    for k, (pp, vv, folded) in enumerate(zip(p.tolist(), v.tolist(), dpv.tolist(), strict=True)):
        chunks, _ = layout_or_default(m.num_layers, m.mtp_depth, pp, vv, lay, bool(folded))
        out[k, :pp] = chunks.sum(axis=1)[:, None] * shares if folded else chunk_kind_counts(hy.pattern, chunks)
    return out


def _contract(counts_m: np.ndarray, per: np.ndarray) -> np.ndarray:
    """Σ over layer type and mode of counts × per-layer value, in a fixed order, so a row's result never
    depends on the other rows of the table (einsum/BLAS may re-associate)."""
    out = counts_m[:, :, 0, 0] * per[:, :, 0, 0]
    for k in range(2):
        for mo in range(3):
            if k or mo:
                out = out + counts_m[:, :, k, mo] * per[:, :, k, mo]
    return out


def layer_stages(m: ModelSpec, run: RunOptions, p: np.ndarray, v: np.ndarray,
                 v_shape: np.ndarray | None = None) -> np.ndarray:
    """(n, layers + MTP) the stage of each global layer under the layout priced (MTP layers on the last stage, or
    where a layer layout puts them);
    what per-layer modes and offload (engine.cost.offload) are counted by. `v_shape`: (n,) the DualPipeV rows,
    whose no-op layers fold into a V (engine.cost.layout.chunk_layers)."""
    L = m.num_layers
    st = np.empty((len(p), L + m.mtp_depth), dtype=np.int64)
    st[:, :L] = layer_stage(L, p, v)
    st[:, L:] = (p - 1)[:, None]
    lay = effective_layout(run)
    if lay.stated:
        for row in range(len(p)):
            dpv = bool(v_shape[row]) if v_shape is not None else False
            chunks, applied = layout_or_default(L, m.mtp_depth, int(p[row]), int(v[row]), lay, dpv)
            if applied:
                st[row, :L] = chunk_layer_stage(chunks)
                st[row, L:] = mtp_stage(lay, int(p[row]))
    return st


def _mode_counts(m: ModelSpec, run: RunOptions, table: CandidateTable, p: np.ndarray, v: np.ndarray, P: int,
                 first_dense: int, mtp_type: int) -> np.ndarray:
    """(n, P, 2, 3) layers per stage, type and mode from per-layer mode codes."""
    lm = np.asarray(table.layer_modes, dtype=np.int64)
    n = len(table)
    L = m.num_layers
    total = L + m.mtp_depth
    if lm.shape != (n, total):
        raise ValueError(f"layer_modes must be (rows, {total}), got {lm.shape}")
    st = layer_stages(m, run, p, v, dualpipev_rows(table.schedule, p))
    ty = np.empty(total, dtype=np.int64)
    ty[:L] = np.where(np.arange(L) < first_dense, DENSE, MOE)
    ty[L:] = mtp_type
    idx = ((np.arange(n)[:, None] * P + st) * 2 + ty[None, :]) * 3 + np.clip(lm, 0, 2)
    out = np.bincount(idx.ravel(), minlength=n * P * 6).astype(np.float64)
    return out.reshape(n, P, 2, 3)
