"""What every rule family reads: the resolved config, the declared candidate values with their positions, and
a helper that positions a diagnostic on the token where a value was written (in whichever file)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine.config.resolve import Resolved
from engine.config.types import Config, Location
from engine.diagnostics import Diagnostic, Severity
from engine.document import Scalar, Seq, find
from engine.positions import DOCUMENT_START, Range
from engine.specs import ModelSpec


@dataclass(frozen=True, slots=True)
class Declared:
    """One declared value of a dimension: the value, where (the list item's own token for a list) and the
    dotted path as written in its file."""

    value: int
    location: Location | None
    path: str


@dataclass
class Ctx:
    resolved: Resolved
    config: Config
    diags: list[Diagnostic] = field(default_factory=list)
    declared: dict[str, list[Declared]] = field(default_factory=dict)
    fixed: dict[str, Declared] = field(default_factory=dict)

    @property
    def model(self) -> ModelSpec | None:
        """The model facts the rules may use: the complete model's, or what resolved of an incomplete one
        (zeros where a required fact is missing), so a half-written file still gets every rule whose facts
        are known."""
        return self.config.model or self.resolved.model_facts

    @property
    def world(self) -> int | None:
        return self.config.cluster.world_size if self.config.cluster is not None else None

    def literal_path(self, canonical: str) -> str:
        """The path as written in its file for a canonical location key (`parallelism.tp` may have been
        written as `accelerator.tp_size` in the train.yaml)."""
        loc = self.config.locations.get(canonical)
        if loc is None:
            return canonical
        for key, other in self.config.locations.items():
            if other == loc and key != canonical and not key.startswith("parallelism.") and key != "model.seq_len":
                return key
        return canonical

    def emit(self, code: str, message: str, where: Location | None, path: str, *, on: str = "value",
             data: dict[str, Any] | None = None, severity: Severity | None = None) -> None:
        rng: Range = DOCUMENT_START
        file = None
        if where is not None:
            rng = where.value if on == "value" else where.key
            if where.file is not None and where.file != self.config.path:
                file = where.file
        self.diags.append(Diagnostic(code, message, rng, path, severity, file, dict(data or {})))

    def at(self, code: str, message: str, canonical: str | tuple[str, ...], *, on: str = "value",
           data: dict[str, Any] | None = None, severity: Severity | None = None) -> None:
        """Emit at the first of the canonical paths that has a location (the document start otherwise)."""
        keys = (canonical,) if isinstance(canonical, str) else canonical
        for key in keys:
            loc = self.config.locations.get(key)
            if loc is not None:
                self.emit(code, message, loc, self.literal_path(key), on=on, data=data, severity=severity)
                return
        self.emit(code, message, None, keys[0], on=on, data=data, severity=severity)


def build_ctx(resolved: Resolved) -> Ctx | None:
    config = resolved.config
    if config is None:
        return None
    ctx = Ctx(resolved, config)
    if config.kind == "train" and resolved.train is not None:
        for dim_name, v in resolved.train.degrees.items():
            d = Declared(int(v.value), v.loc, v.path)
            ctx.declared[dim_name] = [d]
            ctx.fixed[dim_name] = d
        return ctx
    for name, dim in config.dimensions.items():
        if dim.state not in ("fixed", "list") or not dim.values:
            continue
        loc = dim.location
        path = ctx.literal_path(f"parallelism.{name}")
        items = _item_locations(resolved, loc, path, dim.values) if dim.state == "list" else {}
        ctx.declared[name] = [Declared(v, items.get(v, loc), path) for v in dim.values]
        if len(dim.values) == 1:
            ctx.fixed[name] = ctx.declared[name][0]
    return ctx


def _item_locations(resolved: Resolved, loc: Location | None, path: str, values: tuple[int, ...]
                    ) -> dict[int, Location]:
    """Each candidate's own token inside a declared list, so a refusal lands on `8` in `tp: [1, 2, 8]`."""
    if loc is None:
        return {}
    for src in resolved.sources:
        if src.path != loc.file:
            continue
        _, node = find(src.doc.root, path)
        if not isinstance(node, Seq):
            return {}
        out: dict[int, Location] = {}
        for item in node.items:
            if isinstance(item, Scalar) and isinstance(item.value, int) and item.value in values:
                out.setdefault(int(item.value), Location(loc.file, loc.key, item.range))
        return out
    return {}


def nearest(value: int, valid: list[int]) -> int | None:
    if not valid:
        return None
    return min(valid, key=lambda v: (abs(v - value), v))
