"""Feature services on the real examples: analysis, search job, diagnostics, hover, lens, code actions."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

from engine.edit import apply_edits
from engine.positions import Range
from hp_lsp.analysis import analyse, cluster_from_search_config
from hp_lsp.features import code_lens, diagnostics, hover
from hp_lsp.features.code_actions import fix_for, optimal_edits
from hp_lsp.features.new_search_config import search_config_path
from hp_lsp.outline import scan
from hp_lsp.search_job import SearchOutcome, SearchRequest, best_edits, run_search
from hp_lsp.workspace import SearchConfigIndex, referenced_train_yaml
from tests.support.configs import NANO, bridge_dsv3_train
from tests.support.lsp_services import LLAMA, never, no_progress, state_for

TRAIN = LLAMA / "train.yaml"
SEARCH = LLAMA / "search.yaml"


def _pos(text: str, needle: str) -> tuple[int, int]:
    for n, line in enumerate(text.splitlines()):
        if needle in line:
            return n, line.index(needle) + 1
    raise AssertionError(needle)


def test_analysis_leaves_other_yaml_alone_and_caps_size() -> None:
    other = analyse("/tmp/x.yaml", "name: hello\nitems: [1, 2]\n", 1, overrides=None, max_file_size_kb=1024)
    assert not other.is_config
    big = analyse(str(TRAIN), TRAIN.read_text() + "#" * 3000, 1, overrides=None, max_file_size_kb=1)
    assert big.too_large and [d.code for d in big.diagnostics] == ["HP005"]


def test_search_job_result_pickles_and_has_edits() -> None:
    text = TRAIN.read_text()
    out = run_search(SearchRequest(str(TRAIN), text, cluster_from_search_config(str(SEARCH)),
                                   space_path=str(SEARCH)),
                     progress=no_progress, cancelled=never)
    assert out.result is not None and out.result.best is not None
    assert pickle.loads(pickle.dumps(out)).result.best == out.result.best
    assert out.edits, out.edit_error
    new = apply_edits(text, out.edits)
    assert new != text and "# What we run today" in new  # comments survive the round trip


def test_search_job_refuses_broken_files() -> None:
    out = run_search(SearchRequest(str(TRAIN), "model: [\n", None), progress=no_progress, cancelled=never)
    assert out.result is None and out.note


def test_results_cross_the_pipe_with_their_frozen_maps() -> None:
    """hp_lsp.worker's copyreg reducer: a result with MappingProxyType fields pickles, and reads back frozen."""
    from types import MappingProxyType

    import hp_lsp.worker  # noqa: F401  (registers the reducer, as it is in the server and its child)
    from engine.results import SearchResult

    r = SearchResult(None, (), 0, 0, 0.0, MappingProxyType({"tp": "x"}), refused=MappingProxyType({"dp": 2}))
    back = pickle.loads(pickle.dumps(r))
    assert back == r and isinstance(back.dimensions, MappingProxyType) and dict(back.refused) == {"dp": 2}


def test_diagnostics_keep_search_findings_through_edits() -> None:
    session, st = state_for(TRAIN, space=SEARCH)
    base = diagnostics.collect(st)
    search_codes = {d.code for d in base} & {"HP610", "HP611"}
    assert search_codes, [d.code for d in base]
    hint = next(d for d in base if d.code in search_codes)
    # Two lines inserted at the top: the search diagnostic follows its key down by two lines.
    text = "# one\n# two\n" + TRAIN.read_text()
    session.change(st.uri, 2)
    session.record_analysis(st.uri, st.generation, analyse(str(TRAIN), text, 2,
                                                           overrides=cluster_from_search_config(str(SEARCH)),
                                                           max_file_size_kb=1024))
    moved = next(d for d in diagnostics.collect(st) if d.code == hint.code)
    assert st.search_stale
    assert moved.range.start.line == hint.range.start.line + 2


