"""End to end: the "▸ Plan view" code lens and the "Show plan" command return the explain data (docs/formats.md
§7) over a real LSP connection, the same numbers `hp-plan explain` prints; the hover on a strategy key says
what bounds the plan."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient

from tests.support.lsp_e2e import ROOT, ctx_of, find_line, open_doc

PLAN = ROOT / "examples" / "explain" / "interleaved.yaml"

pytestmark = pytest.mark.lsp()


async def _plan_lens(client: LanguageClient, uri: str) -> types.CodeLens:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        lenses = await client.text_document_code_lens_async(
            types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=uri)))
        found = [x for x in lenses or [] if x.command and x.command.title == "▸ Plan view"]
        if found:
            return found[0]
        await asyncio.sleep(0.05)
    raise AssertionError("no ▸ Plan view lens")


async def test_plan_view_lens_and_command_return_the_explain_data(client: LanguageClient) -> None:
    root = ctx_of(client).root
    path = root / "search.yaml"
    path.write_text(PLAN.read_text())
    uri = open_doc(client, path)
    lens = await _plan_lens(client, uri)
    assert lens.command is not None and lens.command.command == "hpLsp.showPlan"
    assert lens.command.arguments and lens.command.arguments[0] == uri
    res: Any = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command=lens.command.command, arguments=lens.command.arguments))
    assert isinstance(res, dict) and "error" not in res, res
    for key in ("strategy", "framework", "step_time_s", "stages", "bound", "timeline", "text", "svg"):
        assert key in res
    cli = json.loads(subprocess.run([sys.executable, "-m", "engine.cli", "explain", str(path), "--json", "--best"],
                                    capture_output=True, text=True, cwd=ROOT, timeout=120).stdout)
    assert res["step_time_s"] == cli["step_time_s"]
    assert max(iv["end_s"] for iv in res["timeline"]) == res["step_time_s"]
    assert len(res["stages"]) == 4 and len(res["timeline"]) == len(cli["timeline"])
    svg = ET.fromstring(res["svg"])
    assert sum(1 for t in svg.iter("{http://www.w3.org/2000/svg}text") if (t.text or "").startswith("stage ")) == 8
    assert "stage  3 |" in res["text"]


async def test_save_plan_trace_writes_the_predicted_step_as_a_chrome_trace(client: LanguageClient) -> None:
    root: Path = ctx_of(client).root
    path = root / "trace" / "search.yaml"
    path.parent.mkdir()
    path.write_text(PLAN.read_text())
    uri = open_doc(client, path)
    lens = await _plan_lens(client, uri)
    assert lens.command is not None and lens.command.arguments
    which = lens.command.arguments[1]  # the plan the lens shows ("stated" until the search has a best)
    out = root / "trace" / "plan.trace.json"
    res: Any = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="hpLsp.savePlanTrace", arguments=[uri, str(out), which]))
    assert res == {"written": str(out)}, res
    trace = json.loads(out.read_text(), parse_constant=lambda c: pytest.fail(f"not strict JSON: {c}"))
    shown: Any = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="hpLsp.showPlan", arguments=[uri, which]))
    ends = [e["ts"] + e["dur"] for e in trace["traceEvents"] if e["ph"] == "X"]
    assert max(ends) == pytest.approx(shown["step_time_s"] * 1e6, abs=0.01)
    assert {e["pid"] for e in trace["traceEvents"]} == {0, 1, 2, 3}
    bad: Any = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="hpLsp.savePlanTrace", arguments=[uri, "relative.json"]))
    assert "absolute path" in bad["error"]
    onto_itself: Any = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="hpLsp.savePlanTrace", arguments=[uri, str(path), which]))
    assert "this command reads" in onto_itself["error"] and path.read_text() == PLAN.read_text()


async def test_show_plan_on_an_unknown_document_says_why(client: LanguageClient) -> None:
    res: Any = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="hpLsp.showPlan", arguments=["file:///nowhere/search.yaml"]))
    assert isinstance(res, dict) and res.get("error")


async def test_hover_on_a_strategy_key_says_what_bounds_the_plan(client: LanguageClient) -> None:
    root = ctx_of(client).root
    path = root / "other" / "search.yaml"
    path.parent.mkdir()
    path.write_text(PLAN.read_text())
    uri = open_doc(client, path)
    line, col = find_line(path.read_text(), "tp: 2")

    async def hover() -> str:
        h = await client.text_document_hover_async(types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=line, character=col)))
        return h.contents.value if h is not None and isinstance(h.contents, types.MarkupContent) else ""

    text = await wait_until_async(hover, lambda t: "bound by" in t)
    assert "bound by **compute**" in text and "GiB headroom" in text


async def wait_until_async(fetch: Any, ok: Any, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = await fetch()
        if ok(value):
            return value
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out; last: {value!r}")

