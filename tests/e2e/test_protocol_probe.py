"""What a probe of the server over stdio found, each end to end against `python -m hp_lsp` (tests/support/lsp_wire.py:
pytest-lsp cannot send these): a second `initialize`, notifications sent as requests, commands with arguments of
the wrong shape, a NUL in a `train_yaml:` reference in the folder, `createSearchConfig` for documents that need no
search config or name no file, an unbounded `maxFileSizeKb`, and a plain-text client's hover."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.lsp_e2e import EXAMPLES
from tests.support.lsp_wire import StdioServer, WireClient

TRAIN = (EXAMPLES / "llama3-70b" / "train.yaml").read_text()
SEARCH = (EXAMPLES / "llama3-70b" / "search.yaml").read_text()


@pytest.fixture
def server():
    srv = StdioServer()
    yield srv
    if srv.proc.poll() is None:
        srv.proc.kill()
        srv.proc.wait()


def did_open(uri: str, text: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "textDocument/didOpen",
            "params": {"textDocument": {"uri": uri, "languageId": "yaml", "version": 1, "text": text}}}


def diagnostics_of(c: WireClient, uri: str, what: str) -> list[dict[str, Any]]:
    msg = c.wait_for(lambda m: isinstance(m, dict) and m.get("method") == "textDocument/publishDiagnostics"
                     and m["params"]["uri"] == uri, what=what, timeout=60)
    return msg["params"]["diagnostics"]  # type: ignore[no-any-return]


def command(c: WireClient, msg_id: Any, name: str, *args: Any) -> dict[str, Any]:
    return c.request(msg_id, "workspace/executeCommand", {"command": name, "arguments": list(args)}, timeout=60)


def test_initialize_is_answered_once_and_notifications_sent_as_requests_are_refused(server: StdioServer,
                                                                                   tmp_path: Path) -> None:
    """A second `initialize` had built a new workspace (every open document lost, the next edit an internal error);
    after `shutdown` it went unanswered. `$/cancelRequest` with an id got no answer at all."""
    c = server.client
    c.initialize()
    uri = (tmp_path / "train.yaml").as_uri()
    c.send(did_open(uri, TRAIN))
    again = c.request(2, "initialize", {"capabilities": {}})
    assert again["error"]["code"] == -32600 and "once" in again["error"]["message"]
    symbols = c.request(3, "textDocument/documentSymbol", {"textDocument": {"uri": uri}})
    assert symbols["result"], "the open document was lost"
    for n, method in enumerate(("$/cancelRequest", "$/progress", "initialized")):
        answer = c.request(10 + n, method, {"id": 1} if method == "$/cancelRequest" else {})
        assert answer["error"]["code"] == -32600 and "is a notification" in answer["error"]["message"], answer
    assert c.request(20, "shutdown") == {"jsonrpc": "2.0", "id": 20, "result": None}
    assert c.request(21, "initialize", {"capabilities": {}})["error"]["code"] == -32600
    assert "error" in c.request(22, "exit")  # answered, and still handled: the server exits
    rc, err = server.finish()
    assert rc == 0 and "Traceback" not in err, err[-2000:]


def test_commands_with_arguments_of_the_wrong_shape_answer_a_reason(server: StdioServer, tmp_path: Path) -> None:
    """`[{"uri": {...}}]` and a NUL in savePlanTrace's path had come back as JSON-RPC errors carrying the
    server's traceback."""
    c = server.client
    c.initialize()
    for n, name in enumerate(("hpLsp.applyOptimalStrategy", "hpLsp.createSearchConfig", "hpLsp.showPlan",
                              "hpLsp.savePlanTrace")):
        answer = command(c, n, name, {"uri": {"a": 1}}, "/tmp/x.json")
        assert "result" in answer and "traceback" not in json.dumps(answer).lower(), answer
    uri = (tmp_path / "train.yaml").as_uri()
    c.send(did_open(uri, TRAIN))
    diagnostics_of(c, uri, "the first check")
    answer = command(c, 9, "hpLsp.savePlanTrace", uri, str(tmp_path / "a\0b.json"), "stated")
    assert "result" in answer and "traceback" not in json.dumps(answer).lower(), answer