def test_foreign_diagnostics_land_on_train_yaml_key() -> None:
    from engine.diagnostics import Diagnostic

    text = SEARCH.read_text()
    entries = scan(text)
    d = Diagnostic("HP101", "bad key", Range.of(3, 2, 3, 5), file=str(TRAIN))
    (moved,) = diagnostics.relocate_foreign([d], entries)
    line, _ = _pos(text, "train_yaml:")
    assert moved.range.start.line == line and moved.message.startswith("train.yaml:4: ")


def test_hover_strategy_model_device_list() -> None:
    _, st = state_for(TRAIN, space=SEARCH)
    text = TRAIN.read_text()
    assert st.analysis is not None
    entries = st.analysis.entries
    strategy = hover.hover_markdown(st, entries, *_pos(text, "tp_size"))
    assert strategy and "GiB" in strategy and "MFU" in strategy and "best" in strategy
    model = hover.hover_markdown(st, entries, *_pos(text, "pretrained_model_name_or_path"))
    assert model and "parameters" in model and "FLOPs" in model
    assert hover.device_hover("h100") and "80 GiB" in (hover.device_hover("H100") or "")
    a2 = hover.device_hover("ascend910b") or ""
    assert "354 TFLOP/s" in a2 and "[U] unconfirmed figures: intra_node_gb_s" in a2 and "sources:" in a2
    _, sst = state_for(SEARCH)
    stext = SEARCH.read_text()
    assert sst.analysis is not None
    listed = hover.hover_markdown(sst, sst.analysis.entries, *_pos(stext, "tp: [1"))
    assert listed and "values in the" in listed
    device = hover.hover_markdown(sst, sst.analysis.entries, *_pos(stext, "device_type: H100"))
    assert device and "H100" in device


def test_hover_never_waits_and_says_searching() -> None:
    session, st = state_for(TRAIN, search=False)
    session.begin_search(st.uri)
    text = TRAIN.read_text()
    assert st.analysis is not None
    # Synchronous over the session: a hover that waited for the search (which never runs here) would hang.
    got = hover.hover_markdown(st, st.analysis.entries, *_pos(text, "tp_size"))
    assert got is not None and "Searching for the best strategy" in got


def test_code_lens_best_plan_with_apply() -> None:
    _, st = state_for(TRAIN, space=SEARCH)
    assert st.analysis is not None
    lenses = code_lens.lenses(st, st.analysis.entries)
    best = lenses[0]
    assert best.title.startswith("Best: ") and best.title.endswith("▸ Apply")
    assert best.command == "hpLsp.applyOptimalStrategy" and best.arguments == (st.uri,)
    line, _ = _pos(TRAIN.read_text(), "accelerator:")
    assert best.range.start.line == line


def test_optimal_edits_follow_the_current_text() -> None:
    _, st = state_for(TRAIN, space=SEARCH)
    text = TRAIN.read_text()
    pre, what = optimal_edits(st, text)
    assert pre and "tp" in what
    edited = "# a new first line\n" + text
    fresh, _ = optimal_edits(st, edited)
    assert fresh and fresh != pre
    assert apply_edits(edited, fresh).startswith("# a new first line\n")


def test_quick_fixes_from_diagnostic_data() -> None:
    text = TRAIN.read_text().replace("tp_size: 8", "tp_sise: 8")
    fix = fix_for(text, "accelerator.tp_sise", {"replace_key": "tp_size"})
    assert fix and fix.title == "Rename `tp_sise` to `tp_size`"
    assert "tp_size: 8" in apply_edits(text, fix.edits)
    fix = fix_for(TRAIN.read_text(), "accelerator.tp_size", {"nearest_valid": 4})
    assert fix and "tp_size: 4" in apply_edits(TRAIN.read_text(), fix.edits)
    stext = SEARCH.read_text()
    fix = fix_for(stext, "parallelism.tp", {"widen": [16]})
    assert fix and "16" in apply_edits(stext, fix.edits)
    assert fix_for(stext, "", {"nearest_valid": 1}) is None


