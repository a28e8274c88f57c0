"""The fast analysis of one document version, as a pure function over the engine (no pygls here).

`analyse` runs on the server's check thread (a RUNS file's on its calibration thread) after the debounce (never on
the event loop: it reads files): read + resolve + validate (`engine.check.check_file`;
`benchmarks/lsp_latency.py` times it) and the price of the stated strategy (`engine.cost.estimate_config`, one
row). The search is not here: it runs in the worker process (search_job.py).
"""

from __future__ import annotations

import traceback
from collections.abc import Mapping
from dataclasses import dataclass, field

from engine.calibrate.result import Calibration
from engine.calibrate.runs import is_runs_file
from engine.check import check_file
from engine.config.types import ClusterOverrides, Config, Loaded
from engine.cost import estimate_config
from engine.diagnostics import Diagnostic
from engine.document import DEFAULT_MAX_BYTES, Reads, text_too_large
from engine.facts import merge
from engine.ratios.attach import RatiosRequest
from engine.results import Estimate
from hp_lsp.outline import Entry, scan
from hp_lsp.workspace import same_path

NOT_A_CONFIG = "HP008"


@dataclass(frozen=True, slots=True)
class Analysis:
    """What the fast checks found in one version of a document."""

    path: str | None
    version: int | None
    text: str
    loaded: Loaded | None
    estimate: Estimate | None = None
    diagnostics: tuple[Diagnostic, ...] = ()  # positioned in this document
    foreign: tuple[Diagnostic, ...] = ()  # found in another file this one references (its train_yaml)
    entries: tuple[Entry, ...] = field(default_factory=tuple)
    too_large: bool = False
    failure: str | None = None  # an engine exception caught here (logged by the server, never shown as a popup)
    calibration: Calibration | None = None  # a RUNS file's calibration (hp_lsp.features.calibration)
    overrides: ClusterOverrides | None = None  # the cluster this version was checked with (the search reuses it)
    cluster_source: str | None = None  # the search config that gave it, if any
    # What the search job would otherwise read again (engine.document.Reads keeps one request's reads; these
    # travel to the worker): the search config that gave a train.yaml its cluster, as checked for it; for a
    # search config, its train.yaml read as the stated plan's file (engine.search.stated.stated_source).
    space: Loaded | None = None
    stated_source: Config | None = None

    @property
    def config(self) -> Config | None:
        return self.loaded.config if self.loaded is not None else None

    @property
    def files(self) -> tuple[str, ...]:
        return self.loaded.files if self.loaded is not None else ()

    @property
    def is_config(self) -> bool:
        """False for YAML that is not a HyperParallel config: the server leaves it alone."""
        if self.too_large:
            return True
        if self.loaded is None:
            return False
        return not any(d.code == NOT_A_CONFIG for d in self.loaded.diagnostics)


def analyse(path: str | None, text: str, version: int | None, *, overrides: ClusterOverrides | None,
            max_file_size_kb: int, texts: Mapping[str, str] | None = None,
            ratios: RatiosRequest | None = None, reads: Reads | None = None,
            space: Loaded | None = None) -> Analysis:
    """Check one document version; never raises (the engine reports its own failures as HP900). `texts`
    holds the other open documents (path -> buffer): a search config's train.yaml is read from there when
    it is open, so its unsaved edits count (the editor's view wins over the disk). `space`: the search config
    that references this train.yaml, as checked (its cluster is `overrides`): the stated plan is priced as that
    search prices it (engine.search.stated.priced_as_searched)."""
    big = text_too_large(text, max_file_size_kb * 1024)
    if big is not None:
        return Analysis(path, version, text, None, diagnostics=(big,), too_large=True)
    if is_runs_file(text):
        return analyse_runs(path or "untitled.yaml", text, version)
    # The linked train.yaml counts against the same setting: a larger one gets HP005 (in it) and HP009 (at the
    # link) without being parsed; a 4.4 MB one cost 20 s per check before.
    reads = reads if reads is not None else Reads()
    from engine.search.stated import priced_as_searched  # as _stated_source: the search package on first use

    loaded = priced_as_searched(check_file(path or "untitled.yaml", text=text, overrides=overrides, texts=texts,
                                           ratios=ratios, reads=reads, max_bytes=max_file_size_kb * 1024), space)
    estimate: Estimate | None = None
    failure: str | None = None
    est_diags: tuple[Diagnostic, ...] = ()
    config = loaded.config
    if config is not None and config.stated is not None and config.model is not None and config.cluster:
        try:
            estimate, est_diags = estimate_config(config)
        except Exception:  # the engine promises not to raise; a bug there must not cost the check's findings
            failure = traceback.format_exc()
    # The check and the cost model may state one fact twice (HP415 and HP506): engine.facts keeps one.
    own: list[Diagnostic] = []
    foreign: list[Diagnostic] = []
    for d in merge(loaded.diagnostics, est_diags):
        (own if d.file is None or (path is not None and same_path(d.file, path)) else foreign).append(d)
    return Analysis(path, version, text, loaded, estimate, tuple(own), tuple(foreign), tuple(scan(text)),
                    failure=failure, stated_source=_stated_source(config, texts, reads, max_file_size_kb * 1024))


