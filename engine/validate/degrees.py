"""Rules on the parallel degrees against the model and the cluster ([HP] §3.2 checks 3-7, 11,
13, 14 and §5.6; docs/formats.md §2 "Rules"). Every declared value is checked, the way HyperParallel's validator
checks declared values only; `auto` and absent dimensions are the search's business."""

from __future__ import annotations

import itertools
import math

from engine import degree_facts
from engine.catalog.frameworks import effective_layout, framework_of
from engine.config.stated_layout import noop_fix, noop_pad
from engine.facts import EP_DENSE, EP_EXPERTS
from engine.integers import listed_divisors as divisors  # suggestions: none for an absurd n
from engine.specs import PipelineLayout, noop_text
from engine.validate import cp_pays
from engine.validate.context import Ctx, Declared, nearest


def check(ctx: Ctx) -> None:
    _tp(ctx)
    _cp(ctx)
    cp_pays.check(ctx)  # HP411, judged by pricing the stated plan
    _ep(ctx)
    _pp(ctx)
    _fixed_in_list(ctx)
    _device_product(ctx)
    _stated(ctx)
    _sp_with_searched_cp(ctx)


def _valid_list(n_values: list[int], limit: int | None) -> list[int]:
    g = 0
    for v in n_values:
        if v > 0:
            g = math.gcd(g, v)
    if g == 0:
        return []
    return [d for d in divisors(g) if limit is None or d <= limit][:16]


def _tp(ctx: Ctx) -> None:
    m = ctx.model
    if m is None:
        return
    facts = [("model.hidden_size", "hidden_size", m.hidden), ("model.num_attention_heads", "num_attention_heads",
             m.heads), ("model.num_key_value_heads", "num_key_value_heads", m.kv_heads_eff if not m.is_mla else 0),
             ("model.intermediate_size", "intermediate_size", m.ffn if (not m.is_moe or m.first_k_dense) else 0)]
    hy = m.hybrid
    if hy is not None and hy.mamba:  # Megatron-Core's MambaMixer asserts both divide by tp (MCORE-MAMBA)
        facts += [("model.mamba_num_heads", "Mamba heads (mamba_num_heads)", hy.mamba_heads),
                  ("model.n_groups", "Mamba groups (n_groups)", hy.groups)]
    etp = ctx.fixed.get("etp")
    if m.is_moe and (etp is None or etp.value <= 1):
        facts.append(("model.moe_intermediate_size", "expert width (moe_intermediate_size)", m.moe_ffn))
    valid = _valid_list([n for _, _, n in facts if n > 0], ctx.world)
    for d in ctx.declared.get("tp", []):
        if d.value <= 1:
            continue
        bad = degree_facts.tp_width(d.value, [(label, n) for _, label, n in facts])
        if bad is not None:
            ctx.emit("HP403", f"{bad.label} ({bad.bound}) must be divisible by tp ({d.value}), remainder is "
                     f"{bad.bound % d.value}; tp values that divide every width: {valid}", d.location, d.path,
                     data={"nearest_valid": nearest(d.value, valid), "valid": valid})
    if m.is_moe and etp is not None and etp.value > 1 and m.moe_ffn % etp.value:
        ctx.emit("HP403", f"expert width moe_intermediate_size ({m.moe_ffn}) must be divisible by etp ({etp.value}), "
                 f"remainder is {m.moe_ffn % etp.value}", etp.location, etp.path,
                 data={"nearest_valid": nearest(etp.value, divisors(m.moe_ffn)[:16]), "valid": divisors(m.moe_ffn)[:16]})


def _cp(ctx: Ctx) -> None:
    m = ctx.model
    if m is None:
        return
    seq = m.seq_len
    ulysses = framework_of(ctx.config.run).space.cp_algo(ctx.config.run.cp_algo) == "ulysses"
    tp_fixed = ctx.fixed.get("tp")
    for d in ctx.declared.get("cp", []):
        if d.value <= 1:
            continue
        chunks = 2 * d.value
        if degree_facts.cp_sequence(d.value, seq, chunks_per_rank=2) is not None:
            valid = [c for c in (1, 2, 4, 8, 16, 32, 64) if seq % (2 * c) == 0]
            ctx.emit("HP404", f"sequence length {seq} must be divisible by 2 × cp = {chunks} (context parallelism "
                     f"splits it into 2·cp load-balanced chunks), remainder is {seq % chunks}; change cp, or the "
                     "sequence length", d.location, d.path,
                     data={"nearest_valid": nearest(d.value, valid), "valid": valid})
        if ulysses and m.kv_heads_eff > 0:  # 0: neither head count known yet
            t = tp_fixed.value if tp_fixed else 1
            if m.kv_heads_eff % (t * d.value):
                ctx.emit("HP404", f"Ulysses CP requires num_key_value_heads ({m.kv_heads_eff}) divisible by "
                         f"tp × cp ({t * d.value}); use ring attention (context_parallel_algo: ring) or a smaller cp",
                         d.location, d.path)
        _mamba_cp(ctx, d, tp_fixed.value if tp_fixed else 1)