def test_workspace_finds_the_referencing_search_config(tmp_path: Path) -> None:
    (tmp_path / "train.yaml").write_text("model: {}\n")
    (tmp_path / "other.yaml").write_text("train_yaml: ./elsewhere.yaml\n")
    (tmp_path / "search.yaml").write_text("train_yaml: './train.yaml'  # the file beside\n")
    idx = SearchConfigIndex()
    found = idx.referencing(str(tmp_path / "train.yaml"), [], {})
    assert found == str(tmp_path / "search.yaml")
    assert referenced_train_yaml(str(tmp_path / "s.yaml"), "train_yaml: ../x/train.yaml\n") == \
        str(tmp_path.parent / "x" / "train.yaml")
    assert search_config_path(str(tmp_path / "train.yaml")) == str(tmp_path / "search-train.yaml")


def test_the_server_writes_a_search_config_under_a_free_name_in_one_step(tmp_path: Path) -> None:
    """createSearchConfig's own write (clients without CreateFile) checks the train.yaml and creates the file in
    one call off the loop, the exclusive create testing each name in turn: two calls make two files, a name
    another writer took moves on to the next, and nothing is written beside what is not a regular file."""
    from hp_lsp.features import new_search_config as nsc
    from hp_lsp.settings import Settings

    train = tmp_path / "train.yaml"
    train.write_text("model: {}\n")
    first, second = nsc.write_beside(Settings(), str(train)), nsc.write_beside(Settings(), str(train))
    assert first == (str(tmp_path / "search.yaml"), None) and second == (str(tmp_path / "search-train.yaml"), None)
    assert "train_yaml: train.yaml" in (tmp_path / "search.yaml").read_text().replace("./", "")
    (tmp_path / "search-train.yaml").write_text("mine\n")  # another writer's
    made, why = nsc.write_beside(Settings(), str(train))
    assert why is None and made is not None and made.endswith(f"search-train-{os.getpid()}.yaml")
    assert (tmp_path / "search-train.yaml").read_text() == "mine\n"  # never overwritten
    assert nsc.write_beside(Settings(), str(tmp_path)) == (None, f"{tmp_path} is not a regular file")


def test_apply_targets_a_train_yaml_only() -> None:
    from types import SimpleNamespace

    from hp_lsp.features.code_actions import apply_target
    from hp_lsp.session import DocState

    st = DocState("file:///w/search.yaml", "/w/search.yaml")
    st.analysis = SimpleNamespace(config=SimpleNamespace(kind="search", train_yaml=None))  # type: ignore[assignment]
    assert apply_target(st) is None
    st.analysis = SimpleNamespace(config=SimpleNamespace(kind="search", train_yaml="/w/train.yaml"))  # type: ignore[assignment]
    assert apply_target(st) == "/w/train.yaml"
    st.analysis = SimpleNamespace(config=SimpleNamespace(kind="train", train_yaml=None))  # type: ignore[assignment]
    assert apply_target(st) == "/w/search.yaml"


def test_list_facts_say_which_values_fit() -> None:
    from hp_lsp.search_job import ListsRequest, run_job

    facts = run_job(ListsRequest(str(SEARCH), None), progress=no_progress, cancelled=never)
    assert facts is not None and set(facts.values) == {"tp"}
    per = facts.values["tp"]
    assert set(per) == {1, 2, 4, 8}
    _, sst = state_for(SEARCH)
    assert sst.search is not None and sst.search.result is not None and sst.search.result.best is not None
    fastest = min(t for t in per.values() if t is not None)
    result = sst.search.result
    # the best is the fastest plan, or a simpler one inside the search's near-tie band (engine.cost.equivalence)
    assert fastest <= result.best.step_time_s <= fastest * (1 + (result.band or 0.0))
    sst.list_facts = facts
    text = hover.list_hover(sst, "tp")
    assert text and "values fit" in text and "(best)" in text
    assert run_job(ListsRequest(str(SEARCH), None), progress=no_progress, cancelled=lambda: True) is None
    # read under the size setting the main search used (hpLsp.maxFileSizeKb): a file over it is not searched
    small = len(SEARCH.read_bytes()) - 1
    assert run_job(ListsRequest(str(SEARCH), None, max_bytes=small), progress=no_progress, cancelled=never) is None