def _stated_source(config: Config | None, texts: Mapping[str, str] | None, reads: Reads,
                   max_bytes: int) -> Config | None:
    """A search config's train.yaml as the file stating the plan, read through this check's reads (parsed
    already as the config's source) and against the same size limit (a train.yaml over it is not parsed for
    this either): the search job compares with it instead of reading it again."""
    if config is None or config.kind != "search":
        return None
    from engine.search.stated import stated_source

    return stated_source(config, texts, reads=reads, max_bytes=max_bytes)


def analyse_runs(path: str, text: str, version: int | None) -> Analysis:
    """A RUNS file (docs/formats.md §6): its calibration, whose diagnostics are positioned in it; the configs and
    logs it names are the files it reads, so editing one re-checks it."""
    from engine.calibrate.result import calibrate

    cal = calibrate(path, text)
    reads = [path]
    for r in cal.runs:
        reads += [p for p in (r.measured.entry.config_path, r.measured.entry.log_path) if p]
        reads += [r.measured.config.train_yaml] if r.measured.config.train_yaml else []
    loaded = Loaded(None, cal.diagnostics, tuple(dict.fromkeys(reads)))
    own = tuple(d for d in cal.diagnostics if d.file is None)
    return Analysis(path, version, text, loaded, diagnostics=own, entries=tuple(scan(text)), calibration=cal)


def search_config_cluster(search_path: str, text: str | None = None, *, texts: Mapping[str, str] | None = None,
                          reads: Reads | None = None, max_bytes: int = DEFAULT_MAX_BYTES,
                          overrides: ClusterOverrides | None = None) -> tuple[ClusterOverrides | None, Loaded | None]:
    """The cluster a search config states for its train.yaml (`cluster_from_search_config`) and the search
    config as checked to find it: the space a search of that train.yaml runs over, which the search job then
    does not read again. `reads`: the request's (the train.yaml being checked is parsed once, under the same
    size limit `max_bytes` as its own check, hpLsp.maxFileSizeKb); `overrides`: the editor settings, which fill
    what the search config leaves unsaid, as in its own check."""
    from engine.search.stated import stated_overrides

    loaded = check_file(search_path, text=text, texts=texts, reads=reads, max_bytes=max_bytes, overrides=overrides)
    config = loaded.config
    if config is None or config.kind != "search":
        return None, None
    return stated_overrides(config), loaded


def cluster_from_search_config(search_path: str, text: str | None = None, *,
                               texts: Mapping[str, str] | None = None) -> ClusterOverrides | None:
    """The cluster a search config states (and its memory budget), as explicit overrides for the train.yaml
    it references, by the engine's one rule (engine.search.stated.stated_overrides, which `hp-plan search`
    and the worker's comparison use too). `texts`: open buffers (the train.yaml's own, whose
    context.device_num the cluster may take)."""
    return search_config_cluster(search_path, text, texts=texts)[0]
