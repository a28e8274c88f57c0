"""The strategy space as numpy columns: every divisor combination, its bounds and validity, refusals counted.

One row per candidate strategy. Levels are expanded outermost first (tp, pp, cp, then the derived dp, then
micro_batch_size with the derived micro_batch_num, fsdp, etp, ep, vpp, sequence_parallel), each level as one
boolean matrix over (rows so far) x (values of the level) so nothing loops per candidate in Python. Rows come
out in lexicographic order of that nest, which makes every later tie-break deterministic.

Rules and their sources ([HP] §5 unless stated):
  * dp = N / (tp·pp·cp) is derived, never enumerated: the device product is exact (§5.4, §10.2).
  * tp divides N, stays inside a node (docs/formats.md §2: TP divides heads and KV heads; HyperParallel's own
    search only bounds it by the KV heads, §5.3 / §11 "validator and search disagree").
  * pp ≤ layers / vpp (§5.3); micro_batch_num ≥ pp when pp > 1 (§5.6.1, §10.2).
  * cp: the sequence divides by 2·cp; Ulysses needs KV heads divisible by tp·cp; sequence parallelism with
    cp > 1 is refused as HyperParallel's checker does (§5.6.1, §5.6.5).
  * the global batch: G = dp · micro_batch_size · micro_batch_num, so dp·micro_batch_size divides G
    (§5.7); micro_batch_num is derived.
  * fsdp (dp_shard) divides dp·cp: HyperParallel's FSDP domain is dp × cp (docs/formats.md §1, §10.2).
  * ep borrows from dp·tp, or dp·cp·tp when the FSDP shard spans cp (here: when it does not divide dp), and
    divides the experts; with etp > 1 the expert group ep·etp divides dp·cp·tp and the expert width divides
    the expert tensor degree (§5.5, §5.6.3).
  * vpp > 1 only with pp > 1 and then the interleaved schedule; HyperParallel never searches it (§5.2), we do:
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
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from engine.config.types import Config, Dimension
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
R_PP_DEVICES = "tp·pp does not divide the devices"
R_PP_LAYERS = "pp above the layers"
R_CP_DEVICES = "tp·pp·cp does not divide the devices"
R_CP_SEQ = "sequence length not divisible by 2·cp"
R_CP_ULYSSES = "Ulysses cp needs KV heads divisible by tp·cp"
R_DP_LIST = "dp outside its list"
R_DP_BATCH = "dp does not divide the global batch"
R_MBS_BATCH = "dp·micro_batch_size does not divide the global batch"
R_MBN_PP = "micro_batch_num below pp"
R_MBN_LIST = "micro_batch_num outside its list"
R_FSDP = "fsdp does not divide dp·cp"
R_ETP_WIDTH = "expert width not divisible by etp"
R_EP_DENSE = "ep > 1 on a dense model"
R_EP_EXPERTS = "ep does not divide the experts"
R_EP_POOL = "ep above the dp·tp it borrows from"
R_EP_WIDTH = "expert width not divisible by the expert tp"
R_EP_ETP = "ep·etp does not divide dp·cp·tp"
R_VPP_PP = "vpp > 1 needs pp > 1"
R_VPP_LAYERS = "pp·vpp above the layers"
R_LAYOUT_SPLIT = "pp·vpp does not divide the layers with the embedding and loss in the split"
R_SP_CP = "sequence parallelism with cp > 1"
R_OS = "optimizer shard does not divide dp·cp"


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
    """Accumulates refusals while the levels expand. Private to one enumeration: no state outlives it."""

    cols: dict[str, np.ndarray]
    refused: Counter[str] = field(default_factory=Counter)
    value_reasons: dict[str, dict[int, list[str]]] = field(default_factory=dict)

    def w(self, name: str) -> np.ndarray:
        """A column widened to int64 for arithmetic (columns are stored narrow)."""
        return self.cols[name].astype(np.int64)

    def _take(self, rows: np.ndarray) -> None:
        """Keep `rows` of every column, one column at a time (the old one freed as soon as the new one exists:
        peak memory is one table, not two)."""
        for c in list(self.cols):
            self.cols[c] = self.cols[c][rows]

    def expand(self, name: str, values: np.ndarray, checks: list[tuple[str, np.ndarray]],
               eligible: np.ndarray | None = None) -> None:
        """Cross the current rows with `values` (K,), keep (row, value) pairs that are `eligible` (not counted:
        duplicates and out-of-domain pairs) and pass every check in order (R, K) masks; count the rest."""
        n_rows = self.cols["tp"].shape[0] if self.cols else 1
        shape = (n_rows, values.shape[0])
        alive = np.ones(shape, dtype=bool) if eligible is None else np.broadcast_to(eligible, shape).copy()
        for reason, ok in checks:
            bad = alive & ~ok
            n_bad = int(bad.sum())
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
        np.floor_divide(flat, shape[1], out=flat)  # the parent rows, in place (a large space's peak memory)
        self._take(flat)
        del flat
        self.cols[name] = new

    def filter(self, checks: list[tuple[str, np.ndarray]]) -> None:
        """Drop rows failing a per-row check, counting them."""
        alive = np.ones(self.cols["tp"].shape[0], dtype=bool)
        for reason, ok in checks:
            bad = alive & ~ok
            n_bad = int(bad.sum())
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


def enumerate_space(model: ModelSpec, cluster: ClusterSpec, global_batch: int,
                    restrict: Mapping[str, tuple[int, ...] | None], *, cp_algo: str = "ring",
                    optimizer_shard: int = 1, extra_slots: int = 0) -> Space:
    """Enumerate every valid candidate. `restrict[dim]` is a dimension's allowed values (None = its bounds);
    dimension names as in engine.config.types.DIMENSIONS. `extra_slots`: the embedding and loss the pipeline
    layout counts as layers of the split (engine.specs.PipelineLayout), which chunks may hold alone; negative
    when the split need not divide (torchtitan's own)."""
    n = cluster.world_size
    g = global_batch
    exact_split = extra_slots > 0
    layers = model.num_layers + abs(extra_slots)
    heads, kv = model.heads, model.kv_heads_eff
    node = cluster.cards_per_node
    dev_divs = divisors(n)

    def r(name: str) -> tuple[int, ...] | None:
        return restrict.get(name)

    # Columns are stored in the narrowest integer type that holds them (int16 for every degree of a real
    # cluster) and widened for each rule's arithmetic: a large space (2.9 M candidates on 110,592 devices,
    # issue 16) then takes a third of the memory int64 would.
    b = _Builder(cols={})
    # Level 1: tp.
    tp = _domain(r("tp"), dev_divs)[None, :]
    b.expand("tp", tp[0], [
        (R_TP_DEVICES, n % tp == 0),
        (R_TP_NODE, tp <= node),
        (R_TP_HEADS, (heads % tp == 0) & (kv % tp == 0)),
    ])
    # Level 2: pp (vpp's share of the layer bound is checked at its own level).
    pp = _domain(r("pp"), dev_divs)[None, :]
    t = b.w("tp")[:, None]
    pp_div = (n // t) % pp == 0
    b.expand("pp", pp[0], [
        (R_PP_DEVICES, pp_div),
        (R_PP_LAYERS, pp <= layers),
    ], _auto(r("pp"), pp_div))
    # Level 3: cp, then the derived dp.
    cp = _domain(r("cp"), [v for v in dev_divs if v <= cp_auto_max(model)])[None, :]
    t, p = b.w("tp")[:, None], b.w("pp")[:, None]
    cp_div = (n // (t * p)) % cp == 0
    cp_checks = [
        (R_CP_DEVICES, cp_div),
        (R_CP_SEQ, (cp == 1) | (model.seq_len % (2 * cp) == 0)),
    ]
    if cp_algo == "ulysses":
        cp_checks.append((R_CP_ULYSSES, (cp == 1) | (kv % (t * cp) == 0)))
    b.expand("cp", cp[0], cp_checks, _auto(r("cp"), cp_div))
    b.cols["dp"] = _narrowed(n // (b.w("tp") * b.w("pp") * b.w("cp")))
    if r("dp") is not None:
        b.filter([(R_DP_LIST, np.isin(b.w("dp"), np.asarray(r("dp"), dtype=np.int64)))])
    dp_values = tuple(sorted(set(b.w("dp").tolist())))
    b.filter([(R_DP_BATCH, g % b.w("dp") == 0)])
    # Level 4: micro_batch_size, then the derived micro_batch_num.
    mbs_default = [m for m in range(1, min(g, MBS_AUTO_MAX) + 1) if g % m == 0] if g > 0 else [1]
    mbs = _domain(r("micro_batch_size"), mbs_default)[None, :]
    d, p = b.w("dp")[:, None], b.w("pp")[:, None]
    per_dp = g // d
    mbn = per_dp // mbs
    mbn_checks = [
        (R_MBS_BATCH, per_dp % mbs == 0),
        (R_MBN_PP, (p == 1) | (mbn >= p)),
    ]
    if r("micro_batch_num") is not None:
        mbn_checks.append((R_MBN_LIST, np.isin(mbn, np.asarray(r("micro_batch_num"), dtype=np.int64))))
    b.expand("mbs", mbs[0], mbn_checks, _auto(r("micro_batch_size"), per_dp % mbs == 0))
    b.cols["mbn"] = _narrowed(g // (b.w("dp") * b.w("mbs")))
    # Level 5: fsdp (dp_shard) within the dp × cp domain.
    fsdp = _domain(r("fsdp"), dev_divs)[None, :]
    dom = (b.w("dp") * b.w("cp"))[:, None]
    b.expand("fsdp", fsdp[0], [(R_FSDP, dom % fsdp == 0)], _auto(r("fsdp"), dom % fsdp == 0))
    # Level 6: etp (never searched: the declared value, else 1; 0 = HyperParallel's "follow tp", per row).
    if r("etp") == (0,):
        b.cols["etp"] = b.cols["tp"].copy()
        if model.is_moe:
            b.filter([(R_ETP_WIDTH, (b.cols["etp"] == 1) | (model.moe_ffn % b.cols["etp"] == 0))])
    else:
        etp = _domain(r("etp"), [1])[None, :]
        etp_checks: list[tuple[str, np.ndarray]] = []
        if model.is_moe:
            etp_checks.append((R_ETP_WIDTH, (etp == 1) | (model.moe_ffn % etp == 0)))
        b.expand("etp", etp[0], etp_checks)
    # Level 7: ep, borrowed from dp·tp (dp·cp·tp when the FSDP shard spans cp).
    ep = _domain(r("ep"), divisors(model.num_experts) if model.is_moe else [1])[None, :]
    d, t, c = b.w("dp")[:, None], b.w("tp")[:, None], b.w("cp")[:, None]
    f, et = b.w("fsdp")[:, None], b.w("etp")[:, None]
    if model.is_moe:
        pool = np.where(d % f == 0, d * t, d * c * t)
        t_exp = np.where(et > 1, et, t)
        b.expand("ep", ep[0], [
            (R_EP_EXPERTS, model.num_experts % ep == 0),
            (R_EP_POOL, pool % ep == 0),
            (R_EP_WIDTH, model.moe_ffn % t_exp == 0),
            (R_EP_ETP, (et == 1) | ((d * c * t) % (ep * et) == 0)),
        ])
    else:
        b.expand("ep", ep[0], [(R_EP_DENSE, np.broadcast_to(ep == 1, (d.shape[0], ep.shape[1])))])
    # Level 8: vpp, the interleaved schedule's chunks per stage.
    vpp_r = r("vpp")
    vpp = _domain(vpp_r, list(range(1, max(VPP_AUTO_MAX, 1) + 1)))[None, :]
    # Every rule here depends on pp alone: evaluated once per pp value, then looked up per row (a large
    # space's rows × vpp values in int64 would be its largest temporary).
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
    if exact_split:  # Megatron-Core asserts (layers + embedding + loss) % (pp·vpp) == 0 under that accounting
        rules.append((R_LAYOUT_SPLIT, ((layers % (p * vpp) == 0) | (p == 1))[pp_code]))
    b.expand("vpp", vpp[0], rules, eligible)
    del pp_code
    # Level 9: sequence parallelism (0/1); auto offers it only where tp > 1 (at tp 1 it is the same strategy).
    sp_r = r("sequence_parallel")
    sp = _domain(sp_r, [0, 1])[None, :]
    t, c = b.w("tp")[:, None], b.w("cp")[:, None]
    eligible = None if sp_r is not None else ((sp == 0) | ((t > 1) & (c == 1)))
    b.expand("sp", sp[0], [(R_SP_CP, (sp == 0) | (c == 1))], eligible)
    # The optimizer (ZeRO-1) shard is the run's, not searched; it must divide dp·cp.
    b.cols["os"] = np.broadcast_to(_narrowed(np.asarray([optimizer_shard])), b.cols["tp"].shape)
    if optimizer_shard != 1:
        b.filter([(R_OS, (b.w("dp") * b.w("cp")) % optimizer_shard == 0)])

    cols = {k: _compact(b.cols[k]) for k in COLUMNS}
    return Space(
        columns=cols,
        refused=dict(b.refused),
        value_reasons={k: {v: tuple(rs) for v, rs in m.items()} for k, m in b.value_reasons.items()},
        dp_values=dp_values,
        mbs_values=tuple(int(x) for x in mbs[0]),
    )


def restrictions(config: Config) -> dict[str, tuple[int, ...] | None]:
    """Each dimension's allowed values from the config's declarations (None = searched over its bounds)."""
    return {name: allowed(config.dimensions.get(name)) for name in (
        "dp", "fsdp", "tp", "pp", "cp", "ep", "etp", "vpp", "micro_batch_size", "micro_batch_num",
        "sequence_parallel")}
