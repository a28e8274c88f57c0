"""The ratios file `hp-plan calibrate -o` writes and every pricing path reads (docs/formats.md §6).

Reading follows HyperParallel's fallbacks ([HP] §7.8): a missing ratio takes compute's, and a
file without a compute ratio is refused. Values must be positive numbers; a file that does not read is a
diagnostic and nothing is applied.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from engine.config.reader import Source
from engine.diagnostics import Diagnostic
from engine.document import Map, parse, read_text
from engine.positions import DOCUMENT_START
from engine.specs import RATIO_GROUPS, Ratios


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


def ratios_text(framework: str, device_type: str, ratios: dict[str, float], memory: float,
                rows: list[FittedRow]) -> str:
    """The ratios file's YAML text (keys in docs/formats.md §6 order)."""
    doc = {
        "framework": framework,
        "device_type": device_type,
        "ratios": {g: round(float(ratios[g]), 6) for g in RATIO_GROUPS},
        "memory_ratio": round(float(memory), 6),
        "fitted_on": [r.to_json() for r in rows],
    }
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
    values: dict[str, float] = {}
    for key, kn, _vn in sec.items():
        if key not in RATIO_GROUPS:
            src.diag("HP810", f"ratios.{key}: unknown ratio; the groups are {', '.join(RATIO_GROUPS)}", kn.range,
                     f"ratios.{key}")
            continue
        v = src.number(sec, str(key), f"ratios.{key}", minimum=0.0, strict=True)
        if v is not None:
            values[str(key)] = float(v.value)
    if "compute" not in values:
        src.diag("HP810", "the ratios file has no compute ratio: it cannot be applied", sec.range, "ratios")
        return None, src.diags
    mem = src.number(root, "memory_ratio", "memory_ratio", minimum=0.0, strict=True)
    fw = src.str_(root, "framework", "framework")
    dev = src.str_(root, "device_type", "device_type")
    fitted = root.get("fitted_on") if root is not None else None
    runs = len(getattr(fitted, "items", ()) or ())
    if src.diags:
        return None, src.diags
    time = tuple((g, values.get(g, values["compute"])) for g in RATIO_GROUPS)
    return Ratios(time=time, memory=float(mem.value) if mem else 1.0, file=path, runs=runs,
                  framework=str(fw.value).lower() if fw else "", device_type=str(dev.value) if dev else ""), []


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
