"""The strategy space as numpy columns: every divisor combination, its bounds and validity, refusals counted.

One row per candidate strategy. Levels are expanded outermost first (tp, pp, cp, then the derived dp, then
micro_batch_size with the derived micro_batch_num, fsdp, etp, ep, vpp, sequence_parallel), each level as one
boolean matrix over (rows so far) x (values of the level) so nothing loops per candidate in Python. Rows come
out in lexicographic order of that nest, which makes every later tie-break deterministic.

The space is built factored (`enumerate_groups`, D-009): the fsdp, etp and ep rules read tp, cp and dp
only, so those levels run once per distinct (tp, cp, dp) (a few hundred) instead of once per candidate
prefix, and vpp and sp once per prefix; each row then counts its refusals as often as the plain nest would
(`_Builder.weight`). A `Groups` holds one row per (tp, pp, cp, micro-batch, vpp, sp) and the valid (fsdp,
etp, ep) of each key; `materialise` makes rows of the groups asked for, in the plain nest's order, so the
search materialises only the candidates it may have to price (2.9 M candidates on 110,592 devices are 15k
groups), and `enumerate_space` is every group materialised.

Rules and their sources ([HP] §5 unless stated):
  * dp = N / (tp·pp·cp) is derived, never enumerated: the device product is exact ([HP] §5.4, §10.2).
  * tp divides N, stays inside a node (docs/formats.md §2: TP divides heads and KV heads; HyperParallel's own
    search only bounds it by the KV heads, §5.3 / §11 "validator and search disagree"), and a hybrid model's
    Mamba heads and groups (MCORE-MAMBA).
  * pp ≤ layers / vpp ([HP] §5.3); micro_batch_num ≥ pp when pp > 1 ([HP] §5.6.1, §10.2).
  * cp: the sequence divides by 2·cp; Ulysses needs KV heads divisible by tp·cp; sequence parallelism with
    cp > 1 is refused as HyperParallel's checker does ([HP] §5.6.1, §5.6.5).
  * the global batch: G = dp · micro_batch_size · micro_batch_num, so dp·micro_batch_size divides G
    ([HP] §5.7); micro_batch_num is derived.
  * fsdp (dp_shard) divides dp·cp: HyperParallel's FSDP domain is dp × cp (docs/formats.md §1, §10.2).
  * ep borrows from dp·tp, or dp·cp·tp when the FSDP shard spans cp (here: when it does not divide dp), and
    divides the experts; with etp > 1 the expert group ep·etp divides dp·cp·tp and the expert width divides
    the expert tensor degree ([HP] §5.5, §5.6.3).
  * vpp > 1 only with pp > 1 and then the interleaved schedule; HyperParallel never searches it ([HP] §5.2), we do:
    when auto, the divisors of layers // pp up to VPP_AUTO_MAX (equal chunks, as Megatron requires).

A list or an int restricts a dimension to its values (the domain *is* the list, so a strategy outside a list
is never generated); `auto` or absent searches its bounds. Refusals count the rules a generated candidate
breaks (tp within a node and dividing the heads, pp within the layers, cp and the sequence, ep and the
experts, the batch rule, ...). Values an `auto` dimension never reaches (an fsdp that does not divide dp·cp,
a micro-batch size that does not divide G/dp) are outside its bounds, not refused; a listed value that breaks
any rule is refused and counted, so a refusal can say which rule a listed value broke.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

from engine.arrays import distinct
from engine.catalog.frameworks import FRAMEWORKS, StackSpace, framework_of
from engine.config.stated_layout import noop_fills
from engine.config.types import Config, Dimension
from engine.cost.layout import effective_layout, layout_or_default
from engine.integers import divisors
from engine.specs import ClusterSpec, ModelSpec

# The column names of a space, in nest order. `sp` is 0/1.
COLUMNS: tuple[str, ...] = ("tp", "pp", "cp", "dp", "mbs", "mbn", "fsdp", "etp", "ep", "vpp", "sp", "os")

# An `auto` vpp is searched up to this many chunks per stage: beyond it the bubble gain is below the pricing
# noise while the P2P traffic grows linearly (Narayanan et al. 2021, §2.2: interleaving divides the bubble by
# vpp and multiplies the communication by vpp). A list may ask for more.
VPP_AUTO_MAX = 8

# An `auto` micro-batch size is searched among the divisors of the global batch up to this many sequences:
# far above what fits any model that needs parallelism (activations grow linearly with it), and it keeps a
# mistyped huge global batch from costing a long divisor search. A list may ask for more.
MBS_AUTO_MAX = 1024

# An `auto` cp is searched up to HyperParallel's recommended maximum ([HP] §5.6.5, a warning
# there): MLA 16, GQA 8, MHA 4. Beyond it the attention shards fall below the size where the ring exchange
# hides behind compute. A list may ask for more.
def cp_auto_max(model: ModelSpec) -> int:
    if model.is_mla:
        return 16
    return 8 if model.kv_heads_eff < model.heads else 4


# Refusal reasons, counted per partial candidate at the level where the rule applies.
R_TP_DEVICES = "tp does not divide the devices"
R_TP_NODE = "tp spans more than one node"
R_TP_HEADS = "tp does not divide the attention or KV heads"
R_TP_MAMBA = "tp does not divide the Mamba heads or groups"
R_PP_DEVICES = "tp·pp does not divide the devices"
R_PP_LAYERS = "pp above the layers"
R_PP_COMPILE = "pp > 1 with compile (the stack's trainer refuses them together)"
R_CP_DEVICES = "tp·pp·cp does not divide the devices"
R_CP_SEQ = "sequence length not divisible by 2·cp"
R_CP_ULYSSES = "Ulysses cp needs KV heads divisible by tp·cp"
R_CP_MAMBA = "cp does not split the Mamba heads or groups of a tp rank"
R_DP_LIST = "dp outside its list"
R_DP_BATCH = "dp does not divide the global batch"
R_MBS_BATCH = "dp·micro_batch_size does not divide the global batch"
R_MBN_PP = "micro_batch_num below pp"
R_MBN_LIST = "micro_batch_num outside its list"
R_VPP_MBN = "interleaved with a micro-batch count the stack's schedule does not group"
R_MBN_ACCUM = "micro_batch_num > 1 without pp (the stack's release accumulates no gradients)"
R_FSDP = "fsdp does not divide dp·cp"
R_ETP_WIDTH = "expert width not divisible by etp"
R_ETP_TP = "etp does not divide tp (the stack carves expert TP from TP: no MoE Parallel Folding)"
R_EP_DENSE = "ep > 1 on a dense model"
R_EP_EXPERTS = "ep does not divide the experts"
R_EP_POOL = "ep above the dp·tp it borrows from"
R_EP_WIDTH = "expert width not divisible by the expert tp"
R_EP_ETP = "ep·etp does not divide dp·cp·tp"
R_VPP_PP = "vpp > 1 needs pp > 1"
R_VPP_LAYERS = "pp·vpp above the layers"
R_VPP_SPLIT = "layers not in pp·vpp equal chunks (the stack runs no uneven interleaved split)"
R_VPP_STAGES = "no layers_per_stage gives pp·vpp stages (the stack derives its stages from it)"
R_HYBRID_PP = "pp does not divide a hybrid pattern's layers (the stack cuts it into equal stages)"
R_HYBRID_VPP = "vpp > 1 on a hybrid pattern (the stack runs it without virtual stages)"
R_LAYOUT_SPLIT = "pp·vpp does not divide the layers with the embedding and loss in the split"
R_LAYOUT_STATED = "the stated first/last-stage layers or layer layout do not fit this pp·vpp"
R_SP_CP = "sequence parallelism with cp > 1 (HyperParallel's checker refuses it)"
R_OS = "optimizer shard does not divide dp·cp"
R_FSDP_NONE = "the stack has no FSDP"
R_FSDP_WHOLE = "FSDP over part of dp·cp (the stack shards over the whole data-parallel group)"
R_FSDP_PP = "FSDP with pipeline parallelism (the stack's FSDP does not pipeline)"
R_FSDP_EP = "FSDP with expert parallelism (the stack's FSDP2 route runs no ep)"
R_DPV_STACK = "pipeline parallelism under DualPipeV (the stack does not run that schedule)"
R_DPV_MBN = "micro_batch_num below 2·pp (DualPipeV)"
R_DPV_LAYERS = "layers not a multiple of 2·pp (DualPipeV's stages)"
R_DPV_CP = "DualPipeV with cp > 1 (the stack does not run them together)"

# The strategy space searched when no framework is named: HyperParallel's (the default framework).
DEFAULT_STACK = FRAMEWORKS["hyperparallel"].space


@dataclass(frozen=True, slots=True)
class Space:
    """Candidate strategies as equal-length integer columns (see COLUMNS; int16/int32 where the values allow,
    a broadcast view where a column holds one value; read-only, widen before arithmetic), plus what was refused and why.

    `refused` counts partial candidates by the first rule they break. `value_reasons[dim][value]` lists the
    rules a dimension's value broke at its own level, so a refusal can say why a listed value never appears.
    `dp_values` are the data-parallel degrees the (tp, pp, cp) nest reaches (within a dp list), and
    `mbs_values` the micro-batch sizes offered, for the global-batch refusal."""

    columns: Mapping[str, np.ndarray]
    refused: Mapping[str, int]
    value_reasons: Mapping[str, Mapping[int, tuple[str, ...]]]
    dp_values: tuple[int, ...]
    mbs_values: tuple[int, ...]

    def __len__(self) -> int:
        return int(self.columns["tp"].shape[0])

    def row(self, i: int) -> dict[str, int]:
        return {k: int(v[i]) for k, v in self.columns.items()}


def subspace(space: Space, rows: np.ndarray) -> Space:
    """The candidates `rows` of `space` (in that order), with the whole space's refusal statistics."""
    return Space(columns={k: v[rows] for k, v in space.columns.items()}, refused=space.refused,
                 value_reasons=space.value_reasons, dp_values=space.dp_values, mbs_values=space.mbs_values)


