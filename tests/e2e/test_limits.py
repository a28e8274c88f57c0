"""Bounded work through a real client: a linked train.yaml counts against hpLsp.maxFileSizeKb (diagnostic at
the link, no parse), an open file over the setting costs no parse per edit, and a search that could not run
says why in its lens. Every wait is bounded."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient

from tests.support.lsp_e2e import EXAMPLES, open_doc, wait_until

SEARCH = (EXAMPLES / "llama3-70b" / "search.yaml").read_text()
TRAIN = (EXAMPLES / "llama3-70b" / "train.yaml").read_text()
ROW = "  - {path: /data/shard-0000000.jsonl, weight: 0.5}\n"


def padded_train(megabytes: float) -> str:
    """The llama3-70b train.yaml grown with a dense list: under the engine's 10 MiB cap, so before the setting
    bounded linked files the server parsed it whole (seconds per megabyte)."""
    return TRAIN + "data_files:\n" + ROW * int(megabytes * 1e6 / len(ROW))


# The size tests run without searches (their figure is the check); the lens test searches on save.
pytestmark = pytest.mark.lsp(profiles=["visual-studio-code"], rooted=False, settings={"searchOnSave": False},
                             init={"hpLsp": {"searchOnSave": False}})
SEARCHING = pytest.mark.lsp(profiles=["visual-studio-code"], rooted=False, settings={"searchOnSave": True},
                            init={"hpLsp": {"searchOnSave": True}})


async def test_a_linked_train_yaml_over_the_size_setting_is_refused_at_the_link(client: LanguageClient,
                                                                               tmp_path: Path) -> None:
    """A search config whose train.yaml is 8 MB: the check parsed it whole (20 s per check for 4.4 MB), with
    no "too large" anywhere. Now it is not parsed; HP009 at `train_yaml:` says why."""
    (tmp_path / "train.yaml").write_text(padded_train(8))
    path = tmp_path / "search.yaml"
    path.write_text(SEARCH)
    t0 = time.monotonic()
    uri = open_doc(client, path)
    await wait_until(lambda: uri in client.diagnostics, timeout=60, what="the search config's diagnostics")
    took = time.monotonic() - t0
    at_link = [d for d in client.diagnostics[uri] if d.code == "HP009"]
    assert at_link and "too large" in at_link[0].message, client.diagnostics[uri]
    assert at_link[0].range.start.line == SEARCH.splitlines().index("train_yaml: ./train.yaml")
    # Parsing the 8 MB file would take ~36 s; the bound leaves room for a loaded machine (6 s seen at load 6).
    assert took < 15, f"{took:.1f} s to check a search config with an oversized link"


async def test_an_open_file_over_the_size_setting_costs_no_parse_per_edit(client: LanguageClient,
                                                                          tmp_path: Path) -> None:
    """An open 8 MB train.yaml (HP005) that a search config beside it names: every edit re-read the search
    config, which parsed the whole buffer (7.8 s per edit for 1.3 MB). Now an edit costs the debounce."""
    (tmp_path / "search.yaml").write_text(SEARCH)
    path = tmp_path / "train.yaml"
    text = padded_train(8)
    path.write_text(text)
    uri = open_doc(client, path, text)
    await wait_until(lambda: uri in client.diagnostics, timeout=60, what="the first diagnostics")
    assert [d.code for d in client.diagnostics[uri]] == ["HP005"]
    for version in (2, 3):
        last, t0 = client.diagnostics[uri], time.monotonic()  # each publish stores a new list
        client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[types.TextDocumentContentChangePartial(range=types.Range(
                start=types.Position(line=0, character=0), end=types.Position(line=0, character=0)),
                text="# edit\n")]))
        await wait_until(lambda last=last: client.diagnostics[uri] is not last, timeout=60,
                         what="the edit's diagnostics")
        took = time.monotonic() - t0
        assert took < 2.0, f"edit {version}: {took:.1f} s (the 0.3 s debounce and no parse expected)"


@SEARCHING
async def test_no_cluster_lens_says_the_search_could_not_run(client: LanguageClient, tmp_path: Path) -> None:
    """A train.yaml that states no cluster: the lens said "No strategy fits the budget (0 evaluated)", as if
    strategies had been priced and refused by the budget. It says why there was no search now."""
    path = tmp_path / "train.yaml"
    path.write_text(TRAIN)
    uri = open_doc(client, path)

    async def lens_titles() -> list[str]:
        lenses = await client.text_document_code_lens_async(
            types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=uri)))
        return [x.command.title for x in lenses or [] if x.command]

    deadline = time.monotonic() + 60
    titles: list[str] = []
    while time.monotonic() < deadline:
        titles = await lens_titles()
        if titles and not any(t.startswith("Searching") for t in titles):
            break
    assert "No search: the file states no cluster (device, device count)" in titles, titles
    assert not any("0 evaluated" in t for t in titles), titles
