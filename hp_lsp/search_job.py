"""The job the worker process runs: check, search, and pre-compute the "apply the best plan" edits.

This module is imported by the spawned child; it must stay importable without pygls state and return only
picklable values (engine results hold `MappingProxyType` fields: hp_lsp.worker registers their pickling).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from types import MappingProxyType

from engine.check import check_file
from engine.config.types import ClusterOverrides, Config, Loaded
from engine.diagnostics import Diagnostic
from engine.document import DEFAULT_MAX_BYTES, Reads
from engine.edit.strategy_keys import blocking
from engine.positions import TextEdit
from engine.ratios.attach import RatiosRequest
from engine.results import Estimate, SearchResult
from engine.search.stated import priced_as_searched
from engine.search.written import Written, written_plan


@dataclass(frozen=True, slots=True)
class SearchRequest:
    path: str
    text: str | None  # the buffer; None = read the file from disk
    overrides: ClusterOverrides | None
    version: int | None = None  # the document version searched (the server's bookkeeping)
    top: int = 10
    # A train.yaml referenced by a search config is searched over that config's space (its lists, batch,
    # budget and recompute request); `space_text` is its open buffer, None to read it from disk.
    space_path: str | None = None
    space_text: str | None = None
    # The editor settings, which fill what that search config leaves unsaid (as its own check reads it).
    space_overrides: ClusterOverrides | None = None
    # The other open documents (absolute path -> unsaved buffer), a plain dict so it pickles: a search
    # config's train.yaml is read from here when it is open (the editor's view wins over the disk).
    texts: dict[str, str] | None = None
    # The setting hpLsp.ratiosFile (a file's own estimator.ratios_file wins over it); frozen, so it pickles.
    ratios: RatiosRequest | None = None
    max_bytes: int = DEFAULT_MAX_BYTES  # hpLsp.maxFileSizeKb: the linked train.yaml counts against it too
    # What the check of this version already read, resolved and priced (hp_lsp.analysis.Analysis), so the job
    # neither reads nor prices it again: the document as checked, the search config that gave a train.yaml its
    # cluster (as checked for it, its ratios attached: Scheduler.cluster_for), a search config's train.yaml as
    # the file stating the plan, and the stated plan's price. None: read it here.
    loaded: Loaded | None = None
    space: Loaded | None = None
    stated_source: Config | None = None
    stated: Estimate | None = None


def _overlay(texts: dict[str, str] | None, path: str, text: str | None) -> dict[str, str] | None:
    """The editor's view for the engine: the open buffers plus the searched document's own text."""
    if text is None:
        return texts
    return {**(texts or {}), path: text}


@dataclass(frozen=True, slots=True)
class SearchOutcome:
    """A finished search of one document version. `edits` write the best strategy into `text` (only for
    a train.yaml, whose strategy keys they rewrite); `note` says why there is no result."""

    result: SearchResult | None
    diagnostics: tuple[Diagnostic, ...]
    text: str | None
    edits: tuple[TextEdit, ...] | None = None
    edit_error: str | None = None
    elapsed_s: float = 0.0
    note: str | None = None
    # For a search config: the price of the strategy its train.yaml states (hover and lens show it beside
    # the best plan, as they do in the train.yaml itself).
    stated: Estimate | None = None
    # What Apply writes (engine.search.written): the best, or the fastest plan the trainer runs where the best
    # offloads what no trainer key states. None: no search result.
    written: Written | None = None
    # (path, values_fingerprint) of every file the search read: what decides whether its plan still applies to
    # the buffers as they are now (hp_lsp.features.code_actions.optimal_edits).
    read: tuple[tuple[str, str], ...] = ()


def run_search(req: SearchRequest, *, progress: Callable[[float], None],
               cancelled: Callable[[], bool]) -> SearchOutcome:
    """Check the text, search its space and build the edits for the best plan. Runs in the worker.

    Diagnostics positioned in another file than `req.path` carry `file`; the server shows them at this
    file's `train_yaml` key (search config) or at the top (a train.yaml searched through its search config).
    """
    from engine.search import compare_stated, search  # the child pays the import, not the server

    t0 = time.monotonic()
    texts = _overlay(req.texts, req.path, req.text)
    reads = Reads()
    loaded = req.loaded or check_file(req.path, text=req.text, overrides=req.overrides, texts=texts,
                                      ratios=req.ratios, reads=reads, max_bytes=req.max_bytes)
    if loaded.config is None or blocking(list(loaded.diagnostics), loaded.config, req.path):
        return SearchOutcome(None, (), req.text, elapsed_s=time.monotonic() - t0,
                             note="the file has errors: fix them to search")
    space_loaded: Loaded | None = None
    if req.space_path is not None:
        space_loaded = req.space or check_file(req.space_path, text=req.space_text, overrides=req.space_overrides,
                                               texts=texts, ratios=req.ratios, reads=reads, max_bytes=req.max_bytes)
        if req.loaded is None:  # the check's own (carried) is priced as searched already
            loaded = priced_as_searched(loaded, space_loaded)
    config = loaded.config
    assert config is not None
    space, space_file = config, None
    if space_loaded is not None and space_loaded.config is not None \
            and not any(d.is_error for d in space_loaded.diagnostics):
        space, space_file = space_loaded.config, req.space_path
    result = search(space, top=req.top, progress=progress, cancelled=cancelled)
    if cancelled():
        return SearchOutcome(None, (), req.text, elapsed_s=time.monotonic() - t0, note="cancelled")
    # Refusals (HP60x, at the lists/constraint) and the stated-vs-best advice (HP610/HP611), as `hp-plan` gives:
    # compare_stated reads a search config's train.yaml (its open buffer, else the disk) once, by the engine's
    # one rule, and returns the stated plan's price it compared with, which hover and lens show beside the best.
    refusals = [replace(d, file=d.file or space_file) for d in result.diagnostics]
    comparison = compare_stated(config, result, texts=texts, reads=reads, priced=req.stated,
                                source=req.stated_source)
    stated = comparison.estimate if config.kind == "search" else None  # a train.yaml's own check prices it
    written = written_plan(space, result, lambda c: search(c, top=1, cancelled=cancelled))
    if cancelled():  # during the search without offload: its empty result says nothing about the plan
        return SearchOutcome(None, (), req.text, elapsed_s=time.monotonic() - t0, note="cancelled")
    edits: tuple[TextEdit, ...] | None = None
    edit_error: str | None = None
    if written.estimate is not None and config.kind == "train" and req.text is not None:
        edits, edit_error = best_edits(req.text, written.estimate, req.path)
    seen = {**reads.parsed_texts(), **({req.path: req.text} if req.text is not None else {})}
    return SearchOutcome(result, (*refusals, *comparison.diagnostics), req.text, edits, edit_error,
                         time.monotonic() - t0, stated=stated, written=written,
                         read=tuple((p, values_fingerprint(t)) for p, t in seen.items()))


def values_fingerprint(text: str) -> str:
    """A digest of a text's lines with blank and comment-only lines left out and trailing blanks cut: an edit of
    comments or spacing keeps it, an edit of any value (or of a key's place) changes it. Linear in the text, so a
    code action can ask it of a 512 KB buffer."""
    import hashlib

    kept = (line.rstrip() for line in text.splitlines())
    body = "\n".join(line for line in kept if line and not line.lstrip().startswith("#"))
    return hashlib.blake2b(body.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def best_edits(text: str, best: Estimate | None, path: str | None) -> tuple[tuple[TextEdit, ...] | None, str | None]:
    """The engine's round-trip edits writing the plan `best` into a train.yaml text, or why not."""
    from engine.edit import plan_edits

    if best is None:
        return None, "no strategy fits"
    try:
        out = plan_edits(text, best, path=path)
    except Exception as exc:  # the engine promises not to raise; keep the server alive if it does
        return None, f"cannot write the strategy: {exc}"
    return (out.edits, None) if out.ok else (None, out.error)


@dataclass(frozen=True, slots=True)
class ListsRequest:
    """Which values of each candidate list can fit: one small search per listed value, run after the main
    search (its result is already published) so the hover on a list can say which of its values fit."""

    path: str
    text: str | None
    max_values: int = 16  # lists longer than this are not expanded
    texts: dict[str, str] | None = None  # the other open buffers, as in SearchRequest
    max_bytes: int = DEFAULT_MAX_BYTES  # hpLsp.maxFileSizeKb, as the main search read the files
    # The settings and ratios file the main search priced with (SearchRequest's): a list's values are priced on
    # the same stack, cluster and budget as the best plan beside them.
    overrides: ClusterOverrides | None = None
    ratios: RatiosRequest | None = None


@dataclass(frozen=True, slots=True)
class ListFacts:
    """dimension -> value -> step time of the best plan that fits with that value (None: none fits)."""

    values: dict[str, dict[int, float | None]]


def run_lists(req: ListsRequest, *, progress: Callable[[float], None],
              cancelled: Callable[[], bool]) -> ListFacts | None:
    from engine.config.types import Dimension
    from engine.search import search

    loaded = check_file(req.path, text=req.text, overrides=req.overrides, texts=req.texts, ratios=req.ratios,
                        max_bytes=req.max_bytes)
    config = loaded.config
    if config is None or any(d.is_error for d in loaded.diagnostics):
        return None
    lists = [(name, dim) for name, dim in config.dimensions.items()
             if dim.state == "list" and 1 < len(dim.values) <= req.max_values]
    total = sum(len(dim.values) for _, dim in lists) or 1
    done = 0
    out: dict[str, dict[int, float | None]] = {}
    for name, dim in lists:
        per: dict[int, float | None] = {}
        for v in dim.values:
            if cancelled():
                return None
            fixed = Dimension(name, "fixed", (v,), dim.origin, dim.location)
            one = replace(config, dimensions=MappingProxyType({**config.dimensions, name: fixed}))
            result = search(one, top=1, cancelled=cancelled)
            per[v] = result.best.step_time_s if result.best is not None else None
            done += 1
            progress(done / total)
        out[name] = per
    return ListFacts(out)


def run_job(payload: SearchRequest | ListsRequest, *, progress: Callable[[float], None],
            cancelled: Callable[[], bool]) -> SearchOutcome | ListFacts | None:
    """The worker's entry point: one function, two kinds of job."""
    if isinstance(payload, ListsRequest):
        return run_lists(payload, progress=progress, cancelled=cancelled)
    return run_search(payload, progress=progress, cancelled=cancelled)
