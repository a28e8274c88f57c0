"""End to end over stdio: `python -m hp_lsp` driven by pytest-lsp with VS Code's and Neovim 0.7's real
capabilities (LspSpecificationWarning is fatal: pyproject's filterwarnings). Each test gets its own server
and its own copy of the example, so no test depends on another's edits, settings or open documents; a test
that needs the search's results waits for them itself."""

from __future__ import annotations

import asyncio
import re
import time

import pytest
from lsprotocol import types
from pygls.uris import from_fs_path

from tests.support.lsp_e2e import (
    Ctx,
    apply_lsp_edits,
    codes,
    edits_of,
    find_line,
    open_doc,
    wait_until,
)

pytestmark = pytest.mark.lsp(example="llama3-70b", settings={"searchOnSave": True},
                              init={"hpLsp": {"maxFileSizeKb": 512}})


@pytest.fixture()
def ctx(ctx: Ctx) -> Ctx:
    """The session with the example's train.yaml open (every test here starts from it)."""
    ctx.text = ctx.train.read_text()
    open_doc(ctx.client, ctx.train, ctx.text, ctx.version)
    return ctx


def _change(ctx: Ctx, text: str) -> None:
    ctx.version += 1
    ctx.client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=ctx.train_uri, version=ctx.version),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)]))


def _lens_titles(lenses: list[types.CodeLens] | None) -> list[str]:
    return [lens.command.title for lens in lenses or [] if lens.command]


async def _best_lens(c: Ctx) -> types.CodeLens:
    async def ready() -> types.CodeLens | None:
        lenses = await c.client.text_document_code_lens_async(
            types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=c.train_uri)))
        for lens in lenses or []:
            if lens.command and lens.command.title.startswith("Best:"):
                return lens
        return None

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        lens = await ready()
        if lens is not None:
            return lens
        await asyncio.sleep(0.05)
    raise AssertionError(f"no Best lens; server log: {[m.message for m in c.client.log_messages][-5:]}")


async def test_open_publishes_diagnostics(ctx: Ctx) -> None:
    await wait_until(lambda: ctx.train_uri in ctx.client.diagnostics, what="first publish")
    await wait_until(lambda: ctx.client.diagnostics.get(ctx.train_uri), what="a diagnostic")
    for d in ctx.client.diagnostics[ctx.train_uri]:
        assert d.source == "hp-lsp" and str(d.code).startswith("HP")
        # Links to docs/diagnostics.md only where the client advertises codeDescriptionSupport.
        if ctx.vscode:
            assert d.code_description and d.code_description.href.endswith(f"diagnostics.md#{str(d.code).lower()}")
        else:
            assert d.code_description is None


async def test_code_lens_shows_the_best_plan(ctx: Ctx) -> None:
    lens = await _best_lens(ctx)
    assert lens.command is not None
    assert lens.command.command == "hpLsp.applyOptimalStrategy"
    assert list(lens.command.arguments or []) == [ctx.train_uri]
    assert "GiB" in lens.command.title and "MFU" in lens.command.title
    assert re.search(r"s/step ± \d+%", lens.command.title)  # the step time's error band (engine.cost.band)
    line, _ = find_line(ctx.text, "accelerator:")
    assert lens.range.start.line == line


async def _checked(ctx: Ctx) -> None:
    """The fast check has landed (hovers answer from its cache, never waiting for it)."""
    await wait_until(lambda: ctx.train_uri in ctx.client.diagnostics, what="the fast check's publish")


async def test_hover_on_strategy_key_shows_numbers(ctx: Ctx) -> None:
    await _checked(ctx)
    line, col = find_line(ctx.text, "tp_size")
    hover = await ctx.client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=ctx.train_uri),
        position=types.Position(line=line, character=col + 1)))
    assert hover is not None and isinstance(hover.contents, types.MarkupContent)
    text = hover.contents.value
    assert "GiB" in text and "MFU" in text and "step time" in text
    assert re.search(r"\d s ± \d+%", text)  # the step time's error band (engine.cost.band)
    assert re.search(r"within ± \d+% about four times out of five \(.+runs", text)  # and what set it


async def test_hover_on_model_key_shows_parameters(ctx: Ctx) -> None:
    await _checked(ctx)
    line, col = find_line(ctx.text, "pretrained_model_name_or_path")
    hover = await ctx.client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=ctx.train_uri),
        position=types.Position(line=line, character=col + 2)))
    assert hover is not None and isinstance(hover.contents, types.MarkupContent)
    assert "parameters" in hover.contents.value and "FLOPs" in hover.contents.value


async def test_document_symbols(ctx: Ctx) -> None:
    syms = await ctx.client.text_document_document_symbol_async(types.DocumentSymbolParams(
        text_document=types.TextDocumentIdentifier(uri=ctx.train_uri)))
    names = [s.name for s in syms or []]
    assert "model" in names and "accelerator" in names


