"""Diagnostics: fast checks on open/change (debounced), the search on open/save, both pushed together.

The published list for a document = its own fast-check findings + findings in the train.yaml it
references (shown at its `train_yaml` key) + the last accepted search's diagnostics. Search diagnostics of
an edited document are re-anchored by key path (their line moves with the key) rather than dropped, so
half-typed YAML never clears useful findings.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from lsprotocol import types
from pygls.uris import from_fs_path
from pygls.workspace.position_codec import PositionCodec

from engine.diagnostics import CODES, Diagnostic, Severity
from engine.facts import merge
from engine.positions import Range
from hp_lsp.client_units import to_client_range
from hp_lsp.outline import Entry, scan
from hp_lsp.session import DocState

SOURCE = "hp-lsp"

_SEVERITY = {
    Severity.ERROR: types.DiagnosticSeverity.Error,
    Severity.WARNING: types.DiagnosticSeverity.Warning,
    Severity.INFORMATION: types.DiagnosticSeverity.Information,
    Severity.HINT: types.DiagnosticSeverity.Hint,
}

_DOCS = Path(__file__).resolve().parents[2] / "docs" / "diagnostics.md"


def code_href(code: str) -> str | None:
    """docs/diagnostics.md#hpxxx when the docs ship beside the package (a source checkout)."""
    if code not in CODES or not _DOCS.is_file():
        return None
    base = from_fs_path(str(_DOCS))
    return f"{base}#{code.lower()}" if base else None


def to_lsp(d: Diagnostic, lines: Sequence[str], codec: PositionCodec, *, links: bool = True) -> types.Diagnostic:
    href = code_href(d.code) if links else None
    return types.Diagnostic(
        range=to_client_range(lines, codec, d.range),
        message=d.message,
        severity=_SEVERITY[d.effective_severity],
        code=d.code,
        code_description=types.CodeDescription(href=href) if href else None,
        source=SOURCE,
        # What code actions need to rebuild the fix without re-checking: the dotted path and the engine's data.
        data={"path": d.path, **d.data} if (d.path or d.data) else None,
    )


def _entries_by_path(entries: Sequence[Entry]) -> dict[str, Entry]:
    out: dict[str, Entry] = {}
    for e in entries:
        out.setdefault(e.dotted, e)
    return out


def reanchor(diags: Sequence[Diagnostic], old_text: str | None, new_entries: Sequence[Entry]) -> list[Diagnostic]:
    """Move diagnostics computed on `old_text` to where their key now is (by line delta of the key)."""
    if old_text is None:
        return list(diags)
    old = _entries_by_path(scan(old_text))
    new = _entries_by_path(new_entries)
    out = []
    for d in diags:
        a, b = old.get(d.path), new.get(d.path)
        if a is not None and b is not None and a.line != b.line:
            delta = b.line - a.line
            r = d.range
            d = d.with_range(Range.of(r.start.line + delta, r.start.character, r.end.line + delta, r.end.character))
        out.append(d)
    return out


def relocate_foreign(diags: Sequence[Diagnostic], entries: Sequence[Entry]) -> list[Diagnostic]:
    """Findings in a referenced train.yaml, shown at this file's `train_yaml` key with their file:line."""
    anchor = _entries_by_path(entries).get("train_yaml")
    rng = anchor.key_range if anchor else Range.point(0, 0)
    out = []
    for d in diags:
        where = f"{os.path.basename(d.file or '')}:{d.range.start.line + 1}"
        out.append(replace(d, message=f"{where}: {d.message}", range=rng, data={**d.data, "file": d.file}))
    return out


# Appended to a search finding while the buffer has changed since the search ran (DocState.search_stale).
STALE_NOTE = " (of the last saved version: save to refresh)"


def collect(state: DocState) -> list[Diagnostic]:
    """Everything to publish for a document, in engine terms (code points)."""
    analysis = state.analysis
    if analysis is None or not analysis.is_config:
        return []
    out = list(analysis.diagnostics)
    out += relocate_foreign(analysis.foreign, analysis.entries)
    if state.search is not None and not analysis.too_large:
        mine = [d for d in state.search.diagnostics if d.file is None or d.file == state.path]
        theirs = [d for d in state.search.diagnostics if not (d.file is None or d.file == state.path)]
        search_diags = (reanchor(mine, state.search.text, analysis.entries) if state.search_stale else mine) + \
            relocate_foreign(theirs, analysis.entries)
        if state.search_stale:  # their figures are of the searched text, not of what the buffer says now
            search_diags = [replace(d, message=d.message + STALE_NOTE) for d in search_diags]
        seen = {(d.code, d.path) for d in out}  # a finding the fast check has fresher than the search's
        out += [d for d in search_diags if (d.code, d.path) not in seen]
    # Each fact once (HP520 from the price, HP610 from the search: engine.facts), and never the same finding
    # twice in one publish, whatever path produced it.
    return list(merge(out))


def lsp_diagnostics(state: DocState, lines: Sequence[str], codec: PositionCodec, *,
                    links: bool = True) -> list[types.Diagnostic]:
    """`links`: the client advertises publishDiagnostics.codeDescriptionSupport (links to docs/diagnostics.md)."""
    return [to_lsp(d, lines, codec, links=links) for d in collect(state)]