def test_list_facts_price_on_the_settings_the_search_used() -> None:
    """The list hover's figures sit beside the best plan's: priced with the same settings (a framework setting
    here), not the file's bare defaults."""
    from hp_lsp.search_job import ListsRequest, run_job
    from hp_lsp.settings import Settings

    megatron = Settings(framework="megatron").overrides()
    out = run_search(SearchRequest(str(SEARCH), None, megatron), progress=no_progress, cancelled=never)
    assert out.result is not None and out.result.best is not None and out.result.best.framework == "megatron"
    best = out.result.best
    facts = run_job(ListsRequest(str(SEARCH), None, overrides=megatron), progress=no_progress, cancelled=never)
    bare = run_job(ListsRequest(str(SEARCH), None), progress=no_progress, cancelled=never)
    assert facts is not None and bare is not None
    fastest = min(t for t in facts.values["tp"].values() if t is not None)
    assert fastest <= best.step_time_s <= fastest * (1 + (out.result.band or 0.0))
    assert facts.values["tp"] != bare.values["tp"]  # the defaults price another stack


def test_a_train_yaml_searched_anew_reads_its_search_config_with_the_settings() -> None:
    """When the check's reads do not travel (the text moved on), the search job reads the train.yaml's search
    config again, with the settings its own check took: a framework setting stays the stack searched."""
    from hp_lsp.analysis import search_config_cluster
    from hp_lsp.settings import Settings

    megatron = Settings(framework="megatron").overrides()
    overrides, space = search_config_cluster(str(SEARCH), overrides=megatron)
    assert space is not None and space.config is not None and space.config.run.framework == "megatron"
    for settings, stack in ((megatron, "megatron"), (None, "hyperparallel")):
        out = run_search(SearchRequest(str(TRAIN), None, overrides, space_path=str(SEARCH), space_overrides=settings),
                         progress=no_progress, cancelled=never)
        assert out.result is not None and out.result.best is not None and out.result.best.framework == stack


def test_widen_a_list_no_fitting_plan_meets() -> None:
    """HP601 (from the search) carries the values that fit; the fix widens the list with the nearest."""
    from hp_lsp.features.code_actions import fixes_for

    text = SEARCH.read_text().replace("tp: [1, 2, 4, 8]", "tp: [1]").replace("memory_limit_gb: 76", "memory_limit_gb: 6")
    path = SEARCH.parent / "tight.yaml"
    out = run_search(SearchRequest(str(path), text, None), progress=no_progress, cancelled=never)
    refusal = next(d for d in out.diagnostics if d.code == "HP601")
    (fix,) = fixes_for(text, refusal.path, refusal.data)
    # at 6 GB tp 2 no longer fits since the loss is priced at its own peak (12 B per logit, eager fp32)
    assert fix.title == "Widen `tp` to [1, 4, 8]"
    assert "tp: [1, 4, 8]" in apply_edits(text, fix.edits)
    # Relocated from another file: no fix against this text.
    assert fixes_for(text, refusal.path, {**refusal.data, "file": "/elsewhere/search.yaml"}) == []