def _mamba_cp(ctx: Ctx, d: Declared, tp: int) -> None:
    """HP404 where a hybrid model's Mamba mixers cannot split over the stated cp (HybridLayers.cp_splits):
    Megatron-Core asserts it when it builds the layer. Judged only where tp divides the heads and groups (else
    HP403 says what to change first)."""
    m = ctx.model
    hy = m.hybrid if m is not None else None
    if hy is None or not hy.mamba or hy.mamba_heads % tp or hy.groups % tp:
        return
    if hy.cp_splits(tp, d.value):
        return
    valid = [c for c in divisors(hy.mamba_heads // tp) if hy.cp_splits(tp, c)][:16]
    ctx.emit("HP404", f"the Mamba mixers cannot split over cp {d.value}: each context-parallel rank takes whole "
             f"heads of the {hy.mamba_heads // tp} per tp rank (mamba_num_heads {hy.mamba_heads} / tp {tp}) and "
             f"whole groups of the {max(hy.groups // tp, 1)} (n_groups {hy.groups} / tp {tp}), or an equal share of "
             f"one group; cp values that split them: {valid}", d.location, d.path,
             data={"nearest_valid": nearest(d.value, valid), "valid": valid})


def _ep(ctx: Ctx) -> None:
    m = ctx.model
    if m is None or not ctx.resolved.experts_known:
        return
    for d in ctx.declared.get("ep", []):
        bad = degree_facts.ep_experts(m, d.value)
        if bad is None:
            continue
        if bad.fact == EP_DENSE:
            ctx.emit("HP410", f"expert parallelism (ep {d.value}) has no effect on a dense model (no experts): "
                     "set ep to 1", d.location, d.path, data={"nearest_valid": 1, "valid": [1]})
            continue
        if bad.fact == EP_EXPERTS:
            valid = [v for v in divisors(m.num_experts) if ctx.world is None or v <= ctx.world]
            ctx.emit("HP405", f"num_experts ({m.num_experts}) must be divisible by ep ({d.value}), remainder is "
                     f"{m.num_experts % d.value}", d.location, d.path,
                     data={"nearest_valid": nearest(d.value, valid), "valid": valid})


def _pp(ctx: Ctx) -> None:
    m = ctx.model
    if m is None or m.num_layers <= 0:  # the layer count is what every check here compares with
        return
    vpp = ctx.fixed.get("vpp")
    v = vpp.value if vpp is not None else 1
    lay = effective_layout(ctx.config.run)
    # Megatron-Core counts the embedding and the loss as layers of the split when asked (PipelineLayout):
    # a chunk may then hold only the embedding or only the loss, so they count as splittable here.
    extra = int(lay.embedding_in_split) + int(lay.loss_in_split)
    layers = m.num_layers + m.mtp_depth + extra
    bound = layers // max(v, 1)
    candidates: list[Declared] = list(ctx.declared.get("pp", []))
    search = ctx.resolved.search
    if search is not None and search.pp_degree is not None:
        loc = search.pp_degree.val.loc
        candidates += [Declared(x, loc, "pp_config.pp_degree") for x in search.pp_degree.values]
    what_layers = f"{m.num_layers + m.mtp_depth} layers + {' + '.join(_accounted(lay))}" if extra else \
        f"the number of splittable layers ({layers})"
    for d in candidates:
        # A layer layout lists every chunk, possibly one with only the loss (HP422 checks it against pp·vpp).
        if d.value > 1 and not lay.layer_layout and degree_facts.pp_layers(d.value, max(v, 1), layers) is not None:
            what = what_layers if v <= 1 else f"{'(' + what_layers + ')' if extra else 'layers'} / vpp = {layers} / {v} = {bound}"
            valid = [p for p in divisors(layers) if p <= bound][:16]
            ctx.emit("HP407", f"pp ({d.value}) exceeds {what}: every stage needs at least one layer"
                     f"{' per virtual chunk' if v > 1 else ''}", d.location, d.path,
                     data={"nearest_valid": nearest(d.value, valid), "valid": valid})
    if vpp is not None and vpp.value > 1:
        pp = ctx.fixed.get("pp")
        if pp is not None and pp.value <= 1:
            ctx.emit("HP416", f"pp_interleave_num / vpp ({vpp.value}) needs pipeline parallelism (pp > 1) to "
                     "interleave anything; set it to 1", vpp.location, vpp.path,
                     data={"nearest_valid": 1, "valid": [1]})
        elif pp is not None and pp.value > 1 and not lay.stated:  # a layout: HP422 (pipeline.py), or no rule
            chunks = pp.value * vpp.value
            if m.num_layers % chunks:
                hint = (" (or count the embedding and loss in the split: account_for_embedding_in_pipeline_split / "
                        "account_for_loss_in_pipeline_split, as Llama 3 405B did)"
                        if (m.num_layers + 2) % chunks == 0 else "")
                fw = framework_of(ctx.config.run)
                if fw.layer_layout:
                    hint += (", or a pipeline_model_parallel_layout listing each chunk's layers (`hp-plan export "
                             "--to megatron` writes the split priced here as one)")
                fix: dict[str, object] = {}
                if fw.noop_layers:  # MindSpeed-LLM pads the count with identity layers (MS-NOOP)
                    pad = noop_pad(m.num_layers, chunks)
                    hint += f", or pad them with no-op layers (noop_layers \"{noop_text(pad)}\")"
                    if ctx.config.kind == "search":  # a train.yaml's trainer refuses keys it does not read
                        fix = noop_fix(pad)
                ctx.emit("HP416", f"{m.num_layers} layers do not split evenly into pp × vpp = {chunks} chunks; the "
                         f"interleaved schedule (Megatron) needs num_layers divisible by pp·vpp{hint}", vpp.location,
                         vpp.path, data=fix)


def _accounted(lay: PipelineLayout) -> list[str]:
    return [n for n, on in (("embedding", lay.embedding_in_split), ("loss", lay.loss_in_split)) if on]


def _fixed_in_list(ctx: Ctx) -> None:
    """A value fixed in one place and a candidate list in another ([HP] §3.2 check 6)."""
    search = ctx.resolved.search
    if search is None:
        return
    pairs = []
    if search.pp_degree is not None and len(search.pp_degree.values) == 1:
        pairs.append(("pp", search.pp_degree.values[0], search.pp_degree.val.loc, "pp_config.pp_degree"))
    if search.pp_interleave_num is not None:
        v = search.pp_interleave_num
        pairs.append(("vpp", int(v.value), v.loc, v.path))
    if search.local_batch_size is not None:
        v = search.local_batch_size
        pairs.append(("micro_batch_size", int(v.value), v.loc, v.path))
    for dim, value, loc, path in pairs:
        d = ctx.config.dimensions.get(dim)
        if d is not None and d.state == "list" and value not in d.values:
            ctx.emit("HP406", f"fixed {dim} ({value}, from {path}) is not in the search space {list(d.values)} of "
                     f"parallelism.{dim}: add it to the list or remove one of the two", loc, path,
                     data={"nearest_valid": nearest(value, list(d.values)), "valid": list(d.values)})


def _sp_with_searched_cp(ctx: Ctx) -> None:
    """HP418: HyperParallel's search refuses SP with cp > 1 among the candidates it varies ([HP] §5.6 check 5), so
    with SP on the cp values above 1 of a list or `auto` are never tried. A single stated cp is not a candidate
    and its CP checks never run (§5.13): the trainer runs SP beside it (the Ulysses example), so no warning. The
    stacks whose recipes combine them (StackSpace.sp_with_cp) give none either."""
    sp = ctx.fixed.get("sequence_parallel")
    cp = ctx.config.dimensions.get("cp")
    # The search's own predicate (engine.search.space: a cp it varies, Dimension.searched); an absent cp is searched
    # too but asks for nothing, so it says nothing.
    if (ctx.config.kind != "search" or sp is None or not sp.value or cp is None or not cp.searched
            or cp.state == "absent" or framework_of(ctx.config.run).space.sp_with_cp):
        return
    refused = [v for v in cp.values if v > 1]
    if cp.state == "list" and not refused:
        return
    never = f"the cp candidates {refused} are never tried" if cp.state == "list" else "cp > 1 is never tried"
    ctx.emit("HP418", f"HyperParallel's search refuses sequence parallelism with cp > 1: with sequence_parallel on, "
             f"{never} (set sequence_parallel: false to search them)", sp.location, sp.path)


def _device_product(ctx: Ctx) -> None:
    """Can the declared degrees make the world size at all? dp·tp·pp·cp = N exactly (docs/formats.md §2)."""
    n = ctx.world
    if n is None or ctx.config.kind != "search":
        return
    dims = ("dp", "tp", "pp", "cp")
    options: list[list[int]] = []
    for dim in dims:
        decl = ctx.declared.get(dim)
        options.append([d.value for d in decl] if decl else divisors(n))
    if not all(options):  # a world too large to list its divisors: the search refuses it (HP60x)
        return
    minimum = math.prod(min(o) for o in options)
    where = ("parallelism", *(f"parallelism.{d}" for d in dims))
    if minimum > n:
        ctx.at("HP408", f"minimum product of parallel degrees dp·tp·pp·cp ({minimum}) exceeds the {n} devices of "
               "the cluster: lower the smallest candidates or add nodes", where, on="key")
        return
    if math.prod(len(o) for o in options) > 200_000:
        return
    if not any(math.prod(c) == n for c in itertools.product(*options)):
        ctx.at("HP412", f"no combination of the declared degrees makes dp × tp × pp × cp = {n} devices "
               f"(the cluster's world size): every device must be used exactly once; widen a list or use auto",
               where, on="key")


def _borrowed_message(ep: int, etp: int, cap: int) -> str:
    why = "expert parallelism borrows its ranks from the data- and tensor-parallel groups"
    if ep > cap:
        return f"ep ({ep}) exceeds dp × tp × cp = {cap}: {why}"
    shown = f"ep × etp ({ep}×{etp} = {ep * etp})" if etp > 1 else f"ep ({ep})"
    return f"{shown} must divide dp × tp × cp = {cap}: {why}"


def _stated(ctx: Ctx) -> None:
    """Rules on a fully stated strategy (a train.yaml, or a search config whose degrees are all fixed)."""
    cfg = ctx.config
    n = ctx.world
    f = ctx.fixed
    tp, pp, cp = (f[d].value if d in f else 1 for d in ("tp", "pp", "cp"))
    if cfg.kind == "search" and not all(d in f for d in ("tp", "pp", "cp")):
        return
    involved = [f[d] for d in ("tp", "pp", "cp") if d in f and f[d].value > 1]
    dp: int | None = None
    if n is not None:
        world = degree_facts.world_size(n, tp, pp, cp, f["dp"].value if "dp" in f else None)
        if world is not None and not world.want:
            msg = (f"the world size {n} is not a multiple of tp × pp × cp = {tp}×{pp}×{cp} = {tp * pp * cp}: "
                   "dp_replicate × dp_shard × tp × pp × cp must make every device")
            targets: list[Declared | None] = list(involved) or [None]
            for d in targets:
                if d is None:
                    ctx.at("HP412", msg, ("context.device_num", "cluster.num_nodes", "cluster"))
                else:
                    others = math.prod(x.value for x in involved) // d.value
                    valid = [v for v in divisors(n) if n % (others * v) == 0]
                    ctx.emit("HP412", msg, d.location, d.path,
                             data={"nearest_valid": nearest(d.value, valid), "valid": valid[:16]})
            return
        dp = n // (tp * pp * cp)
        if world is not None:
            ctx.emit("HP412", f"dp ({f['dp'].value}) × tp × pp × cp = {f['dp'].value * tp * pp * cp} does not make "
                     f"the {n} devices of the cluster; dp would be {dp}", f["dp"].location, f["dp"].path,
                     data={"nearest_valid": dp, "valid": [dp]})
            return
    elif "dp" in f:
        dp = f["dp"].value
    if dp is None:
        return
    domain = dp * cp
    shard = f.get("fsdp")
    if shard is not None and degree_facts.fsdp_shard(shard.value, domain) is not None:
        valid = divisors(domain)
        ctx.emit("HP413", f"FSDP shard size {shard.value} must divide the data-parallel domain dp × cp = "
                 f"{dp}×{cp} = {domain} (replicas = dp·cp / shard)", shard.location, shard.path,
                 data={"nearest_valid": nearest(shard.value, valid), "valid": valid[:24]})
    opt = None
    for v in (ctx.resolved.train.optimizer_shard if ctx.resolved.train else None,
              ctx.resolved.search.optimizer_shard if ctx.resolved.search else None):
        if v is not None:
            opt = v
    if opt is not None and degree_facts.optimizer_shard(int(opt.value), domain) is not None:
        valid = divisors(domain)
        ctx.emit("HP414", f"optimizer_weight_shard_size {opt.value} must divide dp × cp = {domain}", opt.loc, opt.path,
                 data={"nearest_valid": nearest(int(opt.value), valid), "valid": valid[:24]})
    ep = f.get("ep")
    m = ctx.model
    if ep is not None and m is not None and m.is_moe:
        cap = dp * tp * cp
        etp = f["etp"].value if "etp" in f else 1
        borrowed = degree_facts.ep_ranks(ep.value, etp, cap)
        if borrowed is not None:
            valid = [v for v in divisors(cap) if cap % (v * etp) == 0]  # ep·etp must divide the ranks
            ctx.emit("HP417", _borrowed_message(ep.value, etp, cap), ep.location, ep.path,
                     data={"nearest_valid": nearest(ep.value, valid), "valid": valid[:24]})
