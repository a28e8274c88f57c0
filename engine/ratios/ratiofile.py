"""The ratios file `hp-plan calibrate -o` writes and every pricing path reads (docs/formats.md §6).

Reading follows HyperParallel's fallbacks ([HP] §7.8): a missing ratio takes compute's, and a
file without a compute ratio is refused. Values must be positive numbers; a file that does not read is a
diagnostic and nothing is applied.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import yaml

from engine.config.reader import Source
from engine.diagnostics import Diagnostic
from engine.document import Map, Seq, parse, read_text
from engine.positions import DOCUMENT_START
from engine.ratios.prior import LOG_BOUND
from engine.specs import (
    HOST_S_PER_LAUNCH_MAX,
    PLAN_FEATURES,
    PRICED_PARTS,
    RATIO_GROUPS,
    LocalCorrection,
    Ratios,
)

# The `parts` key that holds the host part's seconds per launch unit (engine.specs.HOST_PART).
HOST_KEY = "host_s_per_launch"


@dataclass(frozen=True, slots=True)
class FittedRow:
    """One run as the ratios file records it (`fitted_on`)."""

    config: str
    measured_step_s: float
    uncalibrated_step_s: float
    calibrated_step_s: float

    def to_json(self) -> dict[str, Any]:
        return {"config": self.config, "measured_step_s": round(self.measured_step_s, 6),
                "uncalibrated_step_s": round(self.uncalibrated_step_s, 6),
                "calibrated_step_s": round(self.calibrated_step_s, 6)}


def local_doc(local: LocalCorrection) -> dict[str, Any]:
    """The `local` key (docs/formats.md §6): the moved groups, the kernel's length scale and, per run fitted
    on, its plan (the PLAN_FEATURES as counts), the log-factor weight it spreads to plans like it and, when the
    fit split one off, the `own` log factor its own plan alone gets."""
    own = local.own or (0.0,) * len(local.anchors)
    anchors: list[dict[str, Any]] = []
    for a, w, o in zip(local.anchors, local.weights, own, strict=True):
        entry: dict[str, Any] = {"plan": {f: round(2.0 ** v) for f, v in zip(PLAN_FEATURES, a, strict=True)},
                                 "weight": round(float(w), 6)}
        if local.own:
            entry["own"] = round(float(o), 6)
        anchors.append(entry)
    return {"moved": list(local.moved), "length_scale": local.length_scale, "anchors": anchors}


def ratios_text(framework: str, device_type: str, ratios: dict[str, float], memory: float,
                rows: list[FittedRow], local: LocalCorrection | None = None,
                parts: dict[str, float] | None = None, host_s_per_launch: float = 0.0) -> str:
    """The ratios file's YAML text (keys in docs/formats.md §6 order; `parts` (one ratio per priced part, rule
    `parts`, and the host part's seconds per launch unit when it is not 0) after the group ratios; `local`
    last)."""
    doc: dict[str, Any] = {
        "framework": framework,
        "device_type": device_type,
        "ratios": {g: round(float(ratios[g]), 6) for g in RATIO_GROUPS},
    }
    if parts or host_s_per_launch > 0:
        doc["parts"] = {p: round(float(parts[p]), 6) for p in PRICED_PARTS if parts and p in parts}
        if host_s_per_launch > 0:
            doc["parts"][HOST_KEY] = float(f"{host_s_per_launch:.6g}")
    doc["memory_ratio"] = round(float(memory), 6)
    doc["fitted_on"] = [r.to_json() for r in rows]
    if local is not None:
        doc["local"] = local_doc(local)
    head = "# written by hp-plan calibrate (docs/formats.md §6); apply with estimator.ratios_file or --ratios\n"
    return head + yaml.safe_dump(doc, sort_keys=False, default_flow_style=None, width=120)


def parse_ratios(text: str, path: str) -> tuple[Ratios | None, list[Diagnostic]]:
    """A ratios file's text as Ratios, or None and why (positioned in the ratios file)."""
    doc = parse(text, path=path)
    src = Source(doc, path)
    if not doc.ok:
        return None, list(doc.diagnostics)
    root = src.root
    sec = src.section(root, "ratios", "ratios") if root is not None else None
    if sec is None:
        src.diag("HP810", "not a ratios file: no `ratios:` mapping (write one with hp-plan calibrate -o)",
                 root.range if root is not None else DOCUMENT_START, "ratios")
        return None, src.diags
    values = dict(_known_numbers(src, sec, "ratios", tuple(RATIO_GROUPS), "unknown ratio; the groups are"))
    if "compute" not in values:
        src.diag("HP810", "the ratios file has no compute ratio: it cannot be applied", sec.range, "ratios")
        return None, src.diags
    mem = src.number(root, "memory_ratio", "memory_ratio", minimum=0.0, strict=True)
    fw = src.str_(root, "framework", "framework")
    dev = src.str_(root, "device_type", "device_type")
    fitted = root.get("fitted_on") if root is not None else None
    runs = len(getattr(fitted, "items", ()) or ())
    local = _read_local(src, root) if root is not None and "local" in root else None
    parts, host = _read_parts(src, root) if root is not None and "parts" in root else ((), 0.0)
    if src.diags:
        return None, src.diags
    time = tuple((g, values.get(g, values["compute"])) for g in RATIO_GROUPS)
    return Ratios(time=time, memory=float(mem.value) if mem else 1.0, file=path, runs=runs,
                  framework=str(fw.value).lower() if fw else "", device_type=str(dev.value) if dev else "",
                  local=local, parts=parts, host_s_per_launch=host), []