def test_a_fix_at_another_key_of_the_same_file() -> None:
    """`set_at` (HP422: the vpp a layer layout sets) edits the key it names, not the one the finding is at; data
    a client echoes back malformed gets no fix and no exception."""
    from hp_lsp.features.code_actions import fixes_for

    text = "accelerator:\n  pp_size: 8\n  pp_interleave_num: 2  # interleaved\n  layout: Et|tL\n"
    (fix,) = fixes_for(text, "accelerator.layout", {"set_at": {"path": "accelerator.pp_interleave_num", "value": 4}})
    assert fix.title == "Set `pp_interleave_num` to 4" and fix.preferred
    assert apply_edits(text, fix.edits) == text.replace("pp_interleave_num: 2", "pp_interleave_num: 4")
    for junk in ("x", {"path": 3, "value": 4}, {"path": "accelerator.pp_interleave_num"}, [1],
                 {"path": "accelerator.pp_interleave_num", "value": [1, {"a": 2}]}):
        assert fixes_for(text, "accelerator.layout", {"set_at": junk}) == []


def test_search_config_shows_its_train_yaml_stated_plan() -> None:
    _, st = state_for(SEARCH)
    assert st.analysis is not None and st.search is not None and st.search.stated is not None
    titles = [lens.title for lens in code_lens.lenses(st, st.analysis.entries)]
    assert titles[0].startswith("Best: ") and titles[1].startswith("Stated (train_yaml): ")
    text = SEARCH.read_text()
    got = hover.hover_markdown(st, st.analysis.entries, *_pos(text, "pp: auto"))
    assert got and "| | stated | best |" in got and "faster" in got


def test_search_job_reads_the_linked_train_yaml_buffer() -> None:
    """A search config's search (in the worker) takes the open train.yaml's unsaved buffer, passed as a plain
    dict with the job, over the disk: the stated plan it prices and the advice's position follow it."""
    disk = TRAIN.read_text()
    buffer = "# unsaved edit\n" + disk.replace("tp_size: 8", "tp_size: 4")

    def search(texts: dict[str, str] | None) -> SearchOutcome:
        req = SearchRequest(str(SEARCH), SEARCH.read_text(), None, texts=texts)
        return run_search(pickle.loads(pickle.dumps(req)), progress=no_progress, cancelled=never)

    on_disk, edited = search(None), search({str(TRAIN): buffer})
    assert on_disk.stated is not None and on_disk.stated.strategy.tp == 8
    assert edited.stated is not None and edited.stated.strategy.tp == 4
    disk_line = _pos(disk, "tp_size:")[0]
    advice = [d for d in edited.diagnostics if d.file == str(TRAIN)]
    assert advice and all(d.range.start.line == disk_line + 1 for d in advice), advice


def test_the_hover_says_the_best_plans_band_where_its_basis_differs() -> None:
    """The plan table explains the stated plan's band and, where the best plan's rests on something else (a
    context parallelism no run checked is one plan's alone), the best plan's too; one line where they agree."""
    from dataclasses import replace

    from engine.check import check_file
    from engine.cost import estimate_config

    runs = Path(__file__).resolve().parents[2] / "benchmarks" / "calibration_runs"
    config = check_file(str(runs / "llama31-405b-128xgb200-nemo" / "search.yaml")).config
    assert config is not None and config.stated is not None
    stated, _ = estimate_config(config)
    assert stated is not None and stated.band_basis
    same = hover.plan_table(stated, stated)
    assert same.count("about four times out of five") == 1
    wider = replace(stated, step_spread=stated.step_spread + 0.2,
                    band_basis=(*stated.band_basis, "context parallelism (ring) over 4 ranks, more than any run "
                                                    "it was checked on (2): first contact +25%"))
    both = hover.plan_table(stated, wider)
    assert both.count("about four times out of five") == 2
    assert "the best plan's step should fall within" in both and "(ring) over 4 ranks" in both


