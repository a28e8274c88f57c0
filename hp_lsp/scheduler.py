"""When to check, when to search, what to publish: the glue between LSP events and the services.

Runs on the event loop, which only snapshots and publishes: fast checks (engine.check + the stated plan's
price; `benchmarks/lsp_latency.py` times them) run on the check thread after a DEBOUNCE_S pause in typing, a RUNS
file's on the calibration thread (they read linked files and logs, and no file is read on the loop: docs/files.md);
searches go to the worker process on open and save (setting searchOnSave) and come back through
`call_soon_threadsafe`. Every step is wrapped so an exception becomes a log message and never a popup or a dead
server.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import threading
import traceback
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from lsprotocol import types
from pygls.workspace import TextDocument

from engine.calibrate.runs import may_be_runs_file
from engine.config.types import ClusterOverrides, Loaded
from engine.document import DEFAULT_MAX_BYTES, Reads, read_text, text_too_large
from engine.edit.strategy_keys import blocking
from engine.ratios.attach import with_ratios
from hp_lsp.analysis import Analysis, analyse, search_config_cluster
from hp_lsp.client import ClientFeatures
from hp_lsp.documents import disk_path
from hp_lsp.features import diagnostics
from hp_lsp.search_job import ListsRequest, SearchOutcome, SearchRequest
from hp_lsp.session import DocState, Session
from hp_lsp.worker import Job, Outcome
from hp_lsp.workspace import SearchConfigIndex, referenced_train_yaml

if TYPE_CHECKING:
    from engine.ratios.attach import RatiosRequest

T = TypeVar("T")
DEBOUNCE_S = 0.3
LISTS_SUFFIX = "#lists"  # worker key of a document's list job (its own key: it never supersedes the search)
CLUSTER_CACHE_MAX = 64
log = logging.getLogger(__name__)


Log = Callable[[types.MessageType, str], None]


def _norm(path: str) -> str:
    return os.path.normcase(os.path.normpath(path))


def guarded(log: Log, what: str, fn: Callable[..., Any], *args: Any) -> Any:
    """Run `fn`; an exception becomes one log message to the client (never a popup)."""
    try:
        return fn(*args)
    except Exception:
        log(types.MessageType.Error, f"hp-lsp: {what} failed:\n{traceback.format_exc()}")
        return None


@dataclasses.dataclass(frozen=True, slots=True)
class CheckInput:
    """What a check reads, snapshotted on the loop: the document, the settings and the other open buffers."""

    path: str | None
    uri: str
    text: str
    version: int | None
    settings: ClusterOverrides | None
    max_kb: int
    texts: dict[str, str]
    roots: tuple[str, ...]
    ratios: RatiosRequest | None = None  # the setting hpLsp.ratiosFile (engine.ratios.attach)


@dataclasses.dataclass(frozen=True, slots=True)
class FoundCluster:
    """A document's cluster overrides, the search config they came from, and that config as checked."""

    overrides: ClusterOverrides | None
    source: str | None = None
    space: Loaded | None = None


def carried(analysis: Analysis, text: str, version: int | None) -> dict[str, Any]:
    """What the check of this very text already read, resolved and priced, for the search job to take instead
    of reading and pricing it again (a save read the train.yaml three times and priced its plan twice)."""
    if analysis.text != text or analysis.version != version:
        return {}
    return {"loaded": analysis.loaded, "space": analysis.space, "stated_source": analysis.stated_source,
            "stated": analysis.estimate}


class Publisher(Protocol):
    """Where results go: the client's diagnostics and code lenses (hp_lsp.client.Client)."""

    @property
    def features(self) -> ClientFeatures: ...
    def publish_diagnostics(self, uri: str, version: int | None, diagnostics: list[types.Diagnostic]) -> None: ...
    def refresh_code_lenses(self) -> None: ...


class Jobs(Protocol):
    """The search worker (hp_lsp.worker.SearchWorker): one job per key, a newer one supersedes."""

    def submit(self, job: Job) -> None: ...
    def cancel(self, key: str) -> None: ...


class Progress(Protocol):
    """Work-done progress per document (hp_lsp.features.progress.SearchProgress)."""

    def started(self, uri: str, title: str) -> None: ...
    def report(self, uri: str, fraction: float) -> None: ...
    def finished(self, uri: str, message: str | None = None) -> None: ...


