"""End to end on the search-config side: a lone train.yaml (no cluster) gets "create a search config"; a
search config shows device hovers and applies the best plan to the train.yaml it references."""

from __future__ import annotations

import asyncio
import shutil
import time

import pytest
from lsprotocol import types
from pygls.uris import from_fs_path

from hp_lsp.search_job import ListsRequest, run_lists
from hp_lsp.settings import Settings
from tests.support.cli import ROOT, hp_plan_json
from tests.support.configs import DSV3_A3, NEMOTRON_H_8B, bridge_dsv3_train, llama8b_model
from tests.support.lsp_e2e import (
    EXAMPLES,
    Ctx,
    codes,
    copy_example,
    diagnostic,
    edits_of,
    find_line,
    open_doc,
    quick_fix,
    take_fix,
    wait_until,
)

pytestmark = pytest.mark.lsp()


async def test_lone_train_yaml_offers_a_search_config(ctx: Ctx) -> None:
    lonely = ctx.root / "lonely"
    lonely.mkdir()
    shutil.copy(EXAMPLES / "llama3-70b" / "train.yaml", lonely / "train.yaml")
    uri = open_doc(ctx.client, lonely / "train.yaml")
    diag = await diagnostic(ctx.client, uri, "HP302", what="no-cluster information")
    assert diag.severity == types.DiagnosticSeverity.Information
    actions = await ctx.client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), range=diag.range,
        context=types.CodeActionContext(diagnostics=[diag])))
    target = lonely / "search.yaml"
    if ctx.vscode:  # a quick fix whose edit creates the file (CreateFile + its text)
        create = [a for a in actions or [] if isinstance(a, types.CodeAction) and a.edit
                  and any(isinstance(dc, types.CreateFile) for dc in a.edit.document_changes or [])]
        assert create, actions
        edit = create[0].edit
        assert edit is not None and edit.document_changes
        body = next(dc for dc in edit.document_changes if isinstance(dc, types.TextDocumentEdit))
        target.write_text(body.edits[0].new_text)  # what the editor does
        ctx.client.workspace_did_change_watched_files(types.DidChangeWatchedFilesParams(changes=[
            types.FileEvent(uri=from_fs_path(str(target)) or "", type=types.FileChangeType.Created)]))
    else:  # Neovim 0.7 cannot create files through an edit: a command, and the server writes the file
        cmds = [a for a in actions or [] if isinstance(a, types.Command)
                and a.command == "hpLsp.createSearchConfig"]
        assert cmds, actions
        result = await ctx.client.workspace_execute_command_async(types.ExecuteCommandParams(
            command=cmds[0].command, arguments=cmds[0].arguments))
        created = result.get("created") if isinstance(result, dict) else getattr(result, "created", None)
        assert created is True and target.is_file()
    assert "train_yaml: train.yaml" in target.read_text() or "train_yaml: ./train.yaml" in target.read_text()
    # The new search config gives the train.yaml its cluster: HP302 goes away.
    await wait_until(lambda: "HP302" not in codes(ctx.client, uri), what="cluster found")


async def test_search_config_hover_lens_and_apply_to_train_yaml(ctx: Ctx) -> None:
    folder = copy_example("llama3-70b", ctx.root)
    uri = open_doc(ctx.client, folder / "search.yaml")
    text = (folder / "search.yaml").read_text()
    await wait_until(lambda: uri in ctx.client.diagnostics, what="diagnostics")
    line, col = find_line(text, "device_type")
    hover = await ctx.client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=line, character=col + 15)))
    assert hover is not None and isinstance(hover.contents, types.MarkupContent)
    assert "H100" in hover.contents.value and "GiB" in hover.contents.value

    async def best_lens() -> list[types.CodeLens]:
        lenses = await ctx.client.text_document_code_lens_async(
            types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=uri)))
        return [lens for lens in lenses or [] if lens.command and lens.command.title.startswith("Best:")]

    deadline = time.monotonic() + 60
    while not await best_lens() and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    lens = (await best_lens())[0]
    assert lens.range.start.line == find_line(text, "parallelism:")[0]

    # The hover on a candidate list says, per value, whether a plan fits with it (once the list job ran).
    assert "values fit" in await _list_hover(ctx, uri, text)
    # The faster-plan hint about the train.yaml's stated strategy shows at the train_yaml key.
    hint = await diagnostic(ctx.client, uri, "HP611", what="stated-vs-best hint")
    assert hint.range.start.line == find_line(text, "train_yaml:")[0] and hint.message.startswith("train.yaml:")
    actions = await ctx.client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), range=hint.range,
        context=types.CodeActionContext(diagnostics=[hint])))
    fix = next(a for a in actions or [] if isinstance(a, types.CodeAction)
               and a.title.startswith("Apply optimal strategy"))
    assert fix.edit is not None
    train_uri = from_fs_path(str(folder / "train.yaml")) or ""
    edits, version = edits_of(fix.edit, train_uri)
    assert edits and version is None  # the train.yaml is not open: the edit targets the file on disk