def test_the_layer_layout_hover_reads_as_the_stages_it_builds(tmp_path: Path) -> None:
    """Hovering Megatron-Core's layer layout shows the stated plan's stages by virtual chunks in words, identical
    stages grouped, above the plan table."""
    train = bridge_dsv3_train(tmp_path)
    (tmp_path / "search.yaml").write_text(
        "train_yaml: ./train.yaml\ncluster: {num_nodes: 128, cards_per_node: 8, device_type: H100}\n"
        "parallelism: {dp: 64, fsdp: 1, tp: 2, pp: 8, cp: 1, ep: 64, etp: 1, vpp: 4, micro_batch_size: 1}\n"
        "constraint: {global_batch_size: 4096}\nestimator: {framework: megatron}\n")
    _, st = state_for(train, search=False, space=tmp_path / "search.yaml")
    assert st.analysis is not None
    got = hover.hover_markdown(st, st.analysis.entries, *_pos(train.read_text(), "pipeline_model_parallel_layout"))
    assert got is not None and "**32 chunks**: pp 8 × vpp 4" in got
    assert "| 0 | embedding, decoder | decoder×2 | decoder×2 | decoder×2 |" in got
    assert "| 1-6 | decoder×2 | decoder×2 | decoder×2 | decoder×2 |" in got
    assert "| 7 | decoder×2 | decoder×2 | decoder×2 | mtp, loss |" in got
    assert "GiB" in got  # the plan's own hover follows


def test_the_model_hover_names_a_hybrid_models_layer_kinds(tmp_path: Path) -> None:
    """A hybrid pattern's kinds as the planner read them, beside its parameter count (Nemotron 3 Nano: 31.58 B)."""
    path = tmp_path / "search.yaml"
    path.write_text(NANO)
    _, st = state_for(path, search=False)
    assert st.analysis is not None
    shown = hover.hover_markdown(st, st.analysis.entries, *_pos(NANO, "hybrid_override_pattern"))
    assert shown and "**31.58 B** parameters · 3.58 B active per token" in shown
    assert "52 layers · hidden 2688 · 32 heads (2 KV) (23 Mamba-2, 6 attention, 23 MoE) · 128 experts" in shown


def test_search_job_edits_write_the_recompute_modules_the_search_chose(tmp_path: Path) -> None:
    """`recompute_modules: auto` (engine.search.modules): the editor's "Apply optimal strategy" writes the modules
    the best plan was priced with, as `hp-plan apply` does (it wrote the strategy alone, a plan the search did not
    price)."""
    space = tmp_path / "search.yaml"
    space.write_text(SEARCH.read_text().replace("train_yaml: ./train.yaml", f"train_yaml: {TRAIN}")
                     .replace("recompute: auto", "recompute: selective\nrecompute_modules: auto")
                     + "estimator: {framework: megatron}\n")
    text = TRAIN.read_text()
    out = run_search(SearchRequest(str(TRAIN), text, cluster_from_search_config(str(space)), space_path=str(space)),
                     progress=no_progress, cancelled=never)
    assert out.result is not None and out.result.best is not None and out.edits, out.edit_error
    chosen = out.result.best.recompute_modules
    assert chosen
    new = apply_edits(text, out.edits)
    assert f"recompute_modules: [{', '.join(chosen)}]" in new


OFFLOAD_TRAIN = """\
model:
  name: llama3-8b
  pretrained_model_name_or_path: meta-llama/Llama-3.1-8B
  torch_dtype: bfloat16
training: {global_batch_size: 64, micro_batch_size: 1}
accelerator: {tp_size: 1, pp_size: 4, cp_size: 1}
dataset: {data_transform: {max_seq_len: 32768}}
"""
OFFLOAD_SEARCH = """\
train_yaml: ./train.yaml
cluster: {num_nodes: 1, cards_per_node: 8, device_type: H100}
parallelism: {tp: [1, 2, 4, 8], pp: auto, cp: 1, ep: 1, vpp: 1, micro_batch_size: 1}
constraint: {global_batch_size: 64, memory_limit_gb: 76}
recompute: per_layer
offload: true
"""