async def test_completion_of_keys_and_values(ctx: Ctx) -> None:
    line, _ = find_line(ctx.text, "accelerator:")
    items = await ctx.client.text_document_completion_async(types.CompletionParams(
        text_document=types.TextDocumentIdentifier(uri=ctx.train_uri),
        position=types.Position(line=line + 1, character=2)))
    assert items is not None
    labels = [i.label for i in (items.items if isinstance(items, types.CompletionList) else items)]
    assert "tp_size" in labels or "pp_size" in labels


async def test_source_action_and_apply_command(ctx: Ctx) -> None:
    await _best_lens(ctx)  # the search has landed
    actions = await ctx.client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=ctx.train_uri),
        range=types.Range(start=types.Position(line=0, character=0), end=types.Position(line=0, character=0)),
        context=types.CodeActionContext(diagnostics=[], only=["source.applyOptimalStrategy"])))
    assert actions, "no source action"
    action = actions[0]
    assert isinstance(action, types.CodeAction) and action.title.startswith("Apply optimal strategy")
    assert action.edit is not None
    edits, version = edits_of(action.edit, ctx.train_uri)
    assert edits
    if ctx.vscode:
        assert action.edit.document_changes and version == ctx.version
    else:
        assert action.edit.changes and not action.edit.document_changes

    result = await ctx.client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="hpLsp.applyOptimalStrategy", arguments=[ctx.train_uri]))
    applied_flag = result.get("applied") if isinstance(result, dict) else getattr(result, "applied", None)
    assert applied_flag is True
    applied = ctx.seen["applyEdit"][-1]
    cmd_edits, _ = edits_of(applied.edit, ctx.train_uri)
    new_text = apply_lsp_edits(ctx.text, cmd_edits)
    assert new_text != ctx.text
    # Comments survive (round-trip edits): every comment line of the original is still there.
    assert [ln for ln in ctx.text.splitlines() if ln.strip().startswith("#")] == \
        [ln for ln in new_text.splitlines() if ln.strip().startswith("#")]

    # The editor applies it and saves: the new strategy is the best one, so no HP610/HP611 remains.
    ctx.version += 1
    ctx.text = new_text
    ctx.client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=ctx.train_uri, version=ctx.version),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text=new_text)]))
    ctx.train.write_text(new_text)
    ctx.client.text_document_did_save(types.DidSaveTextDocumentParams(
        text_document=types.TextDocumentIdentifier(uri=ctx.train_uri)))
    await wait_until(lambda: not (codes(ctx.client, ctx.train_uri) & {"HP610", "HP611"})
                     and ctx.client.diagnostics, what="search diagnostics gone after applying")


async def test_quick_fix_on_the_search_diagnostic(ctx: Ctx) -> None:
    # The example's own stated plan is slower than the best one (HP611).
    await wait_until(lambda: codes(ctx.client, ctx.train_uri) & {"HP610", "HP611"}, what="search diagnostic")
    diag = next(d for d in ctx.client.diagnostics[ctx.train_uri] if str(d.code) in ("HP610", "HP611"))
    actions = await ctx.client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=ctx.train_uri), range=diag.range,
        context=types.CodeActionContext(diagnostics=[diag])))
    fixes = [a for a in actions or [] if isinstance(a, types.CodeAction) and a.kind == types.CodeActionKind.QuickFix]
    assert fixes and fixes[0].title.startswith("Apply optimal strategy") and fixes[0].is_preferred
    assert fixes[0].diagnostics and fixes[0].diagnostics[0].code == diag.code
    assert fixes[0].edit is not None
    edits, _ = edits_of(fixes[0].edit, ctx.train_uri)
    assert apply_lsp_edits(ctx.text, edits) != ctx.text


async def test_large_file_is_checked_off_the_loop(ctx: Ctx) -> None:
    big = ctx.root / "train-big.yaml"
    text = ctx.text + "logging:\n" + "".join(f"  note_{i}: {i}\n" for i in range(8000))
    big.write_text(text)
    uri = from_fs_path(str(big)) or ""
    ctx.client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(
        uri=uri, language_id="yaml", version=1, text=text)))
    # The loop answers while the big check runs.
    line, col = find_line(ctx.text, "tp_size")
    t0 = time.monotonic()
    await ctx.client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=ctx.train_uri), position=types.Position(line=line, character=col)))
    assert time.monotonic() - t0 < 5
    await wait_until(lambda: uri in ctx.client.diagnostics, what="big file diagnostics")
    assert "HP005" not in codes(ctx.client, uri)
    ctx.client.text_document_did_close(types.DidCloseTextDocumentParams(
        text_document=types.TextDocumentIdentifier(uri=uri)))


