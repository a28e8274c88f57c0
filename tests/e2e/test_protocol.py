"""The wire, end to end against `python -m hp_lsp` (stdio, and TCP for the one-client rule): every request
answered per JSON-RPC 2.0 and the LSP lifecycle, framing errors answered and the connection closed (never a
crash), every frame strict JSON, settings that are not finite refused, the memory limit capped at the device
the way `hp-plan` caps it, a `%00` URI checked. And what a probe of the server found: a second `initialize`,
notifications sent as requests, commands with arguments of the wrong shape, a NUL in a `train_yaml:` reference
nearby, `createSearchConfig` for documents that need no search config or name no file, an unbounded
`maxFileSizeKb`, a plain-text client's hover. Each test speaks the bytes itself (tests/support/lsp_wire.py):
pytest-lsp cannot send a malformed message."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.lsp_e2e import EXAMPLES, ROOT
from tests.support.lsp_wire import StdioServer, WireClient, free_port, tcp_connect

TRAIN = (EXAMPLES / "llama3-70b" / "train.yaml").read_text()
SEARCH = (EXAMPLES / "llama3-70b" / "search.yaml").read_text()
H100_NODES = {"cluster": {"numNodes": 128, "cardsPerNode": 8, "deviceType": "H100"}, "searchOnSave": False}


def hover(msg_id: Any, uri: str, line: Any, character: Any = 0) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": msg_id, "method": "textDocument/hover",
            "params": {"textDocument": {"uri": uri}, "position": {"line": line, "character": character}}}


def did_open(uri: str, text: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": "textDocument/didOpen",
            "params": {"textDocument": {"uri": uri, "languageId": "yaml", "version": 1, "text": text}}}


def error_code(answer: dict[str, Any]) -> int | None:
    return answer["error"]["code"] if "error" in answer else None


def no_crash(rc: int, err: str) -> None:
    assert rc in (0, 1), (rc, err[-2000:])
    assert "Traceback" not in err, err[-3000:]


@pytest.fixture
def server():
    srv = StdioServer()
    yield srv
    if srv.proc.poll() is None:
        srv.proc.kill()
        srv.proc.wait()


def test_every_request_is_answered(server: StdioServer, tmp_path: Path) -> None:
    """Positions out of LSP's uinteger range, null params, no `jsonrpc`, a bad id, requests before
    `initialize` and after `shutdown`: each got no answer at all before; each gets its JSON-RPC error now."""
    c = server.client
    uri = (tmp_path / "train.yaml").as_uri()
    assert error_code(c.request(1, "textDocument/hover", None)) == -32002  # before initialize
    assert error_code(c.request(0, "initialize", None)) == -32602  # a malformed initialize initializes nothing
    assert error_code(c.request("1b", "textDocument/hover", None)) == -32002
    c.initialize()
    c.send(did_open(uri, "a: 1\n"))
    assert error_code(c.request(2, "textDocument/hover", hover(0, uri, -1)["params"])) == -32602
    assert error_code(c.request(3, "textDocument/hover", hover(0, uri, 2**31)["params"])) == -32602
    assert error_code(c.request(4, "textDocument/hover", hover(0, uri, 0, -5)["params"])) == -32602
    assert error_code(c.request(5, "textDocument/completion", None)) == -32602
    assert error_code(c.request(6, "textDocument/documentSymbol", None)) == -32602
    c.send({"id": 7, "method": "textDocument/hover", "params": hover(0, uri, 0)["params"]})  # no jsonrpc
    assert error_code(c.answer(7)) == -32600
    c.send({"jsonrpc": "1.0", "id": 8, "method": "shutdown"})
    assert error_code(c.answer(8)) == -32600
    c.send({"jsonrpc": "2.0", "id": {"x": 1}, "method": "shutdown"})  # an id that is neither string nor int
    c.wait_for(lambda m: isinstance(m, dict) and m.get("id") is None and error_code(m) == -32600)
    c.send(b"[]")  # a batch: not part of LSP
    c.send(b"{not json")
    c.wait_for(lambda m: isinstance(m, dict) and m.get("id") is None and error_code(m) == -32700)
    assert "result" in c.request(9, "textDocument/hover", hover(0, uri, 0)["params"])  # still serving
    assert c.request(10, "shutdown") == {"jsonrpc": "2.0", "id": 10, "result": None}
    assert error_code(c.request(11, "textDocument/hover", hover(0, uri, 0)["params"])) == -32600
    assert error_code(c.request(12, "shutdown")) == -32600
    c.send({"jsonrpc": "2.0", "method": "exit"})
    rc, err = server.finish()
    assert rc == 0, err[-2000:]
    assert not [f for f in c.frames if isinstance(f, Exception)]


def test_a_malformed_message_is_answered_without_a_traceback_in_the_log(server: StdioServer, tmp_path: Path) -> None:
    """pygls logged the whole cattrs traceback of every message it could not structure (a FileEvent of type 9, a
    negative position) to stderr, the editor's log, though the server answers each itself."""
    c = server.client
    uri = (tmp_path / "train.yaml").as_uri()
    c.initialize()
    c.send(did_open(uri, "a: 1\n"))
    c.send({"jsonrpc": "2.0", "method": "workspace/didChangeWatchedFiles",
            "params": {"changes": [{"uri": uri, "type": 9}]}})
    assert error_code(c.request(2, "textDocument/hover", hover(0, uri, -1)["params"])) == -32602
    assert "result" in c.request(3, "textDocument/hover", hover(0, uri, 0)["params"])  # still serving
    c.request(4, "shutdown")
    c.send({"jsonrpc": "2.0", "method": "exit"})
    rc, err = server.finish()
    no_crash(rc, err)
    assert "dropped a malformed workspace/didChangeWatchedFiles" in err, err[-2000:]