HOSTILE = {
    "train-deep.yaml": "model:\n  x: " + "[" * 5000 + "\n",
    "train-laughs.yaml": "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [" + ", ".join([f"*{chr(97 + i)}"] * 9) + "]\n" for i in range(8)),
    "train-tag.yaml": "model: !!python/object/apply:os.system ['echo hacked']\ntraining: {global_batch_size: 8}\n",
    "train-tabs.yaml": "accelerator:\n\ttp_size: 4\n",
    "train-half.yaml": "accelerator:\n  tp_size: 4\n  pp_\n  cp_size: [\n",
}


async def test_hostile_and_half_typed_files_never_break_the_server(ctx: Ctx) -> None:
    folder = ctx.root / "hostile"
    folder.mkdir()
    uris = []
    for name, text in HOSTILE.items():
        (folder / name).write_text(text)
        uris.append(open_doc(ctx.client, folder / name))
    for uri in uris:
        await wait_until(lambda uri=uri: uri in ctx.client.diagnostics, what=f"diagnostics for {uri}")
    # Every request still answers on every file.
    for uri in uris:
        await ctx.client.text_document_hover_async(types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=1, character=3)))
        await ctx.client.text_document_document_symbol_async(types.DocumentSymbolParams(
            text_document=types.TextDocumentIdentifier(uri=uri)))
        await ctx.client.text_document_completion_async(types.CompletionParams(
            text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=1, character=2)))
    assert [m for m in ctx.client.messages if m.type == types.MessageType.Error] == []
    assert "HP007" in codes(ctx.client, uris[2])


async def test_utf16_columns_after_an_emoji(ctx: Ctx) -> None:
    """An emoji (two UTF-16 units, one code point) before a value shifts the client column by one."""
    folder = ctx.root / "emoji"
    folder.mkdir()
    lines = (EXAMPLES / "llama3-70b" / "train.yaml").read_text().splitlines(keepends=True)
    i = next(n for n, line in enumerate(lines) if line.startswith("accelerator:"))
    j = i + 1
    while j < len(lines) and lines[j].startswith("  "):
        j += 1
    flow = 'accelerator: {note: "🦙", tp_size: 3, pp_size: 4, sequence_parallel: true}\n'
    (folder / "train.yaml").write_text("".join(lines[:i]) + flow + "".join(lines[j:]))
    uri = open_doc(ctx.client, folder / "train.yaml")
    diag = await diagnostic(ctx.client, uri, "HP403", what="tp does not divide hidden")
    col = flow.index("3,")  # code points
    assert diag.range.start.line == i and diag.range.start.character == col + 1
    actions = await ctx.client.text_document_code_action_async(types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=uri), range=diag.range,
        context=types.CodeActionContext(diagnostics=[diag])))
    fixes = [a for a in actions or [] if isinstance(a, types.CodeAction) and a.title.startswith("Set `tp_size`")]
    assert fixes and fixes[0].edit is not None
    edits, _ = edits_of(fixes[0].edit, uri)
    assert edits and edits[0].range.start == types.Position(line=i, character=col + 1)


