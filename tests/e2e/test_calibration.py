"""End to end through a real LSP client: a RUNS file's diagnostics and hover, a ratios file changing the
hover and code lens of a search config, and an edited ratios file re-pricing the open config."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient

from tests.support.configs import stated_config
from tests.support.lsp_e2e import Ctx, find_line, open_doc, wait_until

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.lsp(profiles=["visual-studio-code"])


def _change(client: LanguageClient, uri: str, version: int, text: str) -> None:
    client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)]))


async def _hover(client: LanguageClient, uri: str, line: int, col: int) -> str:
    h = await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=line, character=col)))
    return h.contents.value if h is not None and isinstance(h.contents, types.MarkupContent) else ""


async def _lenses(client: LanguageClient, uri: str) -> list[str]:
    lenses = await client.text_document_code_lens_async(
        types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=uri)))
    return [lens.command.title for lens in lenses or [] if lens.command]


def _step(path: Path, *extra: str) -> float:
    r = subprocess.run([sys.executable, "-m", "engine.cli", "estimate", str(path), "--json", *extra],
                       capture_output=True, text=True, cwd=ROOT, timeout=120)
    return float(json.loads(r.stdout)["step_time_s"])


async def test_runs_file_diagnostics_and_hover(client: LanguageClient, ctx: Ctx) -> None:
    root = ctx.root
    cfg = stated_config(root, "run-a.yaml")
    measured = _step(cfg) * 1.25
    text = f"runs:\n  - config: run-a.yaml\n    step_time_s: {measured}\n  - config: missing.yaml\n    step_time_s: 1.0\n"
    runs = root / "runs.yaml"
    runs.write_text(text)
    uri = open_doc(client, runs)
    diags = await wait_until(lambda: client.diagnostics.get(uri), what="RUNS diagnostics")
    bad = [d for d in diags if d.code == "HP801"]
    assert bad and bad[0].range.start.line == find_line(text, "missing.yaml")[0]

    # with the missing run removed, the hover on the run compares measured, uncalibrated and calibrated
    good = text.split("  - config: missing.yaml")[0]
    _change(client, uri, 2, good)
    await wait_until(lambda: not [d for d in client.diagnostics.get(uri, [0]) if getattr(d, "code", "") == "HP801"],
                     what="the HP801 to go")
    md = await _hover(client, uri, 2, 6)
    assert "measured" in md and "uncalibrated" in md and "calibrated" in md
    assert f"{measured:.3f}" in md and "(-20.0%)" in md  # uncalibrated is 1/1.25 of the measured step
    assert "(parts rule)" in md and "reads as a stack bias" in md  # 25% off: beyond the model's spread


async def test_ratios_file_changes_hover_and_lens_and_reprices_on_edit(client: LanguageClient, ctx: Ctx) -> None:
    root = ctx.root
    stated_config(root, "run-b.yaml")
    ratios = root / "ratios.yaml"
    ratios.write_text("framework: torchtitan\ndevice_type: H100\nratios: {compute: 2.0, tp_comm: 2.0, cp_comm: 2.0, "
                      "ep_comm: 2.0, dp_comm: 2.0, pp: 2.0, optimizer: 2.0}\nmemory_ratio: 1.0\nfitted_on: []\n")
    plain = stated_config(root, "plain.yaml")
    uncal = _step(plain)
    cfg = stated_config(root, "calibrated.yaml", extra="  ratios_file: ./ratios.yaml\n")
    text = cfg.read_text()
    uri = open_doc(client, cfg)
    await wait_until(lambda: uri in client.diagnostics, what="diagnostics")
    line, col = find_line(text, "tp:")
    want = f"{2 * uncal:.2f}"

    titles = [t for t in await _lenses(client, uri) if t.startswith("Calibrated on")]
    assert titles and f"{uncal:.2f} → {want} s" in titles[0], await _lenses(client, uri)
    assert want in await _hover(client, uri, line, col)

    # the ratios file is edited in the editor (unsaved): the open config is re-priced with it
    ratios_uri = open_doc(client, ratios)
    _change(client, ratios_uri, 2, ratios.read_text().replace("2.0", "3.0"))
    want3 = f"{3 * uncal:.2f}"
    for _ in range(600):
        titles = [t for t in await _lenses(client, uri) if t.startswith("Calibrated on")]
        if titles and want3 in titles[0]:
            break
        await asyncio.sleep(0.05)
    assert titles and f"{uncal:.2f} → {want3} s" in titles[0], titles
    assert want3 in await _hover(client, uri, line, col)