class Workspace(Protocol):
    """The editor's open buffers and folders (pygls' Workspace, made at initialize: hence a getter)."""

    def get_text_document(self, doc_uri: str) -> TextDocument: ...
    @property
    def root_path(self) -> Any: ...
    @property
    def folders(self) -> Any: ...


class Scheduler:
    """Decides when to check, search and publish; owns the checker and edit threads. Its collaborators are
    explicit (the session's state and settings, the open buffers, the outbox, the worker, the progress, the
    loop's call_soon, the log), so a test drives it with fakes and nothing here knows the pygls server."""

    def __init__(self, *, session: Session, workspace: Callable[[], Workspace], client: Publisher, jobs: Jobs,
                 progress: Progress, call_soon: Callable[..., object], log: Log) -> None:
        self.session, self.workspace, self.client = session, workspace, client
        self.jobs, self.progress, self.call_soon, self.log = jobs, progress, call_soon, log
        self.index = SearchConfigIndex()
        self._checker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hp-lsp-check")
        # a RUNS file's check reads its logs and profiles (up to 512 MiB each, seconds to read once): on a thread of
        # its own, so the configs' checks never wait behind it
        self._calibrator = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hp-lsp-calibrate")
        self._edits = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hp-lsp-edit")
        self._cluster_cache: dict[tuple[str, int, int, int, ClusterOverrides | None],
                                  tuple[ClusterOverrides | None, Loaded | None]] = {}
        self._disk_texts: dict[str, tuple[tuple[int, int], str]] = {}
        self._cluster_lock = threading.Lock()  # the check threads fill both, the loop invalidates them

    # -- document events -----------------------------------------------------------------------------
    def opened(self, uri: str) -> None:
        doc = self.workspace().get_text_document(uri)
        self.session.open(uri, doc.path, doc.version)
        self.check(uri)
        self.search(uri)

    def changed(self, uri: str) -> None:
        doc = self.workspace().get_text_document(uri)
        state = self.session.change(uri, doc.version)
        if state is None:
            return
        loop = asyncio.get_running_loop()
        self.session.set_debounce(uri, loop.call_later(DEBOUNCE_S, self._debounced, uri, state.generation))

    def _debounced(self, uri: str, generation: int) -> None:
        state = self.session.get(uri)
        if state is None or state.generation != generation:
            return
        self.session.set_debounce(uri, None)
        self.check(uri)
        self.recheck_dependents(state.path, exclude=uri, search=False)

    def saved(self, uri: str) -> None:
        state = self.session.get(uri)
        if state is None:
            return
        self.session.set_debounce(uri, None)
        self.check(uri)
        self.search(uri)
        self.recheck_dependents(state.path, exclude=uri, search=True)

    def closed(self, uri: str) -> None:
        state = self.session.close(uri)
        if state is not None and state.debounce is not None:
            state.debounce.cancel()
        if state is not None:
            # Its unsaved buffer no longer stands for the file: the documents that read it go back to the disk.
            self.recheck_dependents(state.path, exclude=uri, search=False)
        self.jobs.cancel(uri)
        self.jobs.cancel(uri + LISTS_SUFFIX)
        self.progress.finished(uri)
        self.client.publish_diagnostics(uri, None, [])

    def files_changed(self, uris: list[str]) -> None:
        """Watched files changed on disk: re-check the open documents that read them."""
        affected: set[str] = set()
        for uri in uris:
            path = disk_path(uri)
            if not path:
                continue
            self.index.forget(path)
            with self._cluster_lock:
                self._cluster_cache = {k: v for k, v in self._cluster_cache.items() if k[0] != path}
                self._disk_texts.pop(path, None)
            affected.update(self.session.dependents(path, exclude=uri))
            if uri not in self.session.docs and path.endswith((".yaml", ".yml")):
                # A search config appearing or changing may now give an open train.yaml its cluster.
                affected.update(u for u, s in self.session.docs.items()
                                if s.analysis is not None and s.analysis.config is not None
                                and s.analysis.config.kind == "train")
        for uri in sorted(affected):
            self.check(uri)
            self.search(uri)

    def settings_changed(self) -> None:
        with self._cluster_lock:
            self._cluster_cache.clear()
            self._disk_texts.clear()
        for uri in sorted(self.session.docs):
            self.check(uri)
            self.search(uri)

    def recheck_dependents(self, path: str | None, *, exclude: str, search: bool) -> None:
        if not path:
            return
        for uri in self.session.dependents(path, exclude=exclude):
            self.check(uri)
            if search:
                self.search(uri)

    # -- fast checks ---------------------------------------------------------------------------------
    def check(self, uri: str) -> Analysis | None:
        return guarded(self.log, "check", self._check, uri)

    def _check(self, uri: str) -> Analysis | None:
        """Snapshot the document and the editor's other buffers on the loop; read, resolve and validate on the
        checker thread (the check reads linked files from disk, and no file is read on the event loop: a
        FIFO or a slow disk must never freeze the server); record and publish back on the loop."""
        state = self.session.get(uri)
        if state is None:
            return None
        doc = self.workspace().get_text_document(uri)
        text, version, generation = doc.source, doc.version, state.generation
        snapshot = CheckInput(state.path, uri, text, version, self.session.settings.overrides(),
                              self.session.settings.max_file_size_kb, self.open_texts(exclude=uri),
                              tuple(self.roots()), self.ratios_request())
        self.session.begin_check(uri)
        fut = self._check_thread(text).submit(self.analyse_off_loop, snapshot)
        fut.add_done_callback(lambda f: self.call_soon(guarded, self.log, "check", self._checked_future, uri,
                                                          generation, f))
        return None

    def _check_thread(self, text: str) -> ThreadPoolExecutor:
        """The calibration thread for a text that may be a RUNS file, else the check thread. One text always goes
        to the same one, so the checks of one version land in the order they were asked for."""
        return self._calibrator if may_be_runs_file(text) else self._checker

    def ratios_request(self) -> RatiosRequest | None:
        """The setting hpLsp.ratiosFile, relative to the workspace root (docs/formats.md §4, §6)."""
        return self.session.settings.ratios_request(self.workspace().root_path)

    def analyse_off_loop(self, job: CheckInput) -> Analysis:
        """Checker thread: the cluster (a search config on disk may give it) and the analysis. A text over
        maxFileSizeKb is not read for its cluster either: the search config's check parsed it (7.8 s per edit
        of a 1.3 MB train.yaml that showed only "file too large")."""
        reads = Reads()  # this check's: the train.yaml typed is parsed once, for its cluster and its check
        if text_too_large(job.text, job.max_kb * 1024) is not None:
            found = FoundCluster(job.settings)
        else:
            found = self.cluster_for(job.path, job.text, job.settings, job.texts, job.roots, reads,
                                     max_bytes=job.max_kb * 1024, ratios=job.ratios)
        analysis = analyse(job.path, job.text, job.version, overrides=found.overrides, max_file_size_kb=job.max_kb,
                           texts=job.texts, ratios=job.ratios, reads=reads, space=found.space)
        return dataclasses.replace(analysis, overrides=found.overrides, cluster_source=found.source,
                                   space=found.space)

    def _checked_future(self, uri: str, generation: int, fut: Future[Analysis]) -> None:
        try:
            if not fut.cancelled():
                self._checked(uri, generation, fut.result())
        finally:  # counted down, and a search that waited for it started, whatever the check or its publish raised
            if self.session.end_check(uri, generation):
                self.search(uri)

    def _checked(self, uri: str, generation: int, analysis: Analysis) -> None:
        if analysis.failure:
            self.log(types.MessageType.Error, f"hp-lsp: pricing the stated strategy failed:\n{analysis.failure}")
        if self.session.record_analysis(uri, generation, analysis):
            self.publish(uri)

    def shutdown(self) -> None:
        self._checker.shutdown(wait=False, cancel_futures=True)
        self._calibrator.shutdown(wait=False, cancel_futures=True)
        self._edits.shutdown(wait=False, cancel_futures=True)

    async def off_loop(self, fn: Callable[..., T], *args: Any) -> T:
        """Run `fn(*args)` on the edit thread and await it: code actions and the Apply command read linked
        files and rewrite strategies there, so one slow request never freezes the loop."""
        return await asyncio.get_running_loop().run_in_executor(self._edits, fn, *args)

    def roots(self) -> list[str]:
        roots = [p for p in (disk_path(f.uri) for f in self.workspace().folders.values()) if p]
        if self.workspace().root_path:
            roots.append(self.workspace().root_path)
        return sorted(set(roots))

    def cluster_for(self, path: str | None, text: str, settings: ClusterOverrides | None,
                    open_texts: dict[str, str], roots: Sequence[str], reads: Reads | None = None, *,
                    max_bytes: int = DEFAULT_MAX_BYTES, ratios: RatiosRequest | None = None) -> FoundCluster:
        """Cluster facts for a document, in the order of D-006: a search config that references it (train.yaml only; explicit, so it
        wins over the file's `context`), else the file's own `context`, else the settings (which only fill what
        the file leaves unsaid). The search config comes back as checked, with the ratios file its search prices
        with (`ratios`: the setting hpLsp.ratiosFile, under its own estimator.ratios_file). Reads the disk:
        the check and calibration threads only."""
        if not path or referenced_train_yaml(path, text) is not None:  # a search config states its own cluster
            return FoundCluster(settings)
        source = self.index.referencing(path, roots, open_texts)
        if source is None:
            return FoundCluster(settings)
        overrides, space = self._cluster_of(source, open_texts.get(source), path, text, reads, max_bytes, settings)
        if space is not None:  # read on every check, not cached: an edited ratios file re-prices the pair
            space = with_ratios(space, ratios, open_texts)
        return FoundCluster(overrides or settings, source, space)

    def _cluster_of(self, search_path: str, text: str | None, train_path: str, train_text: str,
                    reads: Reads | None, max_bytes: int = DEFAULT_MAX_BYTES,
                    settings: ClusterOverrides | None = None) -> tuple[ClusterOverrides | None, Loaded | None]:
        """The search config's cluster and the config as checked, read with the train.yaml as the editor holds
        it (the cluster may take the train.yaml's context.device_num) and with the settings as its own check
        takes them (they fill what it leaves unsaid: a framework setting prices both files alike). Cached by
        both texts and the settings (the search config's modification time when it is closed: its text is
        read again only when that moves)."""
        if text is None:
            text = self._disk_text(search_path)
            if text is None:
                return None, None
        key = (search_path, hash(text), hash(train_text), max_bytes, settings)
        with self._cluster_lock:
            if key in self._cluster_cache:
                return self._cluster_cache[key]
        found = search_config_cluster(search_path, text, texts={train_path: train_text}, reads=reads,
                                      max_bytes=max_bytes, overrides=settings)
        with self._cluster_lock:
            if len(self._cluster_cache) > CLUSTER_CACHE_MAX:
                self._cluster_cache.clear()  # one entry per train.yaml text typed: keep it bounded
            self._cluster_cache[key] = found
        return found

    def _disk_text(self, path: str) -> str | None:
        """A closed search config's text, read again only when its size or modification time moved (each
        keystroke in its train.yaml asks for it)."""
        try:
            st = os.stat(path)
        except OSError:
            return None
        stamp = (st.st_mtime_ns, st.st_size)
        with self._cluster_lock:
            hit = self._disk_texts.get(path)
        if hit is not None and hit[0] == stamp:
            return hit[1]
        text, _ = read_text(path)
        if text is not None:
            with self._cluster_lock:
                if len(self._disk_texts) > CLUSTER_CACHE_MAX:
                    self._disk_texts.clear()
                self._disk_texts[path] = (stamp, text)
        return text

    # -- searches ------------------------------------------------------------------------------------
    def search(self, uri: str) -> None:
        guarded(self.log, "search", self._search, uri)

    def _search(self, uri: str) -> None:
        session = self.session
        state = session.get(uri)
        if state is None or not session.settings.search_on_save or not state.path:
            return
        if state.checks_in_flight:  # a check is running: search once the last one lands
            session.defer_search(uri)
            return
        analysis = state.analysis
        if analysis is None or not analysis.is_config or analysis.too_large or analysis.config is None:
            return
        checked = analysis.loaded.diagnostics if analysis.loaded is not None else analysis.diagnostics
        if blocking(list(checked), analysis.config, state.path):
            # The file's own errors (not the price of its stated plan: a plan over the budget, one the cost model
            # refuses or a stated degree the cluster cannot hold, engine.edit.strategy_keys, is exactly when the
            # search helps). The last good result stays, marked stale.
            return
        doc = self.workspace().get_text_document(uri)
        overrides, source = analysis.overrides, analysis.cluster_source  # found off the loop by the check
        generation = session.begin_search(uri)
        if generation is None:
            return
        # Only the buffers of the files this check read (and the search config that gives the cluster) travel
        # to the worker: every open document's text, pickled for every search, made 150 open 500 KB files
        # cost 37 s per search.
        needed = {*analysis.files, *([source] if source else [])}
        request = SearchRequest(state.path, doc.source, overrides, version=doc.version, space_path=source,
                                space_text=self.open_text(source) if source else None,
                                space_overrides=session.settings.overrides() if source else None,
                                texts=self.open_texts(exclude=uri, only=needed), ratios=self.ratios_request(),
                                max_bytes=session.settings.max_file_size_kb * 1024,
                                **carried(analysis, doc.source, doc.version))
        self.jobs.submit(Job(uri, generation, request))
        self.publish_lenses()

    def search_started(self, job: Job) -> None:
        """Worker thread: a job reached the child."""
        if isinstance(job.payload, SearchRequest):
            self.call_soon(self.progress.started, job.key, "Strategy search")

    def search_progress(self, job: Job, fraction: float) -> None:
        if isinstance(job.payload, SearchRequest):
            self.call_soon(self.progress.report, job.key, fraction)

    def search_done(self, outcome: Outcome) -> None:
        self.call_soon(guarded, self.log, "search result", self._search_done, outcome)

    def _search_done(self, outcome: Outcome) -> None:
        if isinstance(outcome.job.payload, ListsRequest):
            self._lists_done(outcome)
            return
        uri = outcome.job.key
        request: SearchRequest = outcome.job.payload
        result: SearchOutcome | None = outcome.result if not outcome.cancelled else None
        if outcome.error:
            self.log(types.MessageType.Warning, f"hp-lsp: search failed for {uri}:\n{outcome.error}")
        session = self.session
        state = session.get(uri)
        current = state is not None and state.search_generation == outcome.job.generation
        if current:
            self.progress.finished(uri, "cancelled" if outcome.cancelled else None)
        if not session.record_search(uri, outcome.job.generation, request.version, result):
            return
        if result is not None and result.note:
            self.log(types.MessageType.Info, f"hp-lsp: {os.path.basename(request.path)}: {result.note}")
        self.publish(uri)
        self.publish_lenses()
        if result is not None and result.result is not None and state is not None:
            self._lists_after(state, request, outcome.job.generation)

    def _lists_after(self, state: DocState, request: SearchRequest, generation: int) -> None:
        """Once the main result is out, find which values of the config's candidate lists can fit (a
        second, cheaper job; a newer search supersedes it)."""
        config = state.analysis.config if state.analysis is not None else None
        if config is None or config.kind != "search":
            return
        if not any(d.state == "list" and len(d.values) > 1 for d in config.dimensions.values()):
            return
        self.jobs.submit(Job(state.uri + LISTS_SUFFIX, generation,
                                  ListsRequest(request.path, request.text, texts=request.texts,
                                               max_bytes=request.max_bytes, overrides=request.overrides,
                                               ratios=request.ratios)))

    def _lists_done(self, outcome: Outcome) -> None:
        uri = outcome.job.key.removesuffix(LISTS_SUFFIX)
        if outcome.error:
            self.log(types.MessageType.Warning, f"hp-lsp: list check failed for {uri}:\n{outcome.error}")
        if not outcome.cancelled:
            self.session.record_lists(uri, outcome.job.generation, outcome.result)

    def open_texts(self, *, exclude: str | None = None, only: Collection[str] | None = None) -> dict[str, str]:
        """path -> buffer of every open document but `exclude` (with `only`, of those paths alone): the
        editor's view of the files a check or a search reads besides its own (a plain dict, so it pickles
        into the worker's job)."""
        wanted = None if only is None else {_norm(p) for p in only}
        return {s.path: str(self.workspace().get_text_document(u).source)
                for u, s in self.session.docs.items()
                if s.path and u != exclude and (wanted is None or _norm(s.path) in wanted)}

    def open_text(self, path: str) -> str | None:
        """The buffer of an open document with this path, else None (read the disk)."""
        for uri, st in self.session.docs.items():
            if st.path == path:
                return str(self.workspace().get_text_document(uri).source)
        return None

    # -- output --------------------------------------------------------------------------------------
    def publish(self, uri: str) -> None:
        state = self.session.get(uri)
        if state is None:
            return
        doc = self.workspace().get_text_document(uri)
        diags = diagnostics.lsp_diagnostics(state, doc.lines, doc.position_codec,
                                            links=self.client.features.diagnostic_links)
        self.session.record_published(uri, tuple(diags))
        self.client.publish_diagnostics(uri, doc.version, diags)

    def publish_lenses(self) -> None:
        self.client.refresh_code_lenses()
