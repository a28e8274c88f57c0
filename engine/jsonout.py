"""The one way the project writes JSON: strict (RFC 8259) documents, which every consumer can parse.

Python's json module writes `Infinity` and `NaN` by default, and VS Code's parser and any strict reader
reject them (a log with an infinite peak made `hp-plan calibrate --json` unreadable). So a number that is not
finite is written `null` (an unbounded budget, an unknown time), documented in docs/formats.md §3, and the
dump itself runs with allow_nan=False so a value that escaped this rule raises here instead of going out."""

from __future__ import annotations

import json
import math
from typing import TextIO


def strict(obj: object) -> object:
    """`obj` with every non-finite float replaced by None, through dicts, lists and tuples."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: strict(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [strict(v) for v in obj]
    return obj


def dumps(obj: object, *, indent: int | None = 2) -> str:
    """Strict JSON text of `obj` (non-finite numbers as null)."""
    return json.dumps(strict(obj), indent=indent, allow_nan=False)


def write_json(out: TextIO, doc: object) -> None:
    """One indented strict JSON document and a newline (every `hp-plan ... --json`)."""
    out.write(dumps(doc) + "\n")
