"""Typed access to one parsed document, turning every wrong type into a positioned diagnostic.

A `Source` wraps one Document (the file being checked, or the train.yaml a search config references) and
hands out `Val`s: the typed value, its dotted path in that file and its Location. Diagnostics about a
referenced file carry `file=` so the front ends can show them there (the server also maps them back).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from engine.config.types import Location
from engine.diagnostics import Diagnostic, Severity
from engine.document import Document, Map, Node, Scalar, Seq
from engine.integers import MAX_CONFIG_INT, shown_int
from engine.positions import DOCUMENT_START, Range


@dataclass(frozen=True, slots=True)
class Val:
    """A value as read: `value` typed, `path` dotted as written in its file, `loc` where."""

    value: Any
    path: str
    loc: Location


def describe(value: Any) -> str:
    """How a wrong value is named in a message: `'4' (a string)`, `4.0 (a number with a fraction)`, `a list`."""
    if isinstance(value, Node):
        return _kind(value)
    if isinstance(value, bool):
        return f"{str(value).lower()} (a boolean)"
    if isinstance(value, str):
        return f"'{value}' (a string)"
    if isinstance(value, float):
        return f"{value!r} (a decimal number)"
    if value is None:
        return "nothing (null)"
    if isinstance(value, int):
        return shown_int(value)
    return type(value).__name__


def did_you_mean(word: str, choices: Iterable[str], cutoff: float = 0.75) -> list[str]:
    import difflib  # only a file with a misspelt key or value pays for it (D-016: start fast)

    return difflib.get_close_matches(word, sorted(set(choices)), n=3, cutoff=cutoff)


_MEM_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*([kmgt]i?b?|)\s*$", re.IGNORECASE)


def parse_memory_gb(value: Any) -> float | None:
    """`76GB`, `76G`, `76`, `1024MB` -> GiB (docs/formats.md: every *_gb is GiB; MindSpore's `max_device_memory`
    "GB" means the same 2^30 unit)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if not isinstance(value, str):
        return None
    m = _MEM_RE.match(value)
    if not m:
        return None
    num = float(m.group(1))
    unit = m.group(2).lower().rstrip("b").rstrip("i")
    scale = {"": 1.0, "k": 1 / (1024 * 1024), "m": 1 / 1024, "g": 1.0, "t": 1024.0}[unit]
    return num * scale


