"""Diagnostics: one record type and one code table for the CLI, the server and docs/diagnostics.md.

Every code is declared once, with its default severity and a one-line title, in the family's table under
engine/codes/ (one module per block of numbers):

    HP0xx  reading: YAML syntax, structure, file-level problems
    HP1xx  types and unknown keys
    HP2xx  model facts and catalog resolution
    HP3xx  cluster and device
    HP4xx  cross-field rules on degrees, batch and memory (HyperParallel's checker and ours)
    HP5xx  pricing a stated strategy (estimate)
    HP6xx  search refusals and advice
    HP9xx  internal: an engine failure reported as a diagnostic instead of a traceback
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from engine.codes import FAMILIES
from engine.positions import DOCUMENT_START, Range

# The most findings one check reports (engine.check) and the most "did you mean" suggestions it computes
# (engine.validate.keys). A generated file can hold a finding per line (300,000 unknown keys in a 3.6 MB file:
# 2.5 GB for `check --json`, and as many markers for an editor to draw); nobody reads past the first screens,
# and fixing those (a wrong indentation, a pasted block) usually removes the rest.
MAX_DIAGNOSTICS = 1000


class Severity(StrEnum):
    ERROR = "error"
    WARNING = "warning"
    INFORMATION = "information"
    HINT = "hint"

    @property
    def rank(self) -> int:
        """How severe, 0 (a hint) to 3 (an error): which of one fact's findings is the strictest (engine.facts), which
        findings a bounded check keeps first (engine.check)."""
        return _SEVERITY_RANK[self]


_SEVERITY_RANK = {Severity.HINT: 0, Severity.INFORMATION: 1, Severity.WARNING: 2, Severity.ERROR: 3}


@dataclass(frozen=True, slots=True)
class CodeInfo:
    code: str
    severity: Severity
    title: str


# The single source of truth for codes, assembled from one table per family (engine/codes/*.py) so that
# each stage owns its block. Keep numbers stable: users suppress and search by them.
CODES: dict[str, CodeInfo] = {}
for _family in FAMILIES:
    for _code, _sev, _title in _family.ROWS:
        assert _code not in CODES, f"duplicate diagnostic code {_code}"
        CODES[_code] = CodeInfo(_code, Severity(_sev), _title)


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """One finding. `path` is dotted (`accelerator.tp_size`); `file` is set when the finding belongs to
    another file than the one being checked (a search config's train_yaml); `data` carries what a quick fix
    needs (a suggested key, the nearest valid value), JSON-serialisable. `fact` is the key of the fact a
    finding states when its code states several (engine.facts): the merge reads it, never the message; it is
    not part of the JSON."""

    code: str
    message: str
    range: Range = DOCUMENT_START
    path: str = ""
    severity: Severity | None = None
    file: str | None = None
    data: dict[str, Any] = field(default_factory=dict)
    fact: str = ""

    @property
    def effective_severity(self) -> Severity:
        if self.severity is not None:
            return self.severity
        info = CODES.get(self.code)
        return info.severity if info else Severity.ERROR

    @property
    def is_error(self) -> bool:
        return self.effective_severity is Severity.ERROR

    def with_range(self, rng: Range) -> Diagnostic:
        return replace(self, range=rng)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "severity": self.effective_severity.value,
            "code": self.code,
            "message": self.message,
            "path": self.path,
            "range": self.range.to_json(),
        }
        if self.file:
            out["file"] = self.file
        if self.data:
            out["data"] = self.data
        return out


def has_errors(diags: list[Diagnostic] | tuple[Diagnostic, ...]) -> bool:
    return any(d.is_error for d in diags)