def test_apply_in_the_editor_writes_the_plan_the_trainer_runs(tmp_path: Path) -> None:
    """The best plan offloads layers no trainer key states (engine.search.written): the lens shows it without an
    Apply, a second lens offers the fastest plan without offload, and the Apply edits write that one."""
    train, search = tmp_path / "train.yaml", tmp_path / "search.yaml"
    train.write_text(OFFLOAD_TRAIN)
    search.write_text(OFFLOAD_SEARCH)
    _, st = state_for(train, space=search)
    assert st.search is not None and st.search.result is not None and st.search.written is not None
    best, written = st.search.result.best, st.search.written.estimate
    assert best is not None and best.offloaded_gib and written is not None and not written.offloaded_gib
    assert st.analysis is not None
    titles = {lens.title: lens.command for lens in code_lens.lenses(st, st.analysis.entries)}
    assert any(t.startswith("Best: ") and "no key" in t and not c for t, c in titles.items()), titles
    assert any(t.startswith("Without offload: ") and c == "hpLsp.applyOptimalStrategy" for t, c in titles.items())
    edits, what = optimal_edits(st, OFFLOAD_TRAIN)
    assert edits and what == written.short()
    assert written.strategy != best.strategy  # the edits write the plan without offload, not the best with it off
    assert edits == best_edits(OFFLOAD_TRAIN, written, str(train))[0] != best_edits(OFFLOAD_TRAIN, best, str(train))[0]


def test_a_stale_search_is_shown_but_never_applied(tmp_path: Path) -> None:
    """After an unsaved edit of a value the search is of the saved text: written into the buffer it would put back
    what the user changed (a global batch edited to 512 went back to the searched 64). Apply refuses with the reason
    (an edit of comments or blank lines leaves the values, and the plan applies), the lens says the plan is stale,
    and the search's findings say they are of the saved version."""
    session, st = state_for(TRAIN, space=SEARCH)
    text = TRAIN.read_text().replace("global_batch_size: 512", "global_batch_size: 64")
    assert text != TRAIN.read_text()
    session.change(st.uri, 2)
    session.record_analysis(st.uri, st.generation, analyse(str(TRAIN), text, 2,
                                                           overrides=cluster_from_search_config(str(SEARCH)),
                                                           max_file_size_kb=1024))
    assert st.search_stale and st.analysis is not None
    edits, why = optimal_edits(st, text)
    assert edits is None and "save to search them again" in why
    best = [lens for lens in code_lens.lenses(st, st.analysis.entries) if lens.title.startswith("Best:")]
    assert best and "stale" in best[0].title
    found = [d for d in diagnostics.collect(st) if d.code in ("HP610", "HP611")]
    assert found and all(d.message.endswith(diagnostics.STALE_NOTE) for d in found)


def test_a_trace_is_never_written_over_a_file_the_document_read_or_an_open_one(tmp_path: Path) -> None:
    """hpLsp.savePlanTrace from the train.yaml named its search config as the target and replaced it with a trace:
    the files the document's analysis read and every open document are kept (Session.kept_files)."""
    import dataclasses

    from hp_lsp.features import plan

    session, st = state_for(TRAIN, space=SEARCH)
    assert st.analysis is not None  # the scheduler notes the search config that gives the cluster, as here
    st.analysis = dataclasses.replace(st.analysis, cluster_source=str(SEARCH))
    other = tmp_path / "notes.yaml"
    other.write_text("a: 1\n")
    session.open(other.as_uri(), str(other), 1)
    kept = session.kept_files(st.uri)
    assert str(other) in kept and str(TRAIN) in kept and str(SEARCH) in kept  # the search config, though closed
    choice = plan.choose_for_command(st.uri, st, [st.uri, str(other)], which_at=2)
    assert isinstance(choice, plan.PlanChoice)
    answer = plan.save_trace(choice.config, choice.estimate, str(other), kept)
    assert "error" in answer and other.read_text() == "a: 1\n"


