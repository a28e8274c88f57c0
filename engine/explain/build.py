"""Take one priced plan apart: per-stage rows, what bounds the step, and the pipeline timeline.

Everything comes from the cost model's own pricing of the plan (engine.cost.price_table's
stage_time_parts): the per-micro-batch forward, backward, recompute and exposed communication of every
stage, the stage's exposed end-of-step sync and the optimizer. The timeline runs those durations through
the schedule the plan states (engine.explain.schedule) and ends at the estimate's step time: the pipeline
part ends at step − max exposed sync − optimizer, the cost model's m·max T + (ΣT − max T)/v; where the
simulated order finishes earlier (uneven stages: the formula charges the fill and drain with every other
stage's whole time), the difference is drawn as bubble and a diagnostic says how much.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from engine.catalog.frameworks import framework_of
from engine.config.types import Config
from engine.cost import CandidateTable, estimate, price_table
from engine.cost.estimate import stages_of
from engine.cost.layout import chunk_in_flight, effective_layout, layout_or_default
from engine.cost.table import STAGE_TIME_PARTS
from engine.diagnostics import Diagnostic
from engine.explain.schedule import FORWARD, Op, simulate
from engine.explain.types import ChunkRow, Explained, Interval, StageRow
from engine.results import MEMORY_TERMS, TIME_TERMS, Estimate, Stages
from engine.specs import HOST_PART, RecomputePlan, Strategy

COMM_PARTS = ("tp_comm", "cp_comm", "ep_comm", "pp_p2p", "fsdp_comm")
# Relative mismatch between the rebuilt step and the estimate above which the timeline says so (float noise
# is ~1e-15; anything larger means the estimate was priced by something this module does not rebuild).
REBUILD_TOLERANCE = 1e-9
# The simulated order finishing earlier than the priced pipeline by more than this share is worth a note.
EARLY_NOTE = 0.001
# Gaps shorter than this share of the step are float rounding between the simulator's sums and the pieces'.
SNAP = 1e-12
# The most forward units (stages × chunks × micro-batches) the timeline draws one by one. Simulating and
# drawing cost ~50 µs and a few intervals per unit; a global batch typed 2**30 asked for 10**9 of them (8 GB
# of intervals). Beyond the cap, micro-batches are drawn in equal groups (one box per group) and HP750 says so;
# a plan with more stages × chunks than the cap gets no timeline. Real plans (16 stages × 4 chunks × 64
# micro-batches) stay within it.
TIMELINE_MAX_UNITS = 4096


def stages_of_plan(config: Config, est: Estimate) -> Stages:
    """The plan stage by stage: what its own pricing carried (estimate_config's), else, for a search's row, which
    carries none, the one-row pricing estimate() would have made (`config` with the run it was priced on)."""
    if est.stages is not None:
        return est.stages
    assert config.model is not None and config.cluster is not None
    m = config.model
    table = CandidateTable.from_strategies([est.strategy], num_layers=m.num_layers + m.mtp_depth)
    return stages_of(price_table(m, config.cluster, config.run, table, est.budget_gib), est.strategy.pp)


def explain_estimate(config: Config, est: Estimate) -> Explained:
    """Explain a priced plan of `config` (est comes from estimate_config or the search, with the layout it chose)."""
    config = replace(config, run=est.priced_run(config.run))
    s = est.strategy
    stages = stages_of_plan(config, est)
    parts = {k: list(v) for k, v in stages.time_parts.items()}
    p, m = s.pp, s.micro_batch_num
    v = s.vpp if s.pipeline_schedule == "interleaved" else 1
    diags: list[Diagnostic] = list(est.diagnostics)
    stage_t = [sum(parts[k][i] for k in STAGE_TIME_PARTS) for i in range(p)]
    dp = parts["dp_comm"]
    opt = parts["optimizer"][0] if p else 0.0
    rebuilt = m * max(stage_t) + (sum(stage_t) - max(stage_t)) / v + max(dp) + opt
    # A calibrated host part (engine.specs.HOST_PART) is time the device waits on the host: the device's
    # timeline ends that much before the step, and the trace shows it as idle at the step's end.
    device_step = est.step_time_s - est.time_parts_s.get(HOST_PART, 0.0)
    scale = 1.0
    if abs(rebuilt - device_step) > REBUILD_TOLERANCE * max(device_step, 1e-30):
        # The estimate carries factors this module does not rebuild (e.g. calibration ratios): keep its step
        # time and stretch every part alike, and say so.
        scale = device_step / rebuilt if rebuilt > 0 else 1.0
        diags.append(Diagnostic("HP750", f"the timeline rescales the priced stage times by {scale:.4f} to the "
                                "estimate's step time (the estimate applies factors per term the timeline "
                                "cannot place)"))
    parts = {k: [x * scale for x in vals] for k, vals in parts.items()}
    timeline, early, note = _timeline(parts, p, v, m, device_step)
    if note:
        diags.append(Diagnostic("HP750", note))
    if early > EARLY_NOTE * est.step_time_s:
        diags.append(Diagnostic("HP751", f"the stages are uneven: run in order, the schedule's last backward ends "
                                f"{early:.3g} s before the priced pipeline time (the cost model charges the fill "
                                "and drain with every other stage's whole time, NAR21 §2.2 / [HP] "
                                "§7.5); the timeline shows the difference as bubble"))
    rows = [replace(row, chunks=chunks) for row, chunks in zip(_stage_rows(stages, parts, p, m, est.step_time_s,
                                                                          timeline),
                                                                stage_chunks(config, s, v), strict=True)]
    b = bound_of(config, est)
    bound, time_bound, detail, tight = b.bound, b.time_bound, b.detail, b.tightest_stage
    pipe = m * max(stage_t) * scale
    bubble = est.time_breakdown_s["pp_bubble"]
    return Explained(
        estimate=est, framework=framework_of(config.run).name, schedule=_schedule_name(s, v), stages=tuple(rows),
        bound=bound, time_bound=time_bound, bound_detail=detail, tightest_stage=tight,
        headroom_gib=b.headroom_gib, timeline=tuple(timeline),
        bubble_fraction=bubble / pipe if pipe > 0 else 0.0, diagnostics=tuple(diags),
        chunk_detail=v > 1 or effective_layout(config.run).stated)


def stage_chunks(config: Config, s: Strategy, v: int) -> list[tuple[ChunkRow, ...]]:
    """Per stage, its virtual chunks as the cost model places them (engine.cost.layout): the stated layout
    where it applies to this pp·vpp, else the even split."""
    assert config.model is not None
    m = config.model
    chunks, _ = layout_or_default(m.num_layers, m.mtp_depth, s.pp, v, effective_layout(config.run),
                                  s.pipeline_schedule == "dualpipev")
    held = chunk_in_flight(s.pp, v, s.micro_batch_num, chunks.astype(float))
    loss_stage = 0 if s.pipeline_schedule == "dualpipev" else s.pp - 1  # DualPipeV's V ends on rank 0
    return [tuple(ChunkRow(chunk=c, layers=int(chunks[i, c]), embedding=i == 0 and c == 0,
                           loss=i == loss_stage and c == v - 1, in_flight=float(held[i, c])) for c in range(v))
            for i in range(s.pp)]


def _schedule_name(s: Strategy, v: int) -> str:
    if s.pp == 1:
        return "no pipeline"
    if s.pipeline_schedule == "dualpipev":  # priced as engine.cost.dualpipev; the drawing has no V order
        return "DualPipeV (drawn in 1F1B order)"
    return f"interleaved 1F1B (vpp {v})" if v > 1 else "1F1B"


def _durations(parts: dict[str, list[float]], i: int, v: int,
               group: float = 1.0) -> tuple[float, float, float, float, float]:
    """(forward, forward-side comm, recompute, backward, backward-side comm) seconds of one micro-batch (of
    `group` micro-batches where the timeline draws them grouped) on one chunk of stage i. The cost model prices a stage's exposed communication per micro-batch, not per
    direction: it is drawn after the forward and after the backward in proportion to their compute."""
    f, b, r = parts["forward"][i], parts["backward"][i], parts["recompute"][i]
    c = sum(parts[k][i] for k in COMM_PARTS)
    work = f + b + r
    cf = c * f / work if work > 0 else c / 2
    return f * group / v, cf * group / v, r * group / v, b * group / v, (c - cf) * group / v


def _timeline(parts: dict[str, list[float]], p: int, v: int, m: int,
              step: float) -> tuple[list[Interval], float, str]:
    """The intervals of every lane, how much earlier than the priced pipeline the order finished, and a note
    when the drawing departs from the schedule's order or durations (empty when it does not)."""
    if p * v > TIMELINE_MAX_UNITS:
        return [], 0.0, (f"no timeline: {p:,} stages × {v} chunks are more lanes than the {TIMELINE_MAX_UNITS:,} "
                         "units it draws")
    drawn, note = drawn_micro_batches(p, v, m)
    d = [_durations(parts, i, v, m / drawn) for i in range(p)]
    fwd, bwd = [x[0] + x[1] for x in d], [x[2] + x[3] + x[4] for x in d]
    try:
        ops = simulate(fwd, bwd, v, drawn)
    except ValueError:  # interleaved with micro-batches not a multiple of pp (HP507): no 1F1B order exists
        ops = simulate(fwd, bwd, v, drawn, all_forward_first=True)
        note = (note + "; " if note else "") + (
            f"{m} micro-batches are not a multiple of pp {p}: the interleaved 1F1B order drawn here groups them "
            "by pp, so the timeline draws every forward before any backward")
    dp = parts["dp_comm"]
    opt = parts["optimizer"][0]
    pipe_end = step - max(dp) - opt
    made = max(o.end_s for o in ops)
    squeeze = pipe_end / made if made > pipe_end > 0 else 1.0  # the formula bounds the 1F1B orders
    if squeeze < 1.0 and made - pipe_end > REBUILD_TOLERANCE * max(step, 1e-30):  # not float rounding
        note = (note + "; " if note else "") + (f"the drawn order takes {made - pipe_end:.3g} s longer than the "
                                                f"priced pipeline, so its boxes are shortened by {1 - squeeze:.1%}")
    out: list[Interval] = []
    for i in range(p):
        lane = sorted((o for o in ops if o.stage == i), key=lambda o: o.start_s)
        t = 0.0
        for o in lane:
            start = o.start_s * squeeze
            if start - t > SNAP * step:
                out.append(Interval(i, "bubble", None, None, t, start))
            else:
                start = max(start, t)  # the simulator sums an operation whole, the pieces one by one
            t = _op_intervals(out, o, d[i], start, squeeze)
        _tail(out, i, t, pipe_end, dp[i], max(dp), opt, step)
    return out, max(0.0, pipe_end - made), note


def drawn_micro_batches(p: int, v: int, m: int) -> tuple[int, str]:
    """How many micro-batches (or equal groups of them) the timeline draws for p stages × v chunks, at most
    TIMELINE_MAX_UNITS units, and the HP750 note when they are grouped (empty when drawn one by one). An
    interleaved order keeps a multiple of p where it had one, so grouping does not change which order runs."""
    if p * v * m <= TIMELINE_MAX_UNITS:
        return m, ""
    drawn = max(1, TIMELINE_MAX_UNITS // (p * v))
    if v > 1 and m % p == 0 and drawn >= p:
        drawn -= drawn % p
    return drawn, (f"the timeline draws the {m:,} micro-batches as {drawn:,} boxes per stage and chunk, each "
                   f"{m / drawn:,.4g} micro-batches long: one by one they would be {p * v * m:,} units, over the "
                   f"{TIMELINE_MAX_UNITS:,} it draws")


def _op_intervals(out: list[Interval], o: Op, d: tuple[float, float, float, float, float], start: float,
                  squeeze: float) -> float:
    """Append one operation's pieces (forward + comm, or recompute + backward + comm); return its end."""
    pieces = (("forward", d[0]), ("comm", d[1])) if o.kind == FORWARD else (
        ("recompute", d[2]), ("backward", d[3]), ("comm", d[4]))
    t = start
    for kind, dur in pieces:
        if dur > 0 or kind in ("forward", "backward"):
            out.append(Interval(o.stage, kind, o.micro_batch, o.chunk, t, t + dur * squeeze))
            t += dur * squeeze
    return t


def _tail(out: list[Interval], i: int, t: float, pipe_end: float, dp_i: float, dp_max: float, opt: float,
          step: float) -> None:
    """After the lane's last backward: bubble to the pipeline's end, the stage's exposed gradient sync,
    bubble while slower stages sync, then the optimizer; the lane ends at the step time exactly."""
    marks = [("bubble", pipe_end), ("comm", pipe_end + dp_i), ("bubble", pipe_end + dp_max), ("optimizer", step)]
    for kind, end in marks:
        if end > t:
            out.append(Interval(i, kind, None, None, t, end))
            t = end
    if out and out[-1].stage == i and out[-1].end_s != step:
        last = out[-1]
        out[-1] = replace(last, end_s=step)


def _stage_rows(stages: Stages, parts: dict[str, list[float]], p: int, m: int, step: float,
                timeline: list[Interval]) -> list[StageRow]:
    counts, mem = stages.layers, stages.memory
    idle = [0.0] * p
    for iv in timeline:  # one pass: a pass per stage was quadratic in the stages
        if iv.kind == "bubble":
            idle[iv.stage] += iv.end_s - iv.start_s
    rows = []
    for i in range(p):
        comm = {k: m * parts[k][i] for k in COMM_PARTS}
        comm["dp_comm"] = parts["dp_comm"][i]
        t = {"forward": m * parts["forward"][i], "backward": m * parts["backward"][i],
             "recompute": m * parts["recompute"][i], "comm": sum(comm.values())}
        t["idle"] = idle[i]
        t["optimizer"] = parts["optimizer"][i]
        rows.append(StageRow(stage=i, layers=counts[i], memory_gib={k: mem[k][i] for k in MEMORY_TERMS},
                             time_s=t, comm_s=comm))
    return rows


@dataclass(frozen=True, slots=True)
class Bound:
    """What bounds a plan (Explained.bound, the hover's first line) and its tightest stage's headroom."""

    bound: str
    time_bound: str
    detail: str
    tightest_stage: int
    headroom_gib: float


def bound_of(config: Config, est: Estimate) -> Bound:
    """What bounds the step. Memory bounds a plan that does not fit, and one whose largest non-compute cost
    is recompute the headroom cannot do without (the same plan with recompute off does not fit): there the
    memory, not the time term, is what to change. Otherwise the largest time term. Cheap (no timeline): the
    hover calls it."""
    terms = est.time_breakdown_s
    step = est.step_time_s
    top = max(TIME_TERMS, key=lambda k: terms[k])
    stages = est.stage_memory_gib or (est.peak_memory_gib,)
    tight = max(range(len(stages)), key=lambda i: stages[i])
    head = est.budget_gib - stages[tight]
    share = f"{100 * terms[top] / step:.0f}% of the {step:.3g} s step" if step > 0 else "the step"
    if not est.fits:
        return Bound("memory", top, f"memory: stage {tight} needs {stages[tight]:.1f} GiB, {-head:.1f} GiB over "
                     f"the {est.budget_gib:g} GiB budget", tight, head)
    second = max((k for k in TIME_TERMS if k != "compute"), key=lambda k: terms[k])
    if second == "recompute" and terms["recompute"] > 0 and top in ("compute", "recompute"):
        off = replace(est.strategy, recompute=RecomputePlan(mode="off"))
        assert config.model is not None and config.cluster is not None
        priced_off = estimate(config.model, config.cluster, est.priced_run(config.run), off, est.budget_gib)
        if not priced_off.fits:
            return Bound("memory", top, f"memory headroom: recompute costs {terms['recompute']:.3g} s; without it "
                         f"the peak {priced_off.peak_memory_gib:.1f} GiB exceeds the {est.budget_gib:g} GiB budget "
                         f"(tightest stage {tight}: {head:.1f} GiB headroom)", tight, head)
    after = f"; next: {second} {terms[second]:.3g} s" if terms[second] > 0 and second != top else ""
    return Bound(top, top, f"{top}: {share}{after}; tightest stage {tight} has {head:.1f} GiB headroom of "
                 f"{est.budget_gib:g} GiB", tight, head)