async def test_search_config_follows_the_unsaved_train_yaml_buffer(ctx: Ctx) -> None:
    """Open buffers win over the disk: an unsaved edit in the open train.yaml reaches the search config that
    references it at once (fast check, debounced) and in its next search (on save); closing the train.yaml
    without saving puts the disk back."""
    folder = ctx.root / "linked"
    shutil.copytree(EXAMPLES / "llama3-70b", folder)
    search_path, train_path = folder / "search.yaml", folder / "train.yaml"
    # tp is inherited from the train.yaml (no `tp:` in the search config), so the train.yaml's tp_size counts.
    search_text = "".join(ln for ln in search_path.read_text().splitlines(keepends=True)
                          if not ln.lstrip().startswith("tp: ["))
    search_path.write_text(search_text)
    disk = train_path.read_text()
    uri = open_doc(ctx.client, search_path)
    train_uri = open_doc(ctx.client, train_path)
    key_line = find_line(search_text, "train_yaml:")[0]
    disk_tp_line = find_line(disk, "tp_size:")[0]

    def hint() -> types.Diagnostic | None:
        return next((d for d in ctx.client.diagnostics.get(uri, []) if d.code == "HP611"), None)

    async def stated_lens() -> str:
        lenses = await ctx.client.text_document_code_lens_async(
            types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=uri)))
        return next((lens.command.title for lens in lenses or []
                     if lens.command and lens.command.title.startswith("Stated")), "")

    first = await wait_until(hint, what="stated-vs-best hint from the train.yaml on disk")
    assert first.message.startswith(f"train.yaml:{disk_tp_line + 1}:")
    disk_lens = await stated_lens()
    assert disk_lens.startswith("Stated (train_yaml):")

    def change(text: str, version: int) -> None:
        ctx.client.text_document_did_change(types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=train_uri, version=version),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)]))

    # An invalid tp in the buffer (3 divides neither the heads nor the width): the search config shows the
    # train.yaml's finding at its `train_yaml:` key, without any save.
    change(disk.replace("tp_size: 8", "tp_size: 3"), 2)
    found = await diagnostic(ctx.client, uri, "HP403", what="the buffer's tp reaches the search config")
    assert found.range.start.line == key_line and found.message.startswith(f"train.yaml:{disk_tp_line + 1}:")
    assert train_path.read_text() == disk  # nothing was saved
    # Closed without saving: the search config reads the disk again.
    ctx.client.text_document_did_close(types.DidCloseTextDocumentParams(
        text_document=types.TextDocumentIdentifier(uri=train_uri)))
    await wait_until(lambda: "HP403" not in codes(ctx.client, uri), what="back to the disk after close")

    # A valid tp (4) one line lower in the reopened, unsaved buffer; saving the search config searches with it:
    # the advice points at the buffer's line and the stated plan priced is the buffer's.
    train_uri = open_doc(ctx.client, train_path)
    change("# an unsaved comment\n" + disk.replace("tp_size: 8", "tp_size: 4"), 2)
    ctx.client.text_document_did_save(types.DidSaveTextDocumentParams(
        text_document=types.TextDocumentIdentifier(uri=uri)))
    moved = await wait_until(lambda: (h := hint()) is not None and h.message.startswith(
        f"train.yaml:{disk_tp_line + 2}:") and h, what="the search reads the unsaved train.yaml")
    assert moved.range.start.line == key_line
    assert train_path.read_text() == disk
    buffer_lens = await stated_lens()
    assert buffer_lens.startswith("Stated (train_yaml):") and buffer_lens != disk_lens
    ctx.client.text_document_did_close(types.DidCloseTextDocumentParams(
        text_document=types.TextDocumentIdentifier(uri=train_uri)))


OFFLOAD_SEARCH = llama8b_model(name="llama3-8b") + """\
cluster: {num_nodes: 1, cards_per_node: 8, device_type: GB200}
parallelism: {dp: 4, fsdp: 1, tp: 1, pp: 2, cp: 1, ep: 1, vpp: 1, micro_batch_size: 2, micro_batch_num: 8,
  sequence_parallel: false}
constraint: {global_batch_size: 64, memory_limit_gb: 180}
recompute: none
cpu_offloading_num_layers: 16
estimator: {framework: megatron}
"""


async def test_megatron_cpu_offloading_megatron_refuses_is_said_at_its_key(ctx: Ctx) -> None:
    """Megatron-Core refuses CPU offloading with pipeline parallelism: the editor shows HP530 on the key's value
    (the plan is priced without it), and it goes away when the plan drops to pp 1."""
    folder = ctx.root / "offload"
    folder.mkdir()
    path = folder / "search.yaml"
    path.write_text(OFFLOAD_SEARCH)
    uri = open_doc(ctx.client, path)
    diag = await diagnostic(ctx.client, uri, "HP530", what="HP530 at cpu_offloading_num_layers")
    line, col = find_line(OFFLOAD_SEARCH, "cpu_offloading_num_layers: 16")
    assert (diag.range.start.line, diag.range.start.character) == (line, col + len("cpu_offloading_num_layers: "))
    assert "pipeline parallelism (pp 2)" in diag.message
    fixed = OFFLOAD_SEARCH.replace("dp: 4, fsdp: 1, tp: 1, pp: 2", "dp: 8, fsdp: 1, tp: 1, pp: 1").replace(
        "micro_batch_num: 8", "micro_batch_num: 4")
    ctx.client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text=fixed)]))
    await wait_until(lambda: "HP530" not in codes(ctx.client, uri), what="HP530 gone at pp 1")