def test_a_nul_in_a_train_yaml_reference_nearby_stops_no_check(server: StdioServer, tmp_path: Path) -> None:
    """One stray YAML file with `train_yaml: "./x\\0y.yaml"` in the folder had stopped every check of the
    folder's train.yaml files (ValueError: embedded null byte), and its code actions."""
    (tmp_path / "junk.yaml").write_text('train_yaml: "./x\\0y.yaml"\n')
    c = server.client
    c.initialize(root_uri=tmp_path.as_uri())
    uri = (tmp_path / "train.yaml").as_uri()
    (tmp_path / "train.yaml").write_text(TRAIN)
    c.send(did_open(uri, TRAIN))
    assert "HP302" in {d["code"] for d in diagnostics_of(c, uri, "diagnostics beside a NUL reference")}
    search = (tmp_path / "search.yaml").as_uri()
    c.send(did_open(search, SEARCH.replace("train_yaml: ./train.yaml", 'train_yaml: "./tr\\0ain.yaml"')))
    diagnostics_of(c, search, "the search config's check")
    actions = c.request(5, "textDocument/codeAction", {
        "textDocument": {"uri": search}, "context": {"diagnostics": []},
        "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}})
    assert "result" in actions, actions


def test_create_search_config_only_where_a_diagnostic_asks_for_one(server: StdioServer, tmp_path: Path) -> None:
    """It had written `search-search.yaml` for a search config, `search-train.yaml` (then one per call) for a
    train.yaml a search config already names, and files in the server's folder or under `/` for `untitled:` and
    `http:` documents. It still creates one for a train.yaml without a cluster (HP302)."""
    (tmp_path / "named").mkdir()
    (tmp_path / "named" / "train.yaml").write_text(TRAIN)
    (tmp_path / "named" / "search.yaml").write_text(SEARCH)
    (tmp_path / "alone").mkdir()
    (tmp_path / "alone" / "train.yaml").write_text(TRAIN)
    c = server.client
    c.initialize(root_uri=tmp_path.as_uri())
    docs = {"search": (tmp_path / "named" / "search.yaml").as_uri(), "named": (tmp_path / "named" / "train.yaml")
            .as_uri(), "untitled": "untitled:Untitled-1", "http": "http://example.com/train.yaml"}
    for name, uri in docs.items():
        c.send(did_open(uri, SEARCH if name == "search" else TRAIN))
        diagnostics_of(c, uri, f"the check of {name}")
    for n, uri in enumerate(docs.values()):
        answer = command(c, n, "hpLsp.createSearchConfig", uri)["result"]
        assert answer["created"] is False and answer["reason"], (uri, answer)
    assert sorted(p.name for p in (tmp_path / "named").iterdir()) == ["search.yaml", "train.yaml"]
    alone = (tmp_path / "alone" / "train.yaml").as_uri()
    c.send(did_open(alone, TRAIN))
    assert "HP302" in {d["code"] for d in diagnostics_of(c, alone, "the lone train.yaml's check")}
    answer = command(c, 9, "hpLsp.createSearchConfig", alone)["result"]
    assert answer["created"] is True and (tmp_path / "alone" / "search.yaml").is_file(), answer


def test_a_file_size_setting_above_the_engines_limit_is_refused(server: StdioServer) -> None:
    """`maxFileSizeKb: 10**400` (and any size) had been taken: a linked 1 GB train.yaml was read whole, 2 GB."""
    c = server.client
    c.initialize({"hpLsp": {"maxFileSizeKb": 10**6, "cluster": {"numNodes": 2**40}}})
    said = [c.wait_for(lambda m, k=k: isinstance(m, dict) and m.get("method") == "window/showMessage"
                       and k in m["params"]["message"], what=k) for k in ("maxFileSizeKb", "numNodes")]
    assert all("at most" in m["params"]["message"] for m in said), said


def test_a_plain_text_client_gets_a_hover_without_markdown(server: StdioServer, tmp_path: Path) -> None:
    c = server.client
    caps = {"textDocument": {"hover": {"contentFormat": ["plaintext"]}}}
    c.send({"jsonrpc": "2.0", "id": "init", "method": "initialize",
            "params": {"capabilities": caps, "initializationOptions": {"hpLsp": {"cluster": {
                "numNodes": 128, "cardsPerNode": 8, "deviceType": "H100"}, "searchOnSave": False}}}})
    c.answer("init")
    c.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
    uri = (tmp_path / "train.yaml").as_uri()
    c.send(did_open(uri, TRAIN))
    diagnostics_of(c, uri, "the first check")
    line = next(i for i, text in enumerate(TRAIN.splitlines()) if text.startswith("  tp_size"))
    hover = c.request(2, "textDocument/hover", {"textDocument": {"uri": uri},
                                                "position": {"line": line, "character": 3}})["result"]
    assert hover["contents"]["kind"] == "plaintext", hover
    value = hover["contents"]["value"]
    assert value and "**" not in value and "|---" not in value and "`" not in value, value