def allowed(dim: Dimension | None) -> tuple[int, ...] | None:
    """The values a declaration restricts a dimension to, or None when it is searched over its bounds."""
    if dim is None or dim.state in ("auto", "absent"):
        return None
    return tuple(dim.values)


@dataclass
class _Builder:
    """Accumulates refusals while the levels expand. Private to one enumeration: no state outlives it.

    `weight`, when set, is how many partial candidates each row stands for: the (fsdp, etp, ep) levels run
    once per distinct (tp, cp, dp) and the (vpp, sp) levels once per candidate prefix, each row counting its
    refusals as often as the rows of the plain nest it represents (so the counts are the plain nest's)."""

    cols: dict[str, np.ndarray]
    refused: Counter[str] = field(default_factory=Counter)
    value_reasons: dict[str, dict[int, list[str]]] = field(default_factory=dict)
    weight: np.ndarray | None = None

    def w(self, name: str) -> np.ndarray:
        """A column widened to int64 for arithmetic (columns are stored narrow)."""
        return self.cols[name].astype(np.int64)

    def _take(self, rows: np.ndarray) -> None:
        """Keep `rows` of every column, one column at a time (the old one freed as soon as the new one exists:
        peak memory is one table, not two)."""
        for c in list(self.cols):
            self.cols[c] = self.cols[c][rows]
        if self.weight is not None:
            self.weight = self.weight[rows]

    def _count(self, bad: np.ndarray) -> int:
        """Partial candidates in `bad` ((R,) or (R, K)), each row counted `weight` times."""
        if self.weight is None:
            return int(bad.sum())
        per_row = bad.sum(axis=1) if bad.ndim == 2 else bad
        return int(np.dot(per_row.astype(np.int64), self.weight))

    def expand(self, name: str, values: np.ndarray, checks: list[tuple[str, np.ndarray]],
               eligible: np.ndarray | None = None) -> None:
        """Cross the current rows with `values` (K,), keep (row, value) pairs that are `eligible` (not counted:
        duplicates and out-of-domain pairs) and pass every check in order (R, K) masks; count the rest."""
        n_rows = self.cols["tp"].shape[0] if self.cols else 1
        shape = (n_rows, values.shape[0])
        alive = np.ones(shape, dtype=bool) if eligible is None else np.broadcast_to(eligible, shape).copy()
        for reason, ok in checks:
            bad = alive & ~ok
            n_bad = self._count(bad)
            if n_bad:
                self.refused[reason] += n_bad
                for v in values[bad.any(axis=0)].tolist():
                    reasons = self.value_reasons.setdefault(name, {}).setdefault(int(v), [])
                    if reason not in reasons:
                        reasons.append(reason)
            alive &= ok
        flat = np.flatnonzero(alive)  # much faster than a 2-D nonzero
        del alive
        new = values.astype(_narrow(values))[flat % shape[1]]
        np.floor_divide(flat, shape[1], out=flat)  # the parent rows, in place
        self._take(flat)
        del flat
        self.cols[name] = new

    def filter(self, checks: list[tuple[str, np.ndarray]]) -> None:
        """Drop rows failing a per-row check, counting them."""
        alive = np.ones(self.cols["tp"].shape[0], dtype=bool)
        for reason, ok in checks:
            bad = alive & ~ok
            n_bad = self._count(bad)
            if n_bad:
                self.refused[reason] += n_bad
            alive &= ok
        if not alive.all():
            self._take(np.nonzero(alive)[0])