async def test_layer_layout_sets_vpp_by_quick_fix(ctx: Ctx) -> None:
    """A Megatron train.yaml whose layer layout lists 4 chunks per stage while it states vpp 2: HP422 at the
    layout, and its quick fix writes the layout's vpp at the vpp key (Megatron-LM takes vpp from the layout)."""
    folder = ctx.root / "bridge"
    folder.mkdir()
    train = bridge_dsv3_train(folder, vpp=2)
    (folder / "search.yaml").write_text("train_yaml: ./train.yaml\nestimator: {framework: megatron, fp8: true}\n"
                                        "cluster: {num_nodes: 256, cards_per_node: 8, device_type: H100}\n")
    text = train.read_text()
    uri = open_doc(ctx.client, train, text)
    diag, fix = await quick_fix(ctx.client, uri, "HP422", "Set `pp_interleave_num` to 4")
    assert diag.range.start.line == find_line(text, "pipeline_model_parallel_layout")[0]
    assert fix.edit is not None and fix.is_preferred
    fixed = take_fix(ctx.client, uri, text, fix)
    assert fixed == text.replace("  pp_interleave_num: 2\n", "  pp_interleave_num: 4\n")
    await wait_until(lambda: "HP422" not in codes(ctx.client, uri), what="HP422 gone")
    # The plan is priced as the search config prices it (its stack, its FP8), as `hp-plan estimate` prices it.
    train.write_text(fixed)
    step = hp_plan_json("estimate", str(folder / "search.yaml"))["step_time_s"]
    line, col = find_line(fixed, "pp_size")
    hover = await ctx.client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=line, character=col + 2)))
    assert hover is not None and isinstance(hover.contents, types.MarkupContent)
    assert f"| step time | {step:.2f} s" in hover.contents.value and "priced for megatron" in hover.contents.value


async def test_a_hybrid_split_megatron_cannot_run_is_fixed_at_its_pp(ctx: Ctx) -> None:
    """Nemotron-H 8B (52 layers) at pp 8 on Megatron: HP530 at pp, whose quick fix sets the pp that divides the
    layers and keeps the 32 devices (4); the finding is then gone."""
    folder = ctx.root / "hybrid"
    folder.mkdir()
    text = NEMOTRON_H_8B.replace("parallelism: {dp: 16, tp: 2, pp: 1, cp: 1, ep: 1, micro_batch_size: 1}",
                                 "parallelism: {dp: 4, tp: 1, pp: 8, cp: 1, ep: 1, vpp: 1, micro_batch_size: 1}")
    assert "pp: 8" in text
    uri = open_doc(ctx.client, folder / "search.yaml", text)
    diag, fix = await quick_fix(ctx.client, uri, "HP530", "Set `pp` to 4")
    assert diag.range.start.line == find_line(text, "pp: 8")[0] and fix.is_preferred
    fixed = take_fix(ctx.client, uri, text, fix)
    assert fixed == text.replace("pp: 8,", "pp: 4,")
    await wait_until(lambda: "HP530" not in codes(ctx.client, uri), what="HP530 gone at pp 4")


async def _list_hover(ctx: Ctx, uri: str, text: str) -> str:
    """The hover on the `tp: [...]` list of the search config `uri` holding `text`, once the list job's facts
    are in it ("values fit"; 60 s at most), else the last one seen."""
    line, col = find_line(text, "tp: [")

    async def hover() -> str:
        h = await ctx.client.text_document_hover_async(types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=line, character=col)))
        return h.contents.value if h is not None and isinstance(h.contents, types.MarkupContent) else ""

    deadline = time.monotonic() + 60
    while "values fit" not in (shown := await hover()) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    return shown


