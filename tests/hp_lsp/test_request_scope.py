"""What one request carries and touches: a search job takes only the buffers of the files it reads, a
workspace scan lists a folder again only when the folder changed (and never more than a bounded number of its
entries), every handler says where its work runs, and only the session writes document state."""

from __future__ import annotations

import ast
import dataclasses
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

import hp_lsp.workspace
from hp_lsp.client import ClientFeatures
from hp_lsp.documents import LspTextDocument
from hp_lsp.search_job import SearchRequest
from hp_lsp.session import DocState
from hp_lsp.threads import HANDLERS
from hp_lsp.workspace import SearchConfigIndex
from tests.hp_lsp.test_scheduler import _scheduler, _until
from tests.support.lsp_services import LLAMA

ROOT = Path(__file__).resolve().parents[2]


async def test_a_search_job_carries_only_the_documents_it_reads(tmp_path: Path) -> None:
    """Every open document's text went into every search job (150 open 500 KB files: 37 s per search); now
    the job carries the search config that gives the train.yaml its cluster and nothing else."""
    folder = tmp_path / "llama"
    shutil.copytree(LLAMA, folder)
    sched, ws, client, jobs, _progress, _logs = _scheduler(ClientFeatures())
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


def test_a_folder_is_listed_again_only_when_it_changed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each check listed the workspace folders again (a 200,000-file data folder added 0.3 s per edit): the
    listing is kept while the folder's modification time holds, and one listing reads a bounded number of
    entries."""
    data = tmp_path / "data"
    data.mkdir()
    for i in range(300):
        (data / f"shard{i:05}.yaml").write_bytes(b"")
    project = tmp_path / "project"
    project.mkdir()
    train = project / "train.yaml"
    train.write_text("model: {}\n")
    listed: list[str] = []
    real = os.scandir

    def spy(path: Any) -> Any:
        listed.append(os.fspath(path))
        return real(path)

    monkeypatch.setattr(hp_lsp.workspace.os, "scandir", spy)
    monkeypatch.setattr(hp_lsp.workspace, "MAX_ENTRIES", 50)
    idx = SearchConfigIndex()
    roots = [str(tmp_path)]
    assert idx.referencing(str(train), roots, {}) is None
    assert sorted(listed) == sorted([str(project), str(tmp_path), str(data)])
    assert len(idx.listing(str(data)).yaml_files) == 50  # bounded: the first 50 entries of 300
    assert idx.referencing(str(train), roots, {}) is None
    assert len(listed) == 3  # nothing changed: no folder listed again
    (project / "search.yaml").write_text("train_yaml: ./train.yaml\n")
    st = os.stat(project)
    os.utime(project, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # a coarse clock cannot hide the change
    assert idx.referencing(str(train), roots, {}) == str(project / "search.yaml")
    assert listed[3:] == [str(project)]  # only the folder that changed


def test_every_handler_says_where_it_runs() -> None:
    from hp_lsp.server import COMMANDS, FEATURES, create_server

    names = {h.__name__ for _, _, h in FEATURES} | {c.__name__ for _, c in COMMANDS}
    assert names == set(HANDLERS)
    with pytest.MonkeyPatch.context() as mp:
        mp.delitem(HANDLERS, "on_hover")
        with pytest.raises(KeyError):
            create_server()


def test_only_the_session_writes_document_state() -> None:
    """The scheduler and the handlers ask `Session` for every change of a DocState field or of `readers`."""
    fields = {f.name for f in dataclasses.fields(DocState)} | {"readers"}
    offenders = []
    for path in sorted((ROOT / "hp_lsp").rglob("*.py")):
        if path.name == "session.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            targets = node.targets if isinstance(node, ast.Assign) else \
                [node.target] if isinstance(node, ast.AugAssign | ast.AnnAssign) else []
            for t in targets:
                if isinstance(t, ast.Attribute) and t.attr in fields and not (
                        isinstance(t.value, ast.Name) and t.value.id == "self"):
                    offenders.append(f"{path.name}:{t.lineno} .{t.attr}")
            if isinstance(node, ast.Attribute) and node.attr == "readers":
                offenders.append(f"{path.name}:{node.lineno} .readers")
    assert offenders == []