def test_a_layout_edit_leaves_the_searched_plan_applicable() -> None:
    """Comments and blank lines change no value: the stale search still applies (its edits rebuilt on the text)."""
    session, st = state_for(TRAIN, space=SEARCH)
    text = "# a note\n" + TRAIN.read_text() + "\n\n"
    session.change(st.uri, 2)
    session.record_analysis(st.uri, st.generation, analyse(str(TRAIN), text, 2,
                                                           overrides=cluster_from_search_config(str(SEARCH)),
                                                           max_file_size_kb=1024))
    assert st.search_stale
    edits, _what = optimal_edits(st, text)
    assert edits


def test_apply_compares_the_buffers_now_with_every_file_the_search_read() -> None:
    """Before the next check lands (the edit just typed) the live buffer decides: an edited global batch refuses the
    plan at once; and an edit of the other file the search read (the search config's tp list) refuses it too,
    though the train.yaml itself did not change (both applied the old plan before)."""
    session, st = state_for(TRAIN, space=SEARCH)
    assert st.search is not None and {p for p, _fp in st.search.read} >= {str(TRAIN), str(SEARCH)}
    typed = TRAIN.read_text().replace("global_batch_size: 512", "global_batch_size: 64")
    session.change(st.uri, 2)  # typed; its check not back yet
    edits, why = optimal_edits(st, typed, None, {str(TRAIN): typed})
    assert edits is None and "earlier version" in why
    _, st2 = state_for(TRAIN, space=SEARCH)
    search_now = SEARCH.read_text().replace("tp: [1, 2, 4, 8]", "tp: [8]")
    assert search_now != SEARCH.read_text()
    edits, why = optimal_edits(st2, TRAIN.read_text(), None, {str(TRAIN): TRAIN.read_text(), str(SEARCH): search_now})
    assert edits is None and "earlier version" in why
    edits, _ = optimal_edits(st2, TRAIN.read_text(), None, {str(TRAIN): TRAIN.read_text(), str(SEARCH): SEARCH.read_text()})
    assert edits


def test_apply_on_a_file_over_the_size_limit_says_why() -> None:
    """A file over hpLsp.maxFileSizeKb is not searched: Apply says that, not "save the file to search" (saving
    would not search it either), and after the search it had before it grew it still writes nothing."""
    session, st = state_for(TRAIN, space=SEARCH)
    text = TRAIN.read_text()
    assert optimal_edits(st, text)[0]  # searched while within the limit
    session.change(st.uri, 2)
    session.record_analysis(st.uri, st.generation, analyse(str(TRAIN), text, 2,
                                                           overrides=cluster_from_search_config(str(SEARCH)),
                                                           max_file_size_kb=1))
    assert st.analysis is not None and st.analysis.too_large
    edits, why = optimal_edits(st, text)
    assert edits is None and "hpLsp.maxFileSizeKb" in why


def test_a_global_batch_of_zero_offers_the_batch_searched_at(tmp_path: Path) -> None:
    """HP114's quick fix writes the train.yaml's batch into the search config, so upstream's search and hp-plan's
    search the same batch."""
    from engine.check import check_file

    llama = LLAMA
    (tmp_path / "train.yaml").write_text((llama / "train.yaml").read_text())
    text = (llama / "search.yaml").read_text()
    line = next(ln for ln in text.splitlines() if ln.strip().startswith("global_batch_size:"))
    text = text.replace(line, line.split(":")[0] + ": 0")
    (tmp_path / "search.yaml").write_text(text)
    (d,) = [d for d in check_file(str(tmp_path / "search.yaml")).diagnostics if d.code == "HP114"]
    fix = fix_for(text, d.path or "", dict(d.data))
    assert fix is not None and line.split(":")[0] + ": 512" in apply_edits(text, fix.edits)
