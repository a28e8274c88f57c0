"""`check_file`: read, resolve and validate a train.yaml or search config; the one call both front ends make.

Never raises: any internal failure becomes an HP900 diagnostic (the CLI and the server must never show a
traceback for a user's file).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from engine.config.resolve import internal_error, resolve
from engine.config.types import ClusterOverrides, Loaded
from engine.diagnostics import MAX_DIAGNOSTICS, Diagnostic
from engine.document import DEFAULT_MAX_BYTES, Reads
from engine.facts import unique
from engine.positions import DOCUMENT_START
from engine.ratios.attach import RatiosRequest, with_ratios
from engine.validate import validate


def _key(d: Diagnostic) -> tuple[str, int, int, str]:
    return (d.file or "", d.range.start.line, d.range.start.character, d.code)


def _bounded(diags: list[Diagnostic]) -> list[Diagnostic]:
    """At most MAX_DIAGNOSTICS findings, the most severe first (so an error is never dropped for a note), in
    file order, and one HP011 at the document start saying how many more there were."""
    if len(diags) <= MAX_DIAGNOSTICS:
        return diags
    kept = sorted(diags, key=lambda d: (-d.effective_severity.rank, _key(d)))[:MAX_DIAGNOSTICS]
    more = len(diags) - len(kept)
    note = Diagnostic("HP011", f"{more:,} more findings not shown: only the first {MAX_DIAGNOSTICS:,} are "
                      "reported (fix these and check again)", DOCUMENT_START)
    return [note, *sorted(kept, key=_key)]


def check_file(path: str, text: str | None = None, overrides: ClusterOverrides | None = None, *,
               max_bytes: int = DEFAULT_MAX_BYTES, texts: Mapping[str, str] | None = None,
               ratios: RatiosRequest | None = None, reads: Reads | None = None) -> Loaded:
    """Diagnostics for `path` (or the editor buffer `text` standing for it), sorted by file and position,
    and the resolved Config when the file could be read. `max_bytes` is the size above which a file gets
    one HP005 "too large to analyse" diagnostic (the server's hpLsp.maxFileSizeKb).

    `texts` is the editor's view of other files (absolute path -> unsaved buffer text): the train.yaml a
    search config references is read from it when it is there, so an unsaved edit in the linked file
    counts at once (the language server passes its open documents; the CLI reads the disk only).

    `ratios` names a ratios file from outside the files (`--ratios`, the setting hpLsp.ratiosFile); with the
    config's own `estimator.ratios_file` it is attached to the config (engine.ratios.attach).

    `reads` is what the request has read and parsed already (engine.document.Reads): a caller that meets a
    file twice in one request (the CLI's search, the server's check and its cluster) passes one."""
    try:
        resolved = resolve(path, text, overrides, max_bytes=max_bytes, texts=texts, reads=reads)
        diags = list(resolved.diagnostics)
        try:
            diags += validate(resolved)
        except Exception as exc:  # a rule failing must not hide the reading diagnostics
            diags.append(internal_error(exc))
        loaded = with_ratios(Loaded(resolved.config, tuple(diags), tuple(resolved.files)), ratios,
                             dict(texts) if texts else None)
        return replace(loaded, diagnostics=tuple(_bounded(unique(sorted(loaded.diagnostics, key=_key)))))
    except Exception as exc:  # the contract: never a traceback
        return Loaded(None, (internal_error(exc),), (path,))