async def _stated_lens(ctx: Ctx, uri: str, until: str) -> str:
    """The "Stated…" code lens of `uri` once its title holds `until` (60 s at most)."""
    deadline = time.monotonic() + 60
    title: str | None = None
    while time.monotonic() < deadline:
        lenses = await ctx.client.text_document_code_lens_async(
            types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=uri)))
        title = next((lens.command.title for lens in lenses or [] if lens.command
                      and lens.command.title.startswith("Stated")), None)
        if title and until in title:
            return title
        await asyncio.sleep(0.1)
    raise AssertionError(f"no Stated lens with {until!r}: last {title!r}")


@pytest.mark.lsp(profiles=["visual-studio-code"], settings={"framework": "megatron"})
async def test_settings_that_arrive_after_the_documents_count(ctx: Ctx) -> None:
    """VS Code opens its documents right after `initialized`, before it answers workspace/configuration: the
    first check runs on the defaults, and the settings, once they arrive, check the documents again (the
    framework and cluster settings were ignored until the next edit)."""
    folder = copy_example("llama3-70b", ctx.root)
    uri = open_doc(ctx.client, folder / "search.yaml")
    assert "megatron on H100" in await _stated_lens(ctx, uri, "megatron")


PAIR_SETTINGS = {"framework": "megatron", "ratiosFile": "ratios.yaml"}


@pytest.mark.lsp(settings=PAIR_SETTINGS, init={"hpLsp": PAIR_SETTINGS})
async def test_the_framework_setting_prices_both_files_of_a_pair_alike(ctx: Ctx) -> None:
    """hpLsp.framework and hpLsp.ratiosFile fill what a search config leaves unsaid: its train.yaml is then
    priced by the same stack with the same ratios (the search config's check for the train.yaml's cluster
    takes the settings as its own check does), so the two files' lenses agree."""
    (ctx.root / "ratios.yaml").write_text("framework: megatron\ndevice_type: H100\nratios: {compute: 1.5}\n")
    folder = copy_example("llama3-70b", ctx.root)
    search = folder / "search.yaml"
    assert "framework" not in search.read_text()
    train_uri = open_doc(ctx.client, folder / "train.yaml")
    search_uri = open_doc(ctx.client, search)
    train_title = await _stated_lens(ctx, train_uri, "megatron")
    search_title = await _stated_lens(ctx, search_uri, "megatron")
    # "Stated: 5.2 GiB (fits 76 GiB) · 12.… s/step ± 14% · …" and "Stated (train_yaml): …", the same figures,
    # with the ratios applied (8.59 s without them)
    assert train_title.split(": ", 1)[1] == search_title.split(": ", 1)[1] and "8.59 s/step" not in train_title
    # The hover on a candidate list prices its values on the same stack as the best plan beside it.
    settings = Settings(framework="megatron", ratios_file="ratios.yaml")
    facts = run_lists(ListsRequest(str(search), None, overrides=settings.overrides(),
                                   ratios=settings.ratios_request(str(ctx.root))),
                      progress=lambda _: None, cancelled=lambda: False)
    assert facts is not None
    cells = [f"**{v}** {t:.2f} s" for v, t in facts.values["tp"].items() if t is not None]
    shown = await _list_hover(ctx, search_uri, search.read_text())
    assert cells and all(c in shown for c in cells), (cells, shown)


async def test_dualpipev_pads_deepseeks_layers_by_quick_fix(ctx: Ctx) -> None:
    """DeepSeek-V3's 61 layers under DualPipeV on MindSpeed: HP505 at pp, and its quick fix pads them with the
    no-op layers MindSpeed runs them with (pp_config.noop_layers "61,62,63"); the plan is then priced."""
    folder = ctx.root / "dsv3-a3"
    folder.mkdir()
    text = DSV3_A3.replace(" NOOP", "").replace("FRAMEWORK", "mindspeed")
    uri = open_doc(ctx.client, folder / "search.yaml", text)
    diag, fix = await quick_fix(ctx.client, uri, "HP505", "Set `noop_layers` to 61,62,63")
    assert diag.range.start.line == find_line(text, "pp: 8")[0]
    fixed = take_fix(ctx.client, uri, text, fix)
    assert 'pp_config: {pipeline_schedule: dualpipev, noop_layers: "61,62,63"}' in fixed
    await wait_until(lambda: "HP505" not in codes(ctx.client, uri), what="HP505 gone")
    assert not [d for d in ctx.client.diagnostics[uri] if d.severity == types.DiagnosticSeverity.Error]