async def test_half_typed_yaml_keeps_results(ctx: Ctx) -> None:
    await _best_lens(ctx)  # the search has landed
    broken = ctx.text.replace("accelerator:", "accelerator: [", 1)
    ctx.version += 1
    ctx.client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=ctx.train_uri, version=ctx.version),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text=broken)]))
    await wait_until(lambda: "HP001" in codes(ctx.client, ctx.train_uri), what="syntax error")
    lenses = await ctx.client.text_document_code_lens_async(
        types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=ctx.train_uri)))
    assert any(t.startswith("Best:") and "stale" in t for t in _lens_titles(lenses))
    # and back
    ctx.version += 1
    ctx.client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=ctx.train_uri, version=ctx.version),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text=ctx.text)]))
    await wait_until(lambda: "HP001" not in codes(ctx.client, ctx.train_uri), what="syntax error cleared")


async def test_settings_via_did_change_configuration(ctx: Ctx) -> None:
    _change(ctx, ctx.text + "# padding\n" * 200)  # over 1 KB whatever the example's size
    ctx.client.set_configuration({"maxFileSizeKb": 1}, section="hpLsp")
    ctx.client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"hpLsp": {"maxFileSizeKb": 1}}))
    await wait_until(lambda: codes(ctx.client, ctx.train_uri) == {"HP005"}, what="too-large diagnostic")
    ctx.client.set_configuration({"maxFileSizeKb": 512}, section="hpLsp")
    ctx.client.workspace_did_change_configuration(types.DidChangeConfigurationParams(
        settings={"hpLsp": {"maxFileSizeKb": 512}}))
    await wait_until(lambda: "HP005" not in codes(ctx.client, ctx.train_uri), what="settings restored")
    if ctx.vscode:  # pulled with workspace/configuration: the notification itself carries nothing
        ctx.client.set_configuration({"maxFileSizeKb": 1}, section="hpLsp")
        ctx.client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
        await wait_until(lambda: codes(ctx.client, ctx.train_uri) == {"HP005"}, what="pulled setting")
        ctx.client.set_configuration({"maxFileSizeKb": 512}, section="hpLsp")
        ctx.client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
        await wait_until(lambda: "HP005" not in codes(ctx.client, ctx.train_uri), what="pulled setting restored")
    _change(ctx, ctx.text)


async def test_watched_file_change_rechecks_dependents(ctx: Ctx) -> None:
    if ctx.vscode:  # registered from `initialized`, once the settings were pulled
        await wait_until(lambda: any(r.method == types.WORKSPACE_DID_CHANGE_WATCHED_FILES
                                     for p in ctx.seen["register"] for r in p.registrations),
                         what="the watcher's registration")
    else:
        assert ctx.seen["register"] == []  # Neovim 0.7 has no dynamic registration for it
    # Open the search config (it reads train.yaml from disk), then break train.yaml on disk only.
    search_text = ctx.search.read_text()
    ctx.client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=types.TextDocumentItem(
        uri=ctx.search_uri, language_id="yaml", version=1, text=search_text)))
    # Its search's advice (the example's stated plan is slower than the best) marks the search as landed.
    await wait_until(lambda: codes(ctx.client, ctx.search_uri) & {"HP610", "HP611"}, what="the search config's search")
    before = codes(ctx.client, ctx.search_uri)
    ctx.client.text_document_did_close(types.DidCloseTextDocumentParams(
        text_document=types.TextDocumentIdentifier(uri=ctx.train_uri)))
    original = ctx.train.read_text()
    ctx.train.write_text(original.replace("model:", "model: [", 1))
    ctx.client.workspace_did_change_watched_files(types.DidChangeWatchedFilesParams(changes=[
        types.FileEvent(uri=ctx.train_uri, type=types.FileChangeType.Changed)]))
    await wait_until(lambda: codes(ctx.client, ctx.search_uri) != before, what="re-check after disk change")
    ctx.train.write_text(original)
    ctx.client.workspace_did_change_watched_files(types.DidChangeWatchedFilesParams(changes=[
        types.FileEvent(uri=ctx.train_uri, type=types.FileChangeType.Changed)]))
    await wait_until(lambda: codes(ctx.client, ctx.search_uri) == before, what="re-check after restore")


async def test_an_error_on_a_strategy_key_still_searches(ctx: Ctx) -> None:
    """A stated FSDP shard the cluster cannot hold (HP413 on fsdp_config.dp_shard_size) is what applying the best
    plan repairs (engine.edit.strategy_keys): the search on save still runs and offers it, as `hp-plan apply` does."""
    text = ctx.text.replace("dp_shard_size: 32", "dp_shard_size: 7")
    assert text != ctx.text
    _change(ctx, text)
    ctx.train.write_text(text)
    ctx.client.text_document_did_save(types.DidSaveTextDocumentParams(
        text_document=types.TextDocumentIdentifier(uri=ctx.train_uri)))
    await wait_until(lambda: "HP413" in codes(ctx.client, ctx.train_uri), what="HP413 on the stated shard")
    deadline = time.monotonic() + 60
    while "stale" in (title := (lens := await _best_lens(ctx)).command.title):  # type: ignore[union-attr]
        assert time.monotonic() < deadline, f"the search never ran on the saved file: {title}"
        await asyncio.sleep(0.05)
    assert lens.command is not None and lens.command.command == "hpLsp.applyOptimalStrategy"
