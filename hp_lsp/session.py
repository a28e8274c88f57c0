"""The server's only mutable state: open documents, their generations, cached results, and dependencies.

Everything here is touched from the event-loop thread only (worker callbacks are marshalled onto the loop
with `call_soon_threadsafe` before they reach the session), so no locks are needed; hp_lsp/threads.py is the
table of which handler runs where. Only `Session`'s methods write a `DocState` or `readers`: the scheduler and
the handlers read them and ask the session to change them, so every transition (a check begun, a search
deferred, a result recorded) has one home here.

Two counters per document, both drawn from one session-wide count (`Session.ticks`), so they keep rising across
a close and a reopen (a check or a search begun before a document was closed never matches the reopened one's):
- `generation` rises with every change; a fast check computed for an older generation is dropped.
- `search_generation` rises with every search submitted (open, save, settings, a dependency changed); a
  search result for an older one is dropped. A result for the current search generation whose document
  has been edited since is kept but marked stale: half-typed YAML must not clear the last good numbers.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hp_lsp.settings import Settings, SettingsSources

if TYPE_CHECKING:
    from hp_lsp.analysis import Analysis
    from hp_lsp.search_job import SearchOutcome


@dataclass(slots=True)
class DocState:
    uri: str
    path: str | None
    version: int | None = None
    generation: int = 0
    analysis: Analysis | None = None  # the latest fast check, whatever it found
    analysed: int = 0  # the generation `analysis` checked
    good: Analysis | None = None  # the latest fast check whose config resolved (survives half-typed YAML)
    search: SearchOutcome | None = None  # the latest accepted search (survives edits, marked stale)
    search_version: int | None = None  # document version the search ran on
    search_generation: int = 0
    searching: bool = False
    list_facts: Any = None  # ListFacts for the current search generation (hover on a candidate list)
    # Fast checks running off the loop, counted per generation they check: a settings change checks a document
    # again while its first check still runs, and the search waiting for them must read the last one's analysis,
    # not the first's; a check begun before the document was closed and reopened counts for neither.
    in_flight: Counter[int] = field(default_factory=Counter)
    search_pending: bool = False  # a search was asked for while a check ran
    debounce: Any = None  # the pending debounced check (an asyncio.TimerHandle/Task), owned by the loop
    # the diagnostics last published (LSP types, client units): code actions answer from these, not from
    # the client's possibly older view of them (overlapping and cancelled requests; D-015)
    published: tuple[Any, ...] = ()

    @property
    def stated(self) -> Any:
        """The price of the stated strategy: the document's own (train.yaml), else the one its search
        computed for the train.yaml a search config references."""
        own = self.good.estimate if self.good is not None else None
        if own is not None:
            return own
        return self.search.stated if self.search is not None else None

    @property
    def checks_in_flight(self) -> int:
        return sum(self.in_flight.values())

    @property
    def search_stale(self) -> bool:
        return self.search is not None and self.search_version != self.version


@dataclass(slots=True)
class Session:
    docs: dict[str, DocState] = field(default_factory=dict)
    sources: SettingsSources = field(default_factory=SettingsSources)
    settings: Settings = field(default_factory=Settings)
    # file path -> URIs of open documents whose last analysis read that file (search config <-> train.yaml)
    readers: dict[str, set[str]] = field(default_factory=dict)
    ticks: int = 0  # the last generation or search generation given to any document

    def _tick(self) -> int:
        self.ticks += 1
        return self.ticks

    # -- documents -----------------------------------------------------------------------------------------
    def open(self, uri: str, path: str | None, version: int | None) -> DocState:
        state = self.docs.get(uri)
        if state is None:
            state = self.docs[uri] = DocState(uri, path)
        state.version = version
        state.generation = self._tick()
        return state

    def change(self, uri: str, version: int | None) -> DocState | None:
        state = self.docs.get(uri)
        if state is None:
            return None
        state.version = version
        state.generation = self._tick()
        return state

    def close(self, uri: str) -> DocState | None:
        state = self.docs.pop(uri, None)
        for uris in self.readers.values():
            uris.discard(uri)
        return state

    def get(self, uri: str) -> DocState | None:
        return self.docs.get(uri)

    # -- transitions the scheduler asks for ---------------------------------------------------------------
    def set_debounce(self, uri: str, handle: Any) -> None:
        """The pending debounced check (a loop TimerHandle, or None once it fired); the previous one is
        cancelled, so one document has at most one."""
        state = self.docs.get(uri)
        if state is None:
            if handle is not None:
                handle.cancel()
            return
        if state.debounce is not None and state.debounce is not handle:
            state.debounce.cancel()
        state.debounce = handle

    def begin_check(self, uri: str) -> None:
        """A check of the document's current generation is sent off the loop."""
        state = self.docs.get(uri)
        if state is not None:
            state.in_flight[state.generation] += 1

    def end_check(self, uri: str, generation: int) -> bool:
        """A check landed (and was recorded if it was of the current text) or was cancelled; True when a search
        waited for the checks and this was the last in flight, the current text's analysis recorded (an earlier
        check landing first would start the search on its own, older analysis: the settings that arrive after a
        document opens check it a second time while the first check runs). The checks may land in any order:
        a RUNS file's and a config's run on different threads (hp_lsp/threads.py). A check of `generation` this
        document never began (it was begun before a close and a reopen) changes nothing. When the last check of
        the current text lands and none of them recorded its analysis (each raised), the search that waited for
        them is dropped: no analysis of that text will come, and left pending it would start on a later edit's
        check, which only a save asks for."""
        state = self.docs.get(uri)
        if state is None or not state.in_flight[generation]:  # (a Counter's missing key reads 0, not stored)
            return False
        state.in_flight[generation] -= 1
        if not state.in_flight[generation]:
            del state.in_flight[generation]
            if generation == state.generation and state.analysed != generation:
                state.search_pending = False
        if state.in_flight or state.analysed != state.generation:
            return False
        pending, state.search_pending = state.search_pending, False
        return pending

    def defer_search(self, uri: str) -> None:
        """A search was asked for while a check runs: `end_check` says so when it lands."""
        state = self.docs.get(uri)
        if state is not None:
            state.search_pending = True

    def record_published(self, uri: str, diagnostics: tuple[Any, ...]) -> None:
        state = self.docs.get(uri)
        if state is not None:
            state.published = diagnostics

    # -- results -------------------------------------------------------------------------------------------
    def record_analysis(self, uri: str, generation: int, analysis: Analysis) -> bool:
        """Keep a fast check unless the document moved on (or closed) while it ran. The files it read, and the
        search config that gave it its cluster, become its dependencies."""
        state = self.docs.get(uri)
        if state is None or state.generation != generation:
            return False
        state.analysis, state.analysed = analysis, generation
        if analysis.config is not None:
            state.good = analysis
        source = analysis.cluster_source
        self._set_reads(uri, (*analysis.files, source) if source is not None else analysis.files)
        return True

    def begin_search(self, uri: str) -> int | None:
        state = self.docs.get(uri)
        if state is None:
            return None
        state.search_generation = self._tick()
        state.searching = True
        return state.search_generation

    def record_search(self, uri: str, search_generation: int, version: int | None,
                      outcome: SearchOutcome | None) -> bool:
        """Keep a search result unless a newer search superseded it. `outcome` None = it failed/cancelled:
        the previous result stays."""
        state = self.docs.get(uri)
        if state is None or state.search_generation != search_generation:
            return False
        state.searching = False
        if outcome is not None:
            state.search = outcome
            state.search_version = version
            state.list_facts = None
        return True

    def record_lists(self, uri: str, search_generation: int, facts: Any) -> bool:
        """Keep the candidate lists' facts of the current search generation."""
        state = self.docs.get(uri)
        if state is None or state.search_generation != search_generation:
            return False
        state.list_facts = facts
        return True

    # -- dependencies --------------------------------------------------------------------------------------
    def _set_reads(self, uri: str, files: Iterable[str]) -> None:
        for uris in self.readers.values():
            uris.discard(uri)
        for f in files:
            self.readers.setdefault(f, set()).add(uri)

    def kept_files(self, uri: str) -> tuple[str, ...]:
        """The files no command may write over for `uri`: every file its last analysis read (its search config or
        train.yaml among them) and every open document (its unsaved text would be lost under the write)."""
        read = [p for p, uris in self.readers.items() if uri in uris]
        state = self.docs.get(uri)
        source = state.analysis.cluster_source if state is not None and state.analysis is not None else None
        read += [source] if source else []  # the search config that gives a train.yaml its cluster
        return tuple(dict.fromkeys([*read, *(s.path for s in self.docs.values() if s.path)]))

    def dependents(self, path: str, *, exclude: str | None = None) -> list[str]:
        """Open documents whose last analysis read `path` (other than `exclude`)."""
        return sorted(u for u in self.readers.get(path, ()) if u != exclude and u in self.docs)

    # -- settings ------------------------------------------------------------------------------------------
    def update_settings(self, *, initialization: dict[str, Any] | None = None,
                        configuration: dict[str, Any] | None = None,
                        did_change: dict[str, Any] | None = None) -> tuple[bool, tuple[str, ...]]:
        """Replace one source's layer; returns (settings changed, errors to report)."""
        if initialization is not None:
            self.sources.initialization = initialization
        if configuration is not None:
            self.sources.configuration = configuration
        if did_change is not None:
            self.sources.did_change = did_change
        parsed = self.sources.merged()
        changed = parsed.settings != self.settings
        self.settings = parsed.settings
        return changed, parsed.errors