def _auto(restricted: tuple[int, ...] | None, within: np.ndarray) -> np.ndarray | None:
    """For a dimension searched over its bounds, the (row, value) pairs inside them: values outside are no
    candidates at all, not refusals. A list or a fixed value is checked (and refused) instead."""
    return within if restricted is None else None


def _domain(restricted: tuple[int, ...] | None, default: list[int]) -> np.ndarray:
    vals = sorted(set(restricted)) if restricted is not None else default
    return np.asarray(vals, dtype=np.int64)


def _narrow(values: np.ndarray) -> type:
    """The narrowest integer type that holds `values` (non-negative degrees and counts)."""
    hi = int(values.max()) if values.size else 0
    return np.int16 if hi < 2**15 else np.int32 if hi < 2**31 else np.int64


def _narrowed(values: np.ndarray) -> np.ndarray:
    return values.astype(_narrow(values))


def _compact(col: np.ndarray) -> np.ndarray:
    """A finished column in little memory: one value as a read-only broadcast view (no memory per row),
    degrees below 2^15 as int16, others as built. Consumers widen before any arithmetic (pricing.table_of)."""
    if col.size == 0:
        return np.ascontiguousarray(col)
    lo, hi = int(col.min()), int(col.max())
    if col.size > 1 and lo == hi:
        return np.broadcast_to(col[:1], col.shape)
    if hi < 2**15:
        return col.astype(np.int16)
    return np.ascontiguousarray(col)


@dataclass(frozen=True, slots=True)
class _Ctx:
    """What every level's rules read: the model, the cluster's size, the batch and the declared domains."""

    model: ModelSpec
    n: int
    g: int
    node: int
    dev_divs: list[int]
    restrict: Mapping[str, tuple[int, ...] | None]
    cp_algo: str
    optimizer_shard: int
    # The stack's strategy space (engine.catalog.frameworks.StackSpace): its FSDP route, SP rules, optimizer.
    stack: StackSpace = DEFAULT_STACK
    # The embedding, loss and no-op layers the pipeline layout counts as layers of the split
    # (engine.specs.PipelineLayout), which chunks may hold alone; negative when the split need not divide
    # (torchtitan's own).
    extra_slots: int = 0
    # The files state DualPipeV (engine.cost.dualpipev), and whether the stack runs it (Framework.schedules).
    dualpipev: bool = False
    dualpipev_runs: bool = False
    # The search prices this config's interleaved splits padded with no-op layers in passes of their own
    # (pads_interleaved): the candidates those passes serve are theirs, neither built nor refused here.
    padded_interleave: bool = False
    # How the stack splits a hybrid pattern (StackSpace.hybrid_even_split; hybrid_split): "" freely, "even" into
    # pp equal stages and no virtual ones, "stated" no virtual stages (the files state the first/last stages).
    hybrid_split: str = ""
    # Whether the stack runs expert TP etp beside tp (Framework.etp_fits); None: any etp the ranks hold.
    etp_fits: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None
    # Whether the files' stated stage counts or layer layout place the layers at (pp, vpp) (stated_layout_fits);
    # None: nothing stated that a candidate must fit.
    layout_fits: Callable[[int, int], bool] | None = None
    # The files compile the model on a stack whose trainer refuses compile with a pipeline (StackSpace.compile_with_pp).
    compile_without_pp: bool = False

    def r(self, name: str) -> tuple[int, ...] | None:
        return self.restrict.get(name)

    @property
    def slots(self) -> int:
        """The layers the pipeline split places: the model's, plus the embedding, loss and no-op layers the layout
        counts."""
        return self.model.num_layers + abs(self.extra_slots)


