"""The scheduler with its collaborators faked: no pygls server, no worker process. It checks a document off
the loop, searches it once the check landed, publishes each result with the document's version, asks for a
lens refresh only from a client that supports it, and on close cancels the jobs and clears the diagnostics."""

from __future__ import annotations

import asyncio
import shutil
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
