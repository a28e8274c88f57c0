"""The scheduler with its collaborators faked: no pygls server, no worker process. It checks a document off
the loop, searches it once the check landed, publishes each result with the document's version, asks for a
lens refresh only from a client that supports it, and on close cancels the jobs and clears the diagnostics."""

from __future__ import annotations

import asyncio
import shutil
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lsprotocol import types

from engine.check import check_file
from engine.search import stated_overrides
from hp_lsp.client import Client, ClientFeatures
from hp_lsp.documents import LspTextDocument
from hp_lsp.scheduler import LISTS_SUFFIX, Scheduler
from hp_lsp.search_job import SearchRequest, run_search
from hp_lsp.session import Session
from hp_lsp.worker import Job, Outcome
from tests.support.lsp_services import LLAMA, never, no_progress


@dataclass
class FakeWorkspace:
    docs: dict[str, LspTextDocument] = field(default_factory=dict)
    root_path: str | None = None
    folders: dict[str, Any] = field(default_factory=dict)

    def get_text_document(self, doc_uri: str) -> LspTextDocument:
        return self.docs[doc_uri]


@dataclass
class FakeClient:
    features: ClientFeatures
    published: list[tuple[str, int | None, list[types.Diagnostic]]] = field(default_factory=list)
    refreshes: int = 0

    def publish_diagnostics(self, uri: str, version: int | None, diagnostics: list[types.Diagnostic]) -> None:
        self.published.append((uri, version, diagnostics))

    def refresh_code_lenses(self) -> None:
        self.refreshes += 1


@dataclass
class FakeJobs:
    submitted: list[Job] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)

    def submit(self, job: Job) -> None:
        self.submitted.append(job)

    def cancel(self, key: str) -> None:
        self.cancelled.append(key)


@dataclass
class FakeProgress:
    events: list[tuple[str, str]] = field(default_factory=list)

    def started(self, uri: str, title: str) -> None:
        self.events.append(("started", uri))

    def report(self, uri: str, fraction: float) -> None:
        self.events.append(("report", uri))

    def finished(self, uri: str, message: str | None = None) -> None:
        self.events.append(("finished", uri))


def _scheduler(features: ClientFeatures) -> tuple[Scheduler, FakeWorkspace, FakeClient, FakeJobs, FakeProgress,
                                                   list[str]]:
    loop = asyncio.get_running_loop()
    ws, client, jobs, progress, logs = FakeWorkspace(), FakeClient(features), FakeJobs(), FakeProgress(), []
    sched = Scheduler(session=Session(), workspace=lambda: ws, client=client, jobs=jobs, progress=progress,
                      call_soon=loop.call_soon_threadsafe, log=lambda kind, msg: logs.append(msg))
    return sched, ws, client, jobs, progress, logs


async def _until(pred: Any, what: str) -> None:
    for _ in range(500):
        if pred():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


async def test_open_checks_then_searches_then_publishes_and_close_clears(tmp_path: Path) -> None:
    folder = tmp_path / "llama"
    shutil.copytree(LLAMA, folder)
    train = folder / "train.yaml"
    uri = train.as_uri()
    sched, ws, client, jobs, progress, logs = _scheduler(ClientFeatures(code_lens_refresh=True))
    ws.docs[uri] = LspTextDocument(uri, source=train.read_text(), version=1)

    sched.opened(uri)
    await _until(lambda: client.published and jobs.submitted, "the check's publish and the search job")
    assert [(u, v) for u, v, _ in client.published] == [(uri, 1)]
    job = jobs.submitted[0]
    request = job.payload
    assert isinstance(request, SearchRequest) and job.key == uri
    # The cluster the search config next to it states, by the engine's one rule (engine.search.stated).
    assert request.space_path == str(folder / "search.yaml")
    assert request.overrides == stated_overrides(check_file(str(folder / "search.yaml")).config)

    sched.search_started(job)
    outcome = run_search(request, progress=no_progress, cancelled=never)
    sched.search_done(Outcome(job, outcome))
    await _until(lambda: len(client.published) == 2, "the search's publish")
    codes = {str(d.code) for d in client.published[-1][2]}
    assert codes & {"HP610", "HP611"}, codes
    assert client.refreshes >= 1 and ("finished", uri) in progress.events
    assert ("started", uri) in progress.events

    sched.closed(uri)
    assert client.published[-1] == (uri, None, [])
    assert uri in jobs.cancelled and uri + LISTS_SUFFIX in jobs.cancelled
    assert logs == []
    sched.shutdown()