@dataclass
class Source:
    """One document being read. `primary` is the file being checked; diagnostics elsewhere get `file`."""

    doc: Document
    path: str | None
    primary: bool = True
    diags: list[Diagnostic] = field(default_factory=list)

    # -- positions --------------------------------------------------------------------------------------
    def location(self, key: Node | None, value: Node | None) -> Location:
        k = key.range if key is not None else (value.range if value is not None else DOCUMENT_START)
        v = value.range if value is not None else k
        if isinstance(value, Scalar) and value.text == "" and value.style == "" and key is not None:
            v = Range(key.range.end, key.range.end)  # `key:` with nothing after it
        return Location(self.path, k, v)

    def diag(self, code: str, message: str, rng: Range, path: str, *, data: dict[str, Any] | None = None,
             severity: Severity | None = None) -> None:
        self.diags.append(Diagnostic(code, message, rng, path, severity,
                                     None if self.primary else self.path, dict(data or {})))

    # -- structure --------------------------------------------------------------------------------------
    @property
    def root(self) -> Map | None:
        return self.doc.root if isinstance(self.doc.root, Map) else None

    def section(self, parent: Map | None, key: str, dotted: str) -> Map | None:
        """A sub-mapping; a scalar or list there is an HP107 error (null / empty is simply absent)."""
        if parent is None or key not in parent:
            return None
        node = parent.get(key)
        if isinstance(node, Map):
            return node
        if isinstance(node, Scalar) and node.value is None:
            return None
        kn = parent.key_node(key)
        rng = node.range if node is not None else (kn.range if kn else DOCUMENT_START)
        self.diag("HP107", f"{dotted} must be a mapping of keys, got {_kind(node)}", rng, dotted)
        return None

    def raw(self, parent: Map | None, key: str, dotted: str) -> tuple[Node, Node] | None:
        if parent is None or key not in parent:
            return None
        kn, vn = parent.key_node(key), parent.get(key)
        if kn is None or vn is None:
            return None
        if isinstance(vn, Scalar) and vn.value is None and vn.tag.endswith(":null"):
            return None  # `key:` or `key: null` reads as absent, like the trainer's .get(key) or default
        return kn, vn

    def val(self, parent: Map | None, key: str, dotted: str) -> Val | None:
        hit = self.raw(parent, key, dotted)
        if hit is None:
            return None
        kn, vn = hit
        value = vn.value if isinstance(vn, Scalar) else vn
        return Val(value, dotted, self.location(kn, vn))

    # -- typed getters ----------------------------------------------------------------------------------
    def int_(self, parent: Map | None, key: str, dotted: str, *, minimum: int | None = 1,
             allow: tuple[int, ...] = (), what: str = "an integer", maximum: int | None = MAX_CONFIG_INT) -> Val | None:
        """An integer (bools, strings and floats refused with a fix when one is obvious); `minimum` None
        accepts any integer up to `maximum` (engine.integers: every integer a config states is bounded; None
        only where the caller bounds the value itself, as the model facts' rule does). Returns None when absent
        or invalid."""
        v = self.val(parent, key, dotted)
        if v is None:
            return None
        value = v.value
        if isinstance(value, int) and not isinstance(value, bool):
            if maximum is not None and value > maximum:
                self.diag("HP110", f"{dotted} must be at most {maximum:,}, got {shown_int(value)}", v.loc.value,
                          dotted)
                return None
            if value in allow or minimum is None or value >= minimum:
                return v
            bound = "positive" if minimum == 1 else f">= {minimum}"
            extra = f" (or {', '.join(map(str, allow))})" if allow else ""
            self.diag("HP109", f"{dotted} must be {bound}{extra}, got {shown_int(value)}", v.loc.value, dotted,
                      data={"replace_value": max(minimum, 1)})
            return None
        self._type_error(v, what)
        return None

    def _type_error(self, v: Val, what: str) -> None:
        data: dict[str, Any] = {}
        value = v.value
        fix = as_int(value)
        if fix is not None:
            data["replace_value"] = fix
        hint = f"; write {fix}" if fix is not None else ""
        self.diag("HP103", f"{v.path} must be {what}, got {describe(value)}{hint}",
                  v.loc.value, v.path, data=data)

    def number(self, parent: Map | None, key: str, dotted: str, *, minimum: float | None = 0.0,
               strict: bool = False, maximum: float | None = None) -> Val | None:
        """A number (int or float). `minimum` is inclusive unless `strict`; `maximum` inclusive."""
        v = self.val(parent, key, dotted)
        if v is None:
            return None
        value = v.value
        if isinstance(value, bool) or not isinstance(value, int | float) or (
            isinstance(value, float) and (math.isnan(value) or math.isinf(value))
        ):
            data: dict[str, Any] = {}
            fix = _as_float(value)
            if fix is not None:
                data["replace_value"] = fix
            hint = ""
            if isinstance(value, str) and fix is not None and "e" in value.lower() and "." not in value:
                # YAML 1.1 (PyYAML, what the trainers load with) reads an exponent without a dot as text
                mantissa, _, power = repr(fix).partition("e")
                shown = f"{mantissa}{'' if '.' in mantissa or not power else '.0'}{'e' + power if power else ''}"
                hint = f": YAML reads {value.strip()} as text; write it with a dot, {shown}"
            self.diag("HP105", f"{dotted} must be a number, got {describe(value)}{hint}",
                      v.loc.value, dotted, data=data)
            return None
        if isinstance(value, int) and abs(value) > MAX_CONFIG_INT:  # a float cannot hold it (1e400 as digits)
            self.diag("HP110", f"{dotted} must be at most {MAX_CONFIG_INT:,}, got {shown_int(value)}",
                      v.loc.value, dotted)
            return None
        if minimum is not None and (value < minimum or (strict and value == minimum)):
            rel = ">" if strict else ">="
            self.diag("HP110", f"{dotted} must be {rel} {minimum:g}, got {value:g}", v.loc.value, dotted)
            return None
        if maximum is not None and value > maximum:
            self.diag("HP110", f"{dotted} must be at most {maximum:g}, got {value:g}", v.loc.value, dotted)
            return None
        return Val(float(value), v.path, v.loc)

    def bool_(self, parent: Map | None, key: str, dotted: str) -> Val | None:
        v = self.val(parent, key, dotted)
        if v is None:
            return None
        if isinstance(v.value, bool):
            return v
        data: dict[str, Any] = {}
        if isinstance(v.value, str) and v.value.strip().lower() in ("true", "false"):
            data["replace_value"] = v.value.strip().lower() == "true"
        elif isinstance(v.value, int) and v.value in (0, 1):
            data["replace_value"] = bool(v.value)
        self.diag("HP104", f"{dotted} must be true or false, got {describe(v.value)}",
                  v.loc.value, dotted, data=data)
        return None

    def str_(self, parent: Map | None, key: str, dotted: str) -> Val | None:
        v = self.val(parent, key, dotted)
        if v is None:
            return None
        if isinstance(v.value, str):
            return v
        if isinstance(v.value, int | float) and not isinstance(v.value, bool):
            return Val(str(v.value), v.path, v.loc)  # e.g. a model name written as a bare number
        self.diag("HP106", f"{dotted} must be a string, got {describe(v.value)}",
                  v.loc.value, dotted)
        return None

    def choice(self, parent: Map | None, key: str, dotted: str, choices: dict[str, str]) -> Val | None:
        """A string among `choices` (case-insensitive; maps spellings to a canonical value)."""
        v = self.val(parent, key, dotted)
        if v is None:
            return None
        raw = v.value
        text = str(raw).strip().lower() if isinstance(raw, str | bool) or raw is None else None
        if isinstance(raw, bool):  # YAML 1.1: `off` / `no` are booleans; mode off means none
            text = "off" if raw is False else "true"
        if text is not None and text in choices:
            return Val(choices[text], v.path, v.loc)
        valid = sorted({k for k in choices if not k.startswith("_")})
        near = did_you_mean(str(raw).lower(), valid, 0.6) if isinstance(raw, str) else []
        data: dict[str, Any] = {"valid": valid}
        if near:
            data["replace_value"] = near[0]
        hint = f" (did you mean '{near[0]}'?)" if near else ""
        self.diag("HP106", f"{dotted} must be one of {', '.join(valid)}, got "
                  f"{describe(raw)}{hint}", v.loc.value, dotted, data=data)
        return None


def _kind(node: Node | None) -> str:
    if isinstance(node, Map):
        return "a mapping"
    if isinstance(node, Seq):
        return "a list"
    if isinstance(node, Scalar):
        return describe(node.value)
    return "nothing"


def as_int(value: Any) -> int | None:
    """The integer a wrong-typed value obviously means ('4' -> 4, 4.0 -> 4), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return int(value)
    if isinstance(value, str):
        s = value.strip()
        if re.fullmatch(r"[+-]?\d{1,15}", s):
            return int(s)
        try:
            f = float(s)
        except ValueError:
            return None
        if f.is_integer() and abs(f) < 1e15:
            return int(f)
    return None


def _as_float(value: Any) -> float | None:
    if isinstance(value, str):
        g = parse_memory_gb(value)
        if g is not None:
            return g
        try:
            f = float(value)
        except ValueError:
            return None
        return f if math.isfinite(f) else None
    return None