@pytest.mark.parametrize("header", [
    b"Content-Length: 99999999999999999999\r\n\r\n{}",
    b"Content-Length: 1000000000\r\n\r\n{}",
    b"Content-Length: abc\r\n\r\n{}",
    b"Content-Length: -5\r\n\r\n{}",
    b"X-Other: 1\r\n\r\n{}",
    b"Content-Type: application/vscode-jsonrpc\r\n" * 40 + b"\r\n{}",
    b"X" * (4 * 1024 * 1024),  # a header line with no end
], ids=["huge", "over-limit", "non-numeric", "negative", "missing", "many-lines", "endless-line"])
def test_a_framing_error_is_answered_and_the_connection_closed(server: StdioServer, header: bytes) -> None:
    """A Content-Length of 10**20 raised OverflowError out of pygls' reader and killed the server; a
    non-numeric or missing one left it silent, its next message glued to the unread body. Now the framing
    error is answered (ParseError, id null), the connection closes, the process exits without a traceback,
    and it never held more than a bounded buffer."""
    c = server.client
    c.initialize()
    c.send(header, raw=True)
    c.send({"jsonrpc": "2.0", "id": 2, "method": "shutdown"})
    refusal = c.wait_for(lambda m: isinstance(m, dict) and m.get("id") is None and "error" in m,
                         what="the framing error's answer")
    assert error_code(refusal) == -32700 and "closing the connection" in refusal["error"]["message"]
    assert c.eof.wait(30), "the server kept the connection open"
    rc, err = server.finish()
    no_crash(rc, err)


def test_a_null_byte_in_the_uri_gets_diagnostics(server: StdioServer, tmp_path: Path) -> None:
    """`%00` decodes to a path no file system holds: os calls raised ValueError in the check and the document
    never got diagnostics. It is checked as an unsaved buffer now."""
    c = server.client
    c.initialize(root_uri=tmp_path.as_uri() + "/root%00")  # a root that names no folder either
    uri = tmp_path.as_uri() + "/a%00b/train.yaml"
    c.send(did_open(uri, TRAIN))
    published = c.wait_for(lambda m: isinstance(m, dict) and m.get("method") == "textDocument/publishDiagnostics"
                           and m["params"]["uri"] == uri, what="diagnostics for the %00 URI")
    assert {d["code"] for d in published["params"]["diagnostics"]} >= {"HP302"}  # checked: no cluster stated
    assert "result" in c.request(2, "textDocument/hover", hover(0, uri, 3)["params"])
    plain = (tmp_path / "train.yaml").as_uri()  # a file that exists, under that root: its check scans the roots
    c.send(did_open(plain, TRAIN))
    c.wait_for(lambda m: isinstance(m, dict) and m.get("method") == "textDocument/publishDiagnostics"
               and m["params"]["uri"] == plain, what="diagnostics for a file under a %00 root")
    assert not [m for m in c.frames if isinstance(m, dict) and "check failed" in json.dumps(m)]


def show_plan(c: WireClient, msg_id: Any, uri: str) -> dict[str, Any]:
    """hpLsp.showPlan of the stated plan, asked again until the document's first check has landed."""
    deadline = time.monotonic() + 60
    while True:
        res = c.request(msg_id, "workspace/executeCommand", {"command": "hpLsp.showPlan",
                                                              "arguments": [uri, "stated"]})["result"]
        if "error" not in res or time.monotonic() > deadline:
            return res  # type: ignore[no-any-return]
        msg_id = f"{msg_id}+"
        time.sleep(0.1)