class FakeTransport:
    def __init__(self) -> None:
        self.sent: list[str] = []

    def text_document_publish_diagnostics(self, params: types.PublishDiagnosticsParams) -> None:
        self.sent.append("publish")

    def workspace_code_lens_refresh(self, params: None) -> None:
        self.sent.append("refresh")

    def window_log_message(self, params: types.LogMessageParams) -> None:
        self.sent.append("log")

    def window_show_message(self, params: types.ShowMessageParams) -> None:
        self.sent.append("show")

    async def workspace_apply_edit_async(self, params: types.ApplyWorkspaceEditParams
                                         ) -> types.ApplyWorkspaceEditResult:
        return types.ApplyWorkspaceEditResult(applied=True)


def test_the_outbox_refreshes_lenses_only_for_a_client_that_advertised_it() -> None:
    out = FakeTransport()
    client = Client(out)  # before initialize: a client that advertised nothing
    client.refresh_code_lenses()
    assert out.sent == []
    caps = types.ClientCapabilities(workspace=types.WorkspaceClientCapabilities(
        code_lens=types.CodeLensWorkspaceClientCapabilities(refresh_support=True)))
    client.features = ClientFeatures.resolve(caps)
    client.refresh_code_lenses()
    assert out.sent == ["refresh"]


async def test_a_failing_step_is_one_log_line_not_an_exception(tmp_path: Path) -> None:
    sched, *_, logs = _scheduler(ClientFeatures())
    uri = (tmp_path / "train.yaml").as_uri()
    sched.session.open(uri, str(tmp_path / "train.yaml"), 1)  # open in the session, unknown to the workspace
    sched.check(uri)
    assert len(logs) == 1 and "check failed" in logs[0]
    sched.shutdown()


def _llama_doc(tmp_path: Path, ws: FakeWorkspace) -> tuple[Path, str]:
    """The example train.yaml copied into `tmp_path` with its search config, open in `ws` as version 1."""
    folder = tmp_path / "llama"
    shutil.copytree(LLAMA, folder)
    train = folder / "train.yaml"
    uri = train.as_uri()
    ws.docs[uri] = LspTextDocument(uri, source=train.read_text(), version=1)
    return train, uri


def _next_check_raises(sched: Scheduler) -> None:
    """The next check the scheduler sends off the loop raises; the ones after it run as before."""
    analyse = sched.analyse_off_loop
    raised: list[Any] = []

    def raise_once(job: Any) -> Any:
        if not raised:
            raised.append(job)
            raise RuntimeError("the check broke")
        return analyse(job)

    sched.analyse_off_loop = raise_once  # type: ignore[method-assign]


async def test_a_save_whose_check_raised_starts_no_search_on_the_next_keystroke(tmp_path: Path) -> None:
    """The save's check raises (one log line); the search it held back is dropped with it, so the next
    keystroke's check, which lands cleanly, starts no search: only a save does."""
    sched, ws, client, jobs, _progress, logs = _scheduler(ClientFeatures())
    train, uri = _llama_doc(tmp_path, ws)
    sched.opened(uri)
    await _until(lambda: jobs.submitted, "the open's search job")
    _next_check_raises(sched)
    ws.docs[uri] = LspTextDocument(uri, source=train.read_text() + "\n", version=2)
    sched.session.change(uri, 2)
    sched.saved(uri)
    await _until(lambda: any("the check broke" in m for m in logs), "the failed check's log line")
    ws.docs[uri] = LspTextDocument(uri, source=train.read_text() + "\n\n", version=3)
    sched.session.change(uri, 3)
    sched.check(uri)  # the keystroke's check (debounced in the server; called here)
    await _until(lambda: client.published and client.published[-1][1] == 3, "the keystroke's publish")
    assert len(jobs.submitted) == 1 and len(logs) == 1
    sched.shutdown()


