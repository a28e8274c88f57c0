"""What one request touches: a workspace scan lists a folder again only when the folder changed (and never more than a bounded number of its
entries), every handler says where its work runs, and only the session writes document state."""

from __future__ import annotations

import ast
import dataclasses
import os
from pathlib import Path
from typing import Any

import pytest

import hp_lsp.workspace
from hp_lsp.session import DocState
from hp_lsp.threads import HANDLERS
from hp_lsp.workspace import SearchConfigIndex

ROOT = Path(__file__).resolve().parents[2]


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