def test_settings_that_are_not_finite_are_refused_and_json_stays_strict(server: StdioServer,
                                                                         tmp_path: Path) -> None:
    """`1e400` reads as infinity: showPlan answered `"budget_gib": Infinity`, which VS Code's parser rejects.
    The setting is refused with a message naming it, the device's memory is the budget, and every frame the
    server wrote parses with a strict parser."""
    c = server.client
    init = json.dumps({"hpLsp": H100_NODES}).replace('"searchOnSave"', '"memoryLimitGb": 1e400, "searchOnSave"')
    c.send(('{"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {"capabilities": {}, '
            f'"initializationOptions": {init}}}}}').encode())
    c.answer("init")
    c.send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
    warning = c.wait_for(lambda m: isinstance(m, dict) and m.get("method") == "window/showMessage",
                         what="the settings warning")
    assert "hpLsp.memoryLimitGb" in warning["params"]["message"]
    assert "not a finite number" in warning["params"]["message"]
    uri = (tmp_path / "train.yaml").as_uri()
    c.send(did_open(uri, TRAIN))
    plan = show_plan(c, 2, uri)
    assert plan["budget_gib"] == 80, plan
    assert not [f for f in c.frames if isinstance(f, Exception)]


def test_the_memory_limit_setting_is_capped_at_the_device(server: StdioServer, tmp_path: Path) -> None:
    """memoryLimitGb 1000 on an 80 GB H100 priced the device as 1000 GB (a 148 GiB plan recommended, and
    "Apply" would write it); `hp-plan` caps a limit at the device memory. One rule now: budget = min(limit,
    device memory), a limit under the device still narrows it and is named as the budget's source."""
    c = server.client
    c.initialize({"hpLsp": {**H100_NODES, "memoryLimitGb": 1000}})
    uri = (tmp_path / "train.yaml").as_uri()
    c.send(did_open(uri, TRAIN))
    plan = show_plan(c, 2, uri)
    assert plan["budget_gib"] == 80, plan
    c.send({"jsonrpc": "2.0", "method": "workspace/didChangeConfiguration",
            "params": {"settings": {"hpLsp": {"memoryLimitGb": 5}}}})
    published = c.wait_for(lambda m: isinstance(m, dict) and m.get("method") == "textDocument/publishDiagnostics"
                           and any("hpLsp.memoryLimitGb" in d["message"] for d in m["params"]["diagnostics"]),
                           what="a budget diagnostic naming the setting")
    assert published


def test_the_cli_caps_a_limit_by_the_same_rule(tmp_path: Path) -> None:
    """The rule the server now shares: `hp-plan estimate` caps the train.yaml's own 1000 GB limit at 80."""
    path = tmp_path / "train.yaml"
    path.write_text(TRAIN + "context:\n  device_num: 1024\n  max_device_memory: 1000GB\n")
    out = subprocess.run([sys.executable, "-m", "engine.cli", "estimate", str(path), "--device-type", "H100",
                          "--json"], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert json.loads(out.stdout)["budget_gib"] == 80


def test_tcp_serves_one_client_and_refuses_a_second() -> None:
    """`hp-lsp --tcp` handed the session to whichever local connection came last (the first client's answers
    went to it). The first client keeps the session; a second gets a JSON-RPC error saying why and is closed."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "hp_lsp", "--tcp", "--port", str(port)], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        first_sock, first = tcp_connect(port)
        first.initialize()
        second_sock, second = tcp_connect(port)
        refusal = second.wait_for(lambda m: isinstance(m, dict) and "error" in m, what="the refusal")
        assert "one client" in refusal["error"]["message"] and refusal["id"] is None
        assert second.eof.wait(10), "the second connection was left open"
        second.send({"jsonrpc": "2.0", "id": 1, "method": "shutdown"})
        assert first.request(2, "shutdown") == {"jsonrpc": "2.0", "id": 2, "result": None}
        assert not [m for m in second.frames if isinstance(m, dict) and m.get("id") in (1, 2)]
        first.send({"jsonrpc": "2.0", "method": "exit"})
        assert proc.wait(timeout=30) == 0
        first_sock.close()
        second_sock.close()
    finally:
        if proc.poll() is None:
            proc.kill()
        _, err = proc.communicate(timeout=30)
    assert b"Traceback" not in err, err.decode()[-2000:]
    usage = subprocess.run([sys.executable, "-m", "hp_lsp", "--help"], capture_output=True, text=True, timeout=60)
    assert "first client only" in usage.stdout


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