async def test_a_check_that_raised_beside_one_that_landed_keeps_the_search(tmp_path: Path) -> None:
    """Opened, then the settings arrive: two checks of one text, each asking for the search. The first raises;
    the second records the text's analysis, so the search still starts."""
    sched, ws, _client, jobs, _progress, logs = _scheduler(ClientFeatures())
    _train, uri = _llama_doc(tmp_path, ws)
    _next_check_raises(sched)
    sched.opened(uri)
    sched.settings_changed()
    await _until(lambda: jobs.submitted, "the search the second check released")
    assert len(logs) == 1 and "the check broke" in logs[0]
    sched.shutdown()


async def test_a_search_job_carries_only_the_documents_it_reads(tmp_path: Path) -> None:
    """Every open document's text went into every search job (150 open 500 KB files: 37 s per search); now
    the job carries the search config that gives the train.yaml its cluster and nothing else."""
    folder = tmp_path / "llama"
    shutil.copytree(LLAMA, folder)
    sched, ws, _client, jobs, _progress, _logs = _scheduler(ClientFeatures())
    for i in range(20):  # unrelated open documents, as an editor with many tabs has
        other = tmp_path / f"notes{i}.md"
        other.write_text("x" * 1000)
        ws.docs[other.as_uri()] = LspTextDocument(other.as_uri(), source=other.read_text(), version=1)
        sched.session.open(other.as_uri(), str(other), 1)
    search, train = folder / "search.yaml", folder / "train.yaml"
    for path in (search, train):
        ws.docs[path.as_uri()] = LspTextDocument(path.as_uri(), source=path.read_text(), version=1)
    sched.session.open(train.as_uri(), str(train), 1)  # open in the editor before the search config's job
    sched.opened(search.as_uri())
    await _until(lambda: jobs.submitted, "the search config's job")
    sched.opened(train.as_uri())
    await _until(lambda: len(jobs.submitted) == 2, "the train.yaml's job")
    for job in jobs.submitted:
        request = job.payload
        assert isinstance(request, SearchRequest)
        other = str(train) if request.path == str(search) else str(search)
        assert set(request.texts or {}) == {other}, (request.path, sorted(request.texts or {}))
    sched.shutdown()


class _Spies:
    """Counts, by file name, the parses (engine.document.parse) and disk reads (engine.document.read_text) of
    one request, and the pricings (engine.cost.estimate) by strategy."""

    def __init__(self, monkeypatch: Any) -> None:
        import engine.cost
        import engine.cost.strategy_rules
        import engine.document
        import engine.search.stated

        self.parses: Counter[str] = Counter()
        self.reads: Counter[str] = Counter()
        self.priced: Counter[str] = Counter()
        parse, read, est = engine.document.parse, engine.document.read_text, engine.cost.estimate

        def parse_spy(text: str, *a: Any, path: str | None = None, **k: Any) -> Any:
            self.parses[Path(path or "?").name] += 1
            return parse(text, *a, path=path, **k)

        def read_spy(path: str, **k: Any) -> Any:
            self.reads[Path(path).name] += 1
            return read(path, **k)

        def est_spy(model: Any, cluster: Any, run: Any, s: Any, *a: Any, **k: Any) -> Any:
            self.priced[s.short()] += 1
            return est(model, cluster, run, s, *a, **k)

        monkeypatch.setattr(engine.document, "parse", parse_spy)
        monkeypatch.setattr(engine.document, "read_text", read_spy)
        monkeypatch.setattr(engine.cost, "estimate", est_spy)
        monkeypatch.setattr(engine.cost.strategy_rules, "estimate", est_spy)

    def take(self) -> tuple[dict[str, int], dict[str, int], int]:
        out = dict(self.parses), dict(self.reads), max(self.priced.values(), default=0)
        self.parses.clear(), self.reads.clear(), self.priced.clear()
        return out