def _read_parts(src: Source, root: Map) -> tuple[tuple[tuple[str, float], ...], float]:
    """The optional `parts` key: a positive ratio per priced part (engine.specs.PRICED_PARTS), and the host
    part's seconds per launch unit (HOST_KEY, 0 when absent); HP810 at a key that names no part, a ratio that is
    not a positive number, or a host figure that is not a number in [0, HOST_S_PER_LAUNCH_MAX]."""
    sec = src.section(root, "parts", "parts")
    host = 0.0
    for key, kn, _vn in (sec.items() if sec is not None else ()):
        if key == HOST_KEY:
            host = _read_host(src, sec, kn)
    out = _known_numbers(src, sec, "parts", tuple(PRICED_PARTS), "unknown part; the parts are", skip=HOST_KEY)
    return tuple(out), host


def _known_numbers(src: Source, sec: Map | None, prefix: str, known: tuple[str, ...], unknown: str,
                   skip: str = "") -> list[tuple[str, float]]:
    """Each key of `sec` (but `skip`) that `known` names, read as a non-negative number; HP810 at a key it does
    not name (`unknown` says what the key should have been, and the list follows)."""
    out: list[tuple[str, float]] = []
    for key, kn, _vn in (sec.items() if sec is not None else ()):
        if key == skip:
            continue
        if key not in known:
            src.diag("HP810", f"{prefix}.{key}: {unknown} {', '.join(known)}", kn.range, f"{prefix}.{key}")
            continue
        v = src.number(sec, str(key), f"{prefix}.{key}", minimum=0.0, strict=True)
        if v is not None:
            out.append((str(key), float(v.value)))
    return out


def _read_host(src: Source, sec: Map | None, key_node: Any) -> float:
    """parts.host_s_per_launch: seconds per launch unit, a number in [0, HOST_S_PER_LAUNCH_MAX]; else HP810 at
    the value (a negative host time, or one in other units, cannot be applied)."""
    node = sec.get(HOST_KEY) if sec is not None else None
    value = getattr(node, "value", None)
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if ok and 0.0 <= float(value) <= HOST_S_PER_LAUNCH_MAX:  # type: ignore[arg-type]
        return float(value)  # type: ignore[arg-type]
    if not ok:
        why = f"must be a number of seconds per launch unit, got {value!r}"
    elif float(value) < 0:  # type: ignore[arg-type]
        why = f"is {value!r}: host time cannot be negative"
    else:
        why = (f"is {value!r} s per launch unit (one layer's kernels for one micro-batch), over "
               f"{HOST_S_PER_LAUNCH_MAX:g}: seconds in other units?")
    src.diag("HP810", f"parts.{HOST_KEY} {why}", (node or key_node).range, f"parts.{HOST_KEY}")
    return 0.0


def _read_local(src: Source, root: Map) -> LocalCorrection | None:
    """The `local` key, or None with an HP810 at the entry at fault."""
    sec = src.section(root, "local", "local")
    if sec is None:
        return None
    moved_node = sec.get("moved")
    moved = [getattr(n, "value", None) for n in getattr(moved_node, "items", ())]
    if not isinstance(moved_node, Seq) or not all(m in RATIO_GROUPS or m in PRICED_PARTS for m in moved):
        src.diag("HP810", f"local.moved: a list of ratio groups ({', '.join(RATIO_GROUPS)}) or parts",
                 (moved_node or sec).range, "local.moved")
        return None
    scale = src.number(sec, "length_scale", "local.length_scale", minimum=0.0, strict=True)
    anchors_node = sec.get("anchors")
    if scale is None or float(scale.value) <= 0 or not isinstance(anchors_node, Seq):
        src.diag("HP810", "local: needs a positive length_scale and a list of anchors", sec.range, "local")
        return None
    anchors: list[tuple[float, ...]] = []
    weights: list[float] = []
    own: list[float] = []
    for i, item in enumerate(anchors_node.items):
        at = f"local.anchors.{i}"
        plan = item.get("plan") if isinstance(item, Map) else None
        weight = src.number(item, "weight", f"{at}.weight", minimum=None, strict=True) if isinstance(item, Map) \
            else None
        values = [getattr(plan.get(f), "value", None) if isinstance(plan, Map) else None for f in PLAN_FEATURES]
        if weight is None or not all(isinstance(v, int | float) and not isinstance(v, bool) and v >= 1
                                     for v in values):
            src.diag("HP810", f"{at}: needs `plan` with {', '.join(PLAN_FEATURES)} (counts ≥ 1) and a "
                     "numeric `weight`", item.range, at)
            return None
        own_value = None
        if isinstance(item, Map) and item.get("own") is not None:  # optional; once stated, a number
            own_value = src.number(item, "own", f"{at}.own", minimum=None, strict=True)
            if own_value is None:
                return None
        anchors.append(tuple(math.log2(float(v)) for v in values))  # type: ignore[arg-type]
        weights.append(float(weight.value))
        own.append(float(own_value.value) if own_value is not None else 0.0)
    return LocalCorrection(moved=tuple(str(m) for m in moved), length_scale=float(scale.value),
                           anchors=tuple(anchors), weights=tuple(weights), log_bound=LOG_BOUND,
                           own=tuple(own) if any(own) else ())


def load_ratios(path: str, text: str | None = None) -> tuple[Ratios | None, list[Diagnostic]]:
    """Read a ratios file from disk (or the editor's `text` for it)."""
    if text is None:
        text, diags = read_text(path)
        if text is None:
            return None, [Diagnostic("HP810", f"cannot read the ratios file {path}: "
                                     f"{diags[0].message if diags else 'unreadable'}")]
    return parse_ratios(text, path)


def is_ratios_root(root: Any) -> bool:
    """A ratios file's top level: `ratios:` a mapping next to `fitted_on` or `memory_ratio`."""
    return isinstance(root, Map) and isinstance(root.get("ratios"), Map) and (
        "fitted_on" in root or "memory_ratio" in root)
