"""Nothing but the protocol on stdout: every byte the server writes is a Content-Length frame of JSON, and
the console script points at the same entry point as `python -m hp_lsp`."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

from tests.support.lsp_e2e import EXAMPLES


def frame(msg: dict) -> bytes:
    body = json.dumps(msg).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def parse_frames(data: bytes) -> list[dict]:
    out = []
    while data:
        head, sep, rest = data.partition(b"\r\n\r\n")
        assert sep, f"garbage on stdout: {data[:80]!r}"
        headers = dict(line.split(b": ", 1) for line in head.split(b"\r\n"))
        assert set(headers) <= {b"Content-Length", b"Content-Type"}, f"garbage on stdout: {head[:80]!r}"
        n = int(headers[b"Content-Length"])
        out.append(json.loads(rest[:n]))
        data = rest[n:]
    return out


def test_stdout_carries_only_frames(tmp_path: Path) -> None:
    train = tmp_path / "train.yaml"
    train.write_text((EXAMPLES / "llama3-70b" / "train.yaml").read_text())
    (tmp_path / "search.yaml").write_text((EXAMPLES / "llama3-70b" / "search.yaml").read_text())
    uri = train.as_uri()
    msgs = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}, "rootUri": tmp_path.as_uri()}},
        {"jsonrpc": "2.0", "method": "initialized", "params": {}},
        {"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {
            "uri": uri, "languageId": "yaml", "version": 1, "text": train.read_text()}}},
        {"jsonrpc": "2.0", "id": 2, "method": "textDocument/hover",
         "params": {"textDocument": {"uri": uri}, "position": {"line": 17, "character": 4}}},
        {"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {
            "textDocument": {"uri": uri, "version": 2}, "contentChanges": [{"text": "model: [\n"}]}},
        {"jsonrpc": "2.0", "id": 3, "method": "shutdown", "params": None},
        {"jsonrpc": "2.0", "method": "exit", "params": None},
    ]
    proc = subprocess.run([sys.executable, "-m", "hp_lsp"], input=b"".join(frame(m) for m in msgs),
                          capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    frames = parse_frames(proc.stdout)
    ids = {f.get("id") for f in frames if "result" in f or "error" in f}
    assert {1, 2, 3} <= ids
    assert not any("error" in f for f in frames)


def test_console_script_entry_point() -> None:
    scripts = {ep.name: ep.value for ep in entry_points(group="console_scripts")}
    assert scripts.get("hp-lsp") == "hp_lsp.__main__:main"


def test_stdio_flag_is_accepted() -> None:
    """`vscode-languageclient` appends `--stdio` with TransportKind.stdio; the server must speak stdio then."""
    msgs = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}}},
        {"jsonrpc": "2.0", "method": "initialized", "params": {}},
        {"jsonrpc": "2.0", "id": 2, "method": "shutdown", "params": None},
        {"jsonrpc": "2.0", "method": "exit", "params": None},
    ]
    proc = subprocess.run([sys.executable, "-m", "hp_lsp", "--stdio"], input=b"".join(frame(m) for m in msgs),
                          capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr.decode()[-2000:]
    assert {f.get("id") for f in parse_frames(proc.stdout)} >= {1, 2}


def test_help_documents_stdio_and_unknown_flags_fail() -> None:
    out = subprocess.run([sys.executable, "-m", "hp_lsp", "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "--stdio" in out.stdout and "--tcp" in out.stdout
    bad = subprocess.run([sys.executable, "-m", "hp_lsp", "--bogus"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--bogus" in bad.stderr