async def test_a_save_a_keystroke_and_a_search_config_save_read_each_file_once(tmp_path: Path,
                                                                               monkeypatch: Any) -> None:
    """A request carries what it read, resolved and priced: a train.yaml save parsed it three times and
    priced its plan twice (the search job checked it again and threw one price away), a keystroke parsed
    it twice and read the search config from disk again, a search config save read the train.yaml from disk
    three times. Now: one parse of each file, no disk read of what did not change, one pricing."""
    folder = tmp_path / "llama"
    shutil.copytree(LLAMA, folder)
    train, search = folder / "train.yaml", folder / "search.yaml"
    sched, ws, client, jobs, _progress, _logs = _scheduler(ClientFeatures())
    spies = _Spies(monkeypatch)
    for p in (train, search):
        ws.docs[p.as_uri()] = LspTextDocument(p.as_uri(), source=p.read_text(), version=1)
    sched.opened(train.as_uri())
    await _until(lambda: jobs.submitted, "the train.yaml's search job")
    spies.take()

    async def request(action: Any, done: Any) -> tuple[dict[str, int], dict[str, int], int]:
        action()
        await _until(done, "the request")
        if jobs.submitted[-1] is not seen[-1]:
            seen.append(jobs.submitted[-1])
            run_search(jobs.submitted[-1].payload, progress=no_progress, cancelled=never)  # the worker's part
        return spies.take()

    seen = [jobs.submitted[-1]]
    n = len(jobs.submitted)
    assert await request(lambda: sched.saved(train.as_uri()), lambda: len(jobs.submitted) > n) == \
        ({"train.yaml": 1}, {}, 1)
    published = len(client.published)
    ws.docs[train.as_uri()] = LspTextDocument(train.as_uri(), source=train.read_text() + "\n# typed\n", version=2)
    sched.changed(train.as_uri())
    await _until(lambda: len(client.published) > published, "the debounced check")
    assert spies.take() == ({"search.yaml": 1, "train.yaml": 1}, {}, 1)

    del ws.docs[train.as_uri()]
    sched.closed(train.as_uri())
    sched.opened(search.as_uri())
    await _until(lambda: len(jobs.submitted) > n + 1, "the search config's job")
    spies.take()
    n = len(jobs.submitted)
    assert await request(lambda: sched.saved(search.as_uri()), lambda: len(jobs.submitted) > n) == \
        ({"search.yaml": 1, "train.yaml": 1}, {"train.yaml": 1}, 1)
    sched.shutdown()


def test_hp_plan_search_reads_and_prices_each_file_once(monkeypatch: Any) -> None:
    """`hp-plan search` on a search config read and validated its train.yaml twice (as the config's source and
    as the stated plan's file): one Reads per command now."""
    import contextlib
    import io

    from engine.cli import main

    spies = _Spies(monkeypatch)
    with contextlib.redirect_stdout(io.StringIO()):
        main(["search", str(LLAMA / "search.yaml")])
    assert spies.take() == ({"search.yaml": 1, "train.yaml": 1}, {"search.yaml": 1, "train.yaml": 1}, 1)


async def test_a_runs_file_being_read_never_holds_up_a_config_s_check(tmp_path: Path, monkeypatch: Any) -> None:
    """A RUNS file's check reads its logs and profiles (seconds for a large one): it runs on the calibration
    thread, so a train.yaml opened meanwhile is checked and published while the RUNS file is still being read."""
    import threading

    from hp_lsp import scheduler as scheduler_module

    folder = tmp_path / "llama"
    shutil.copytree(LLAMA, folder)
    runs = folder / "runs.yaml"
    runs.write_text("runs:\n  - config: search.yaml\n    step_time_s: 9.0\n")
    reading, release = threading.Event(), threading.Event()
    analyse = scheduler_module.analyse

    def slow_for_runs(path: str, text: str, *args: Any, **kwargs: Any) -> Any:
        if path == str(runs):
            reading.set()
            assert release.wait(10), "the RUNS file's check was never released"
        return analyse(path, text, *args, **kwargs)

    monkeypatch.setattr(scheduler_module, "analyse", slow_for_runs)
    sched, ws, client, _, _, logs = _scheduler(ClientFeatures())
    runs_uri, train_uri = runs.as_uri(), (folder / "train.yaml").as_uri()
    ws.docs[runs_uri] = LspTextDocument(runs_uri, source=runs.read_text(), version=1)
    ws.docs[train_uri] = LspTextDocument(train_uri, source=(folder / "train.yaml").read_text(), version=1)
    sched.opened(runs_uri)
    await _until(reading.is_set, "the RUNS file's check to start")
    sched.opened(train_uri)
    await _until(lambda: any(u == train_uri for u, _, _ in client.published), "the train.yaml's publish")
    assert not any(u == runs_uri for u, _, _ in client.published)  # still being read
    release.set()
    await _until(lambda: any(u == runs_uri for u, _, _ in client.published), "the RUNS file's publish")
    assert logs == []
    sched.shutdown()