def _level_tp_pp(b: _Builder, c: _Ctx) -> None:
    """Levels 1 and 2: tp, then pp (vpp's share of the layer bound is checked at its own level)."""
    m, n = c.model, c.n
    tp = _domain(c.r("tp"), c.dev_divs)[None, :]
    # tp across nodes runs on every stack (slowly: its collectives cross the NIC, as priced); the search leaves it
    # out of an `auto` tp, never out of a value the files list ([HP] §5.6 checks no node bound).
    tp_rules = [(R_TP_DEVICES, n % tp == 0)] + ([(R_TP_NODE, tp <= c.node)] if c.r("tp") is None else [])
    tp_rules.append((R_TP_HEADS, (m.heads % tp == 0) & (m.kv_heads_eff % tp == 0)))
    hy = m.hybrid
    if hy is not None and hy.mamba:  # Megatron-Core's MambaMixer shards its heads and groups over tp (MCORE-MAMBA)
        tp_rules.append((R_TP_MAMBA, (hy.mamba_heads % tp == 0) & (hy.groups % tp == 0)))
    b.expand("tp", tp[0], tp_rules)
    pp = _domain(c.r("pp"), c.dev_divs)[None, :]
    t = b.w("tp")[:, None]
    pp_div = (n // t) % pp == 0
    pp_rules = [(R_PP_DEVICES, pp_div), (R_PP_LAYERS, pp <= c.slots)]
    if c.compile_without_pp:
        pp_rules.append((R_PP_COMPILE, np.broadcast_to(pp == 1, pp_div.shape)))
    if c.hybrid_split == "even":  # Megatron-Core cuts a hybrid pattern into pp equal stages (MCORE-HYBRID)
        pp_rules.append((R_HYBRID_PP, m.num_layers % pp == 0))
    b.expand("pp", pp[0], pp_rules, _auto(c.r("pp"), pp_div))


def _level_cp_dp(b: _Builder, c: _Ctx) -> tuple[int, ...]:
    """Level 3: cp, then the derived dp and the rules on it. Returns the dp degrees the nest reaches."""
    m, n = c.model, c.n
    cp = _domain(c.r("cp"), [v for v in c.dev_divs if v <= cp_auto_max(m)])[None, :]
    t, p = b.w("tp")[:, None], b.w("pp")[:, None]
    cp_div = (n // (t * p)) % cp == 0
    cp_checks = [
        (R_CP_DEVICES, cp_div),
        (R_CP_SEQ, (cp == 1) | (m.seq_len % (2 * cp) == 0)),
    ]
    if c.cp_algo == "ulysses":
        cp_checks.append((R_CP_ULYSSES, (cp == 1) | (m.kv_heads_eff % (t * cp) == 0)))
    hy = m.hybrid
    if hy is not None and hy.mamba:  # Megatron-Core's Mamba all-to-all CP (MCORE-MAMBA-CP)
        cp_checks.append((R_CP_MAMBA, (cp == 1) | hy.cp_splits(t, cp)))
    b.expand("cp", cp[0], cp_checks, _auto(c.r("cp"), cp_div))
    b.cols["dp"] = _narrowed(n // (b.w("tp") * b.w("pp") * b.w("cp")))
    if c.r("dp") is not None:
        b.filter([(R_DP_LIST, np.isin(b.w("dp"), np.asarray(c.r("dp"), dtype=np.int64)))])
    dp_values = tuple(sorted(set(b.w("dp").tolist())))
    b.filter([(R_DP_BATCH, c.g % b.w("dp") == 0)])
    return dp_values


def _level_mbs(b: _Builder, c: _Ctx) -> np.ndarray:
    """Level 4: micro_batch_size, then the derived micro_batch_num. Returns the sizes offered."""
    g = c.g
    mbs_default = [m for m in range(1, min(g, MBS_AUTO_MAX) + 1) if g % m == 0] if g > 0 else [1]
    mbs = _domain(c.r("micro_batch_size"), mbs_default)[None, :]
    d, p = b.w("dp")[:, None], b.w("pp")[:, None]
    per_dp = g // d
    mbn = per_dp // mbs
    mbn_checks = [
        (R_MBS_BATCH, per_dp % mbs == 0),
        (R_MBN_PP, (p == 1) | (mbn >= p)),
    ]
    if not c.stack.grad_accumulation:  # a step is one local batch; only a pipeline splits it (StackSpace)
        mbn_checks.append((R_MBN_ACCUM, (p > 1) | (mbn == 1)))
    if c.dualpipev:
        mbn_checks += _dualpipev_rules(c, p, mbn, b.w("cp")[:, None])
    if c.r("micro_batch_num") is not None:
        mbn_checks.append((R_MBN_LIST, np.isin(mbn, np.asarray(c.r("micro_batch_num"), dtype=np.int64))))
    b.expand("mbs", mbs[0], mbn_checks, _auto(c.r("micro_batch_size"), per_dp % mbs == 0))
    b.cols["mbn"] = _narrowed(g // (b.w("dp") * b.w("mbs")))
    return mbs[0]


def _dualpipev_rules(c: _Ctx, p: np.ndarray, mbn: np.ndarray, cp: np.ndarray) -> list[tuple[str, np.ndarray]]:
    """A stated DualPipeV's counted refusals for pipelined rows (no pipeline: nothing to schedule): a stack that
    does not run it, fewer than 2·pp micro-batches, layers that do not cut into 2·pp equal stages
    ([DUALPIPE], [MS-DUALPIPEV]), cp > 1 where the stack refuses it (StackSpace.dualpipev_with_cp)."""
    flat = p == 1
    rules = [(R_DPV_STACK, flat | c.dualpipev_runs), (R_DPV_MBN, flat | (mbn >= 2 * p)),
             (R_DPV_LAYERS, flat | (c.slots % (2 * p) == 0))]
    if not c.stack.dualpipev_with_cp:
        rules.append((R_DPV_CP, flat | (cp == 1)))
    return rules


def _level_fsdp_etp(b: _Builder, c: _Ctx) -> None:
    """Levels 5 and 6: fsdp (dp_shard) within the dp × cp domain (-1, a train.yaml's `dp_shard_size: -1`: the whole
    domain, per row); etp (never searched: the declared value, else 1; 0 = HyperParallel's "follow tp", per row)."""
    m = c.model
    whole = c.r("fsdp") == (-1,)
    fsdp = _domain(None if whole else c.r("fsdp"), c.dev_divs)[None, :]
    dom = (b.w("dp") * b.w("cp"))[:, None]
    b.expand("fsdp", fsdp[0], [(R_FSDP, dom % fsdp == 0), *_stack_fsdp_rules(b, c, fsdp, dom)],
             (fsdp == dom) if whole else _auto(c.r("fsdp"), dom % fsdp == 0))
    if c.r("etp") == (0,):
        b.cols["etp"] = b.cols["tp"].copy()
        if m.is_moe:
            b.filter([(R_ETP_WIDTH, (b.cols["etp"] == 1) | (m.moe_ffn % b.cols["etp"] == 0))])
        return
    etp = _domain(c.r("etp"), [1])[None, :]
    etp_checks: list[tuple[str, np.ndarray]] = []
    if m.is_moe:
        etp_checks.append((R_ETP_WIDTH, (etp == 1) | (m.moe_ffn % etp == 0)))
        if c.etp_fits is not None:
            etp_checks.append((R_ETP_TP, c.etp_fits(b.w("tp")[:, None], etp)))
    b.expand("etp", etp[0], etp_checks)


def _stack_fsdp_rules(b: _Builder, c: _Ctx, fsdp: np.ndarray, dom: np.ndarray) -> list[tuple[str, np.ndarray]]:
    """The stack's own FSDP route (StackSpace.fsdp): none, or one shard group over the whole dp·cp and not with
    pipeline parallelism (Megatron-FSDP, MindSpeed's FSDP2); counted refusals, so a search says why FSDP 8 of
    dp 64 never appears for Megatron."""
    st = c.stack
    if st.fsdp == "":
        return [(R_FSDP_NONE, np.broadcast_to(fsdp == 1, (dom.shape[0], fsdp.shape[1])))]
    rules: list[tuple[str, np.ndarray]] = []
    if st.fsdp == "whole":
        rules.append((R_FSDP_WHOLE, (fsdp == 1) | (fsdp == dom)))
    if not st.fsdp_with_pp:
        rules.append((R_FSDP_PP, (fsdp == 1) | (b.w("pp")[:, None] == 1)))
    return rules


def _level_ep(b: _Builder, c: _Ctx) -> None:
    """Level 7: ep, borrowed from dp·tp (dp·cp·tp when the FSDP shard spans cp)."""
    m = c.model
    ep = _domain(c.r("ep"), divisors(m.num_experts) if m.is_moe else [1])[None, :]
    d, t, cp = b.w("dp")[:, None], b.w("tp")[:, None], b.w("cp")[:, None]
    f, et = b.w("fsdp")[:, None], b.w("etp")[:, None]
    if not m.is_moe:
        b.expand("ep", ep[0], [(R_EP_DENSE, np.broadcast_to(ep == 1, (d.shape[0], ep.shape[1])))])
        return
    pool = np.where(d % f == 0, d * t, d * cp * t)
    t_exp = np.where(et > 1, et, t)
    rules = [
        (R_EP_EXPERTS, m.num_experts % ep == 0),
        (R_EP_POOL, pool % ep == 0),
        (R_EP_WIDTH, m.moe_ffn % t_exp == 0),
        (R_EP_ETP, (et == 1) | ((d * cp * t) % (ep * et) == 0)),
    ]
    if not c.stack.fsdp_with_ep:
        rules.append((R_FSDP_EP, (f == 1) | (ep == 1)))
    b.expand("ep", ep[0], rules)


def _level_vpp(b: _Builder, c: _Ctx) -> None:
    """Level 8: vpp, the interleaved schedule's chunks per stage."""
    layers = c.slots
    vpp_r = c.r("vpp")
    vpp = _domain(vpp_r, list(range(1, max(VPP_AUTO_MAX, 1) + 1)))[None, :]
    # Every rule here depends on pp alone: evaluated once per pp value, then looked up per row.
    pp_values, pp_code = np.unique(b.cols["pp"], return_inverse=True)
    p = pp_values.astype(np.int64)[:, None]
    eligible = None
    if vpp_r is None:
        # auto: chunks of equal whole layers, as Megatron's interleaved schedule requires ((layers // pp) %
        # vpp == 0, its `num_layers_per_virtual_pipeline_stage` check), up to VPP_AUTO_MAX, and only 1 without
        # a pipeline (not refusals: no such candidate exists). A list may ask for any vpp with pp·vpp ≤ layers.
        per_stage = np.maximum(layers // p, 1)
        eligible = ((vpp <= per_stage) & (per_stage % vpp == 0) & ((p > 1) | (vpp == 1)))[pp_code]
    rules = [
        (R_VPP_PP, ((vpp == 1) | (p > 1))[pp_code]),
        (R_VPP_LAYERS, (p * vpp <= layers)[pp_code]),
    ]
    if c.extra_slots > 0:  # Megatron-Core asserts (layers + embedding + loss) % (pp·vpp) == 0 under that accounting
        rules.append((R_LAYOUT_SPLIT, ((layers % (p * vpp) == 0) | (p == 1))[pp_code]))
    if c.stack.stages_from_layers:  # torchtitan: ⌈slots / layers_per_stage⌉ stages (StackSpace.runs_virtual_stages)
        rules.append((R_VPP_STAGES, c.stack.runs_virtual_stages(layers, p, vpp)[pp_code]))
    if not c.stack.uneven_interleave:  # MindSpeed-LLM: no uneven split with virtual stages (StackSpace)
        rules.append((R_VPP_SPLIT, ((vpp == 1) | (layers % (p * vpp) == 0))[pp_code]))
    if c.layout_fits is not None:  # a stated stage count or layer layout is the run's: it must place the layers
        fits = np.array([[c.layout_fits(int(pv), int(vv)) for vv in vpp[0]] for pv in pp_values.tolist()],
                        dtype=bool).reshape(pp_values.size, vpp.shape[1])  # (no rows left: an empty bool grid)
        rules.append((R_LAYOUT_STATED, (fits | (p == 1))[pp_code]))
    if c.hybrid_split:  # Megatron-Core runs a hybrid pattern without virtual stages (StackSpace.hybrid_even_split)
        rules.append((R_HYBRID_VPP, np.broadcast_to(vpp == 1, (pp_values.size, vpp.shape[1]))[pp_code]))
    if not c.dualpipev:  # the interleaved schedule's micro-batch groups (StackSpace.interleave_runs), per row
        mbn_runs = np.asarray(c.stack.interleave_runs(b.w("mbn"), b.w("pp")))[:, None]
        rules.append((R_VPP_MBN, (vpp == 1) | mbn_runs))
    if c.padded_interleave:  # priced padded in the padding passes (engine.search.passes), not unpadded here
        padded = ((vpp > 1) & noop_fills(layers, p * vpp))[pp_code]
        eligible = ~padded if eligible is None else eligible & ~padded
    b.expand("vpp", vpp[0], rules, eligible)


def _level_sp_os(b: _Builder, c: _Ctx) -> None:
    """Level 9: sequence parallelism (0/1); auto offers it only where tp > 1 (at tp 1 it is the same
    strategy), and on stacks that run SP whenever tp > 1 (StackSpace.sp_with_tp) only that. SP with a searched
    cp > 1 is a counted refusal where the stack refuses it (HyperParallel). Then the optimizer (ZeRO-1) shard: the run's;
    without the stack's distributed optimizer it must divide dp·cp (a stack with one shards over the whole
    dp·cp where a stated shard does not divide it: Groups.optimizer_shards)."""
    sp_r = c.r("sequence_parallel")
    sp = _domain(sp_r, [0, 1])[None, :]
    t, cp = b.w("tp")[:, None], b.w("cp")[:, None]
    if sp_r is not None:
        eligible = None
    elif c.stack.sp_with_tp:
        eligible = sp == (t > 1)
    else:
        eligible = (sp == 0) | (t > 1)
    # Only among varied cp values: a single stated cp is no candidate of HyperParallel's, so its CP checks never
    # run ([HP] §5.13) and the trainer runs SP beside it.
    cp_varied = len(c.r("cp") or (0, 0)) > 1
    rules = [] if c.stack.sp_with_cp or not cp_varied else [(R_SP_CP, (sp == 0) | (cp == 1))]
    b.expand("sp", sp[0], rules, eligible)
    if c.optimizer_shard != 1 and not c.stack.distributed_optimizer:
        b.filter([(R_OS, (b.w("dp") * b.w("cp")) % c.optimizer_shard == 0)])


def _distinct_rows(cols: Mapping[str, np.ndarray], names: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(each row's code, one row per code): the distinct values of `names`, coded in order of first row."""
    n = cols[names[0]].shape[0]
    if n == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    key = np.zeros(n, dtype=np.int64)
    for name in names:  # dense codes: a column of one cluster holds at most a few hundred divisors
        values, code = np.unique(cols[name], return_inverse=True)
        key = key * values.size + code.reshape(-1)
    _, first, inv = np.unique(key, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty(first.size, dtype=np.int64)
    rank[order] = np.arange(first.size)
    return rank[inv.reshape(-1)], first[order]


@dataclass(frozen=True, slots=True)
class Groups:
    """The space factored, rows never materialised until asked for (D-009: 2.9 M candidates on 110,592
    devices, all of one (tp, pp, cp, micro-batch, vpp, sp) group sharing every column but fsdp, etp and ep).

    `cols` holds one row per group (tp, pp, cp, dp, mbs, mbn, vpp, sp), in nest order; `prefix` numbers each
    group's (tp, pp, cp, mbs) prefix and `key` its (tp, cp, dp) combination key. The (fsdp, etp, ep) values
    valid under a key are `combos[...][start[key]:start[key] + count[key]]` (they depend on nothing else), so a
    group stands for `count[key]` candidates. `materialise` expands groups into a Space in the plain nest's
    row order. The refusal statistics are the whole space's, counted as the plain nest counts them."""

    cols: Mapping[str, np.ndarray]
    prefix: np.ndarray
    key: np.ndarray
    combos: Mapping[str, np.ndarray]
    start: np.ndarray
    count: np.ndarray
    optimizer_shard: int
    refused: Mapping[str, int]
    value_reasons: Mapping[str, Mapping[int, tuple[str, ...]]]
    dp_values: tuple[int, ...]
    mbs_values: tuple[int, ...]
    # The stack's distributed optimizer (StackSpace.distributed_optimizer): the shard is dp·cp where the stated
    # one (optimizer_shard) is 1 or does not divide it.
    distributed_optimizer: bool = False

    @property
    def weight(self) -> np.ndarray:
        """Candidates per group."""
        return self.count[self.key]

    @property
    def total(self) -> int:
        return int(self.weight.sum())

    def __len__(self) -> int:
        return int(self.prefix.shape[0])

    @property
    def pair(self) -> np.ndarray:
        """Each (fsdp, etp, ep) combination's (etp, ep) pair, coded densely in (etp, ep) order."""
        etp, ep = np.asarray(self.combos["etp"], dtype=np.int64), np.asarray(self.combos["ep"], dtype=np.int64)
        return np.unique(etp * (int(ep.max(initial=0)) + 1) + ep, return_inverse=True)[1].reshape(-1)

    def optimizer_shards(self, dp: np.ndarray, cp: np.ndarray) -> np.ndarray:
        """Each row's optimizer (ZeRO-1) shard: the stated one; with the stack's distributed optimizer the whole
        dp·cp unless a stated shard divides it (Megatron's `--num-distributed-optimizer-instances` must divide
        dp·cp: a shard that does not is priced over the whole group rather than refusing the row)."""
        o = self.optimizer_shard
        if not self.distributed_optimizer:
            return np.full(dp.size, o, dtype=_narrow(np.asarray([o])))
        dom = dp.astype(np.int64) * cp.astype(np.int64)
        shard = dom if o <= 1 else np.where(dom % o == 0, o, dom)
        return shard.astype(_narrow(shard)) if shard.size else shard

    def materialise(self, groups: np.ndarray | None = None) -> Space:
        """The candidates of `groups` (all when None) as a Space, in the plain nest's order (tp, pp, cp,
        micro-batch, fsdp, etp, ep, vpp, sp: the fsdp/etp/ep combinations sit between a prefix and its
        vpp/sp values)."""
        sel = np.arange(len(self)) if groups is None else distinct(np.asarray(groups, dtype=np.int64))
        return self.materialise_where(sel)[0]

    def materialise_where(self, sel: np.ndarray, keep: np.ndarray | None = None, pair: np.ndarray | None = None
                          ) -> tuple[Space, np.ndarray, np.ndarray]:
        """The candidates of the groups `sel` (ascending), where given only those whose (etp, ep) pair
        (`pair`, one code per combination) `keep[i, pair]` allows for group sel[i]; in the plain nest's order.
        Returns the Space and, per row, i and its pair code (-1 without `pair`)."""
        pre = self.prefix[sel]
        first = np.flatnonzero(np.r_[True, pre[1:] != pre[:-1]]) if sel.size else np.zeros(0, dtype=np.int64)
        run_len = np.diff(np.r_[first, sel.size])
        key = self.key[sel[first]]
        sizes = self.count[key] * run_len
        run = np.repeat(np.arange(first.size), sizes)
        j = np.arange(run.size) - np.repeat(np.cumsum(sizes) - sizes, sizes)
        m = run_len[run]
        local = first[run] + j % m
        c = self.start[key[run]] + j // m
        del j, m, run
        code = np.full(c.size, -1, dtype=np.int64) if pair is None else pair[c]
        if keep is not None:
            kept = np.flatnonzero(keep[local, code])
            local, c, code = local[kept], c[kept], code[kept]
        g = sel[local]
        cols = {k: self.cols[k][g] for k in ("tp", "pp", "cp", "dp", "mbs", "mbn")}
        cols.update({k: self.combos[k][c] for k in ("fsdp", "etp", "ep")})
        cols.update({k: self.cols[k][g] for k in ("vpp", "sp")})
        cols["os"] = self.optimizer_shards(cols["dp"], cols["cp"])
        space = Space(columns={k: _compact(cols[k]) for k in COLUMNS}, refused=self.refused,
                      value_reasons=self.value_reasons, dp_values=self.dp_values, mbs_values=self.mbs_values)
        return space, local, code


def enumerate_groups(model: ModelSpec, cluster: ClusterSpec, global_batch: int,
                     restrict: Mapping[str, tuple[int, ...] | None], *, cp_algo: str = "ring",
                     optimizer_shard: int = 1, extra_slots: int = 0, stack: StackSpace = DEFAULT_STACK,
                     dualpipev: tuple[bool, bool] = (False, False), padded_interleave: bool = False,
                     hybrid_split: str = "",
                     etp_fits: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None,
                     layout_fits: Callable[[int, int], bool] | None = None,
                     compile_without_pp: bool = False) -> Groups:
    """Every valid candidate, factored (Groups). `restrict[dim]` is a dimension's allowed values (None = its
    bounds); dimension names as in engine.config.types.DIMENSIONS; `extra_slots`, `padded_interleave`,
    `hybrid_split`, `etp_fits`, `layout_fits`, `compile_without_pp` as _Ctx's; `dualpipev`: (the files state
    DualPipeV, the stack runs it)."""
    c = _Ctx(model, cluster.world_size, global_batch, cluster.cards_per_node, divisors(cluster.world_size),
             restrict, stack.cp_algo(cp_algo), optimizer_shard, stack=stack, extra_slots=extra_slots,
             dualpipev=dualpipev[0], dualpipev_runs=dualpipev[1], padded_interleave=padded_interleave,
             hybrid_split=hybrid_split, etp_fits=etp_fits, layout_fits=layout_fits,
             compile_without_pp=compile_without_pp)
    # Columns are stored in the narrowest integer type that holds them and widened for each rule's arithmetic.
    b = _Builder(cols={})
    _level_tp_pp(b, c)
    dp_values = _level_cp_dp(b, c)
    mbs = _level_mbs(b, c)
    b.cols["prefix"] = np.arange(b.cols["tp"].shape[0])
    # Levels 5-7 read tp, cp and dp only: run once per distinct (tp, cp, dp), each key's rows weighted by
    # the prefixes that share it.
    # A stack whose FSDP does not pipeline reads pp too (its rule, _stack_fsdp_rules).
    key_cols = ("tp", "cp", "dp") + (("pp",) if stack.fsdp and not stack.fsdp_with_pp else ())
    kcode, kfirst = _distinct_rows(b.cols, key_cols)
    kb = _Builder(cols={k: b.cols[k][kfirst] for k in key_cols}, refused=b.refused,
                  value_reasons=b.value_reasons, weight=np.bincount(kcode, minlength=kfirst.size))
    kb.cols["key"] = np.arange(kfirst.size)
    _level_fsdp_etp(kb, c)
    _level_ep(kb, c)
    count = np.bincount(kb.cols["key"], minlength=kfirst.size)
    start = np.cumsum(count) - count
    # Prefixes whose key has no valid (fsdp, etp, ep) end here (not refusals at the later levels); the others
    # stand for one partial candidate per combination.
    b.cols["key"] = kcode
    b._take(np.flatnonzero(count[kcode] > 0))
    b.weight = count[b.cols["key"]]
    _level_vpp(b, c)
    _level_sp_os(b, c)
    return Groups(
        cols={k: b.cols[k] for k in ("tp", "pp", "cp", "dp", "mbs", "mbn", "vpp", "sp")},
        prefix=b.cols["prefix"], key=b.cols["key"], combos={k: kb.cols[k] for k in ("fsdp", "etp", "ep")},
        start=start, count=count, optimizer_shard=optimizer_shard, refused=dict(b.refused),
        distributed_optimizer=stack.distributed_optimizer,
        value_reasons={k: {v: tuple(rs) for v, rs in m.items()} for k, m in b.value_reasons.items()},
        dp_values=dp_values, mbs_values=tuple(int(x) for x in mbs),
    )


def enumerate_space(model: ModelSpec, cluster: ClusterSpec, global_batch: int,
                    restrict: Mapping[str, tuple[int, ...] | None], *, cp_algo: str = "ring",
                    optimizer_shard: int = 1, extra_slots: int = 0, stack: StackSpace = DEFAULT_STACK) -> Space:
    """Enumerate every valid candidate as rows. `restrict[dim]` is a dimension's allowed values (None = its
    bounds); dimension names as in engine.config.types.DIMENSIONS."""
    return enumerate_groups(model, cluster, global_batch, restrict, cp_algo=cp_algo,
                            optimizer_shard=optimizer_shard, extra_slots=extra_slots, stack=stack).materialise()


def config_groups(config: Config, model: ModelSpec, cluster: ClusterSpec, global_batch: int,
                  restrict: Mapping[str, tuple[int, ...] | None], *, optimizer_shard: int | None = None) -> Groups:
    """enumerate_groups under every rule the config states beside its lists: its stack's space, its CP algorithm,
    the layers its pipeline layout adds to the split, DualPipeV. The search and every refusal that prices a space
    of its own (engine.search.nothing_fits) build it here, so a refusal never weighs a candidate the search's own
    rules refuse. `optimizer_shard` overrides the config's (None: the config's)."""
    fw = framework_of(config.run)
    return enumerate_groups(model, cluster, global_batch, restrict, cp_algo=config.run.cp_algo, stack=fw.space,
                            optimizer_shard=config.optimizer_shard if optimizer_shard is None else optimizer_shard,
                            extra_slots=extra_slots(config),
                            dualpipev=(config.pipeline_schedule == "dualpipev", "dualpipev" in fw.schedules),
                            padded_interleave=pads_interleaved(config) and pads_with_noop_layers(config),
                            hybrid_split=fw.space.hybrid_split(model, config.run.pipeline_layout),
                            etp_fits=fw.etp_fits, layout_fits=stated_layout_fits(config, model),
                            compile_without_pp=config.run.compile and not fw.space.compile_with_pp)


def pads_with_noop_layers(config: Config) -> bool:
    """Whether the search pads this config's layer count with no-op layers where a split needs it: the stack
    pads (Framework.noop_layers: MindSpeed-LLM's `--noop-layers`, MS-NOOP) and the files state no layout."""
    return framework_of(config.run).noop_layers and not config.run.pipeline_layout.stated


def pads_interleaved(config: Config) -> bool:
    """Whether a padding of this config serves its interleaved and plain splits rather than DualPipeV's stages:
    any schedule but DualPipeV, on a stack that interleaves only equal chunks (StackSpace.uneven_interleave false)."""
    return config.pipeline_schedule != "dualpipev" and not framework_of(config.run).space.uneven_interleave


def stated_layout_fits(config: Config, model: ModelSpec) -> Callable[[int, int], bool] | None:
    """Where the files state Megatron-Core's first/last-stage layer counts or a per-chunk layer layout: whether
    they place the model's layers at (pp, vpp) (engine.cost.layout.layout_or_default), which the stack asserts, so
    a candidate they do not fit is refused rather than priced with an even split the run would not get (and that
    `apply` and `export` could not write). None otherwise: HyperParallel adapts its offsets to each candidate
    ([HP] §5.8), and the embedding/loss accounting is extra_slots' rule."""
    lay = config.run.pipeline_layout
    if not (lay.first_stage_layers or lay.last_stage_layers or lay.layer_layout):
        return None
    return lambda p, v: layout_or_default(model.num_layers, model.mtp_depth, p, v, lay)[1]


def extra_slots(config: Config) -> int:
    """The embedding, loss and no-op layers the pipeline layout counts as layers of the split (enumerate_space):
    negative when the split needs no divisibility (torchtitan's own, engine.cost.layout.effective_layout)."""
    lay = effective_layout(config.run)
    n = int(lay.embedding_in_split) + int(lay.loss_in_split) + len(lay.noop_layers)
    return -n if lay.remainder_first else n


def restrictions(config: Config) -> dict[str, tuple[int, ...] | None]:
    """Each dimension's allowed values from the config's declarations (None = searched over its bounds)."""
    return {name: allowed(config.dimensions.get(name)) for name in (
        "dp", "fsdp", "tp", "pp", "cp", "ep", "etp", "vpp", "micro_batch_size", "micro_batch_num",
        "sequence_parallel")}