async def test_the_search_pads_deepseeks_layers_and_its_quick_fix_states_the_padding(ctx: Ctx) -> None:
    """pp searched: the best DualPipeV plans on MindSpeed pad DeepSeek-V3's 61 layers with no-op layers; HP614 says
    so at the schedule, and its quick fix states the padding, after which the search prices it as stated."""
    folder = ctx.root / "dsv3-a3-searched"
    folder.mkdir()
    text = DSV3_A3.replace(" NOOP", "").replace("FRAMEWORK", "mindspeed").replace(
        "dp: 32, tp: 2, pp: 8,", "dp: auto, tp: 2, pp: auto,").replace(" micro_batch_num: 120,", "")
    uri = open_doc(ctx.client, folder / "search.yaml", text)

    async def best() -> str:
        lenses = await ctx.client.text_document_code_lens_async(
            types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=uri)))
        return next((lens.command.title for lens in lenses or [] if lens.command
                     and lens.command.title.startswith("Best:")), "")

    diag, fix = await quick_fix(ctx.client, uri, "HP614", "Set `noop_layers` to 61,62,63")
    assert "· noop layers 61,62,63 —" in await best()
    assert diag.range.start.line == find_line(text, "pipeline_schedule: dualpipev")[0]
    assert diag.severity == types.DiagnosticSeverity.Information and "61,62,63" in diag.message
    fixed = take_fix(ctx.client, uri, text, fix)
    assert 'pp_config: {pipeline_schedule: dualpipev, noop_layers: "61,62,63"}' in fixed
    ctx.client.text_document_did_save(types.DidSaveTextDocumentParams(
        text_document=types.TextDocumentIdentifier(uri=uri)))
    # The next search prices the stated padding as the run's own layout: no note, and no padding of its own.
    deadline = time.monotonic() + 60
    while ((title := await best()) == "" or "noop layers" in title) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert title.startswith("Best: ") and "noop layers" not in title and "pp " in title
    assert "HP614" not in codes(ctx.client, uri)
    assert not [d for d in ctx.client.diagnostics[uri] if d.severity == types.DiagnosticSeverity.Error]


async def test_a_plan_whose_release_is_not_stated_says_what_an_older_one_prices(ctx: Ctx) -> None:
    """The TT-BENCH 8B run without its release: the editor says, at the framework, that torchtitan before its
    chunked loss prices the peak beyond the band (HP536, information); stating the release clears it."""
    run = (ROOT / "benchmarks" / "memory_runs" / "tt-8b-8gpu-compile.yaml").read_text()
    text = "\n".join(line for line in run.splitlines()
                     if not line.startswith(("  framework_version:", "  loss_chunks:"))) + "\n"
    folder = ctx.root / "release"
    folder.mkdir()
    path = folder / "search.yaml"
    path.write_text(text)
    uri = open_doc(ctx.client, path)
    diag, fix = await quick_fix(ctx.client, uri, "HP536", "Set `framework_version` to main")
    assert diag.severity == types.DiagnosticSeverity.Information
    line, col = find_line(text, "framework: torchtitan")
    assert (diag.range.start.line, diag.range.start.character) == (line, col + len("framework: "))
    assert "before main (the chunked loss" in diag.message
    fixed = take_fix(ctx.client, uri, text, fix)
    assert fixed.endswith("  fp8: false\n  framework_version: main\n")
    await wait_until(lambda: "HP536" not in codes(ctx.client, uri), what="HP536 gone once the release is stated")
    assert not [d for d in ctx.client.diagnostics[uri] if d.severity == types.DiagnosticSeverity.Error]
    # the release the run used, typed there: priced as it ran, and no finding either
    older = fixed.replace("framework_version: main", "framework_version: '0.0'")
    ctx.client.text_document_did_change(types.DidChangeTextDocumentParams(
        text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=3),
        content_changes=[types.TextDocumentContentChangeWholeDocument(text=older)]))
    line, col = find_line(older, "micro_batch_size")
    shown = ""
    for _ in range(1200):  # the edit's debounced check, then the hover reads its analysis (up to 60 s)
        hover = await ctx.client.text_document_hover_async(types.HoverParams(
            text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=line, character=col + 2)))
        shown = hover.contents.value if hover is not None and isinstance(hover.contents, types.MarkupContent) else ""
        if "torchtitan 0.0" in shown:
            break
        await asyncio.sleep(0.05)
    assert "torchtitan 0.0" in shown and "HP536" not in codes(ctx.client, uri)
