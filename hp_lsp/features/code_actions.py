"""Code actions: "Apply optimal strategy" and the per-diagnostic quick fixes, as minimal TextEdits.

Pure builders return engine TextEdits (code points) against a given text; the handler converts them to a
WorkspaceEdit for the client's capabilities (edits.py). Every edit is computed against the document's
current text and sent with its version: an edit for an older text is never offered.

Quick fixes read the fix data the engine put in `Diagnostic.data` (echoed back by the client in
`context.diagnostics[].data`):
  {"replace_key": "tp_size"}      rename a mistyped key
  {"nearest_valid": 8}            set the value to the nearest valid one
  {"widen": [1, 2, 4, 8, 16]}     widen a candidate list so a fitting plan is inside it
  {"set_at": {"path": "accelerator.pp_interleave_num", "value": 4}}
                                  set another key of the same file (HP422: the vpp a layer layout sets)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lsprotocol import types
from pygls.uris import from_fs_path
from pygls.workspace.position_codec import PositionCodec

from engine.edit import EditResult, plan_edits, rename_key, set_value, widen_list
from engine.edit.text import split_lines
from engine.positions import TextEdit
from hp_lsp.client import ClientFeatures
from hp_lsp.edits import normalise, to_lsp_edits, workspace_edit
from hp_lsp.features.diagnostics import SOURCE
from hp_lsp.features.new_search_config import create_search_config_action, wants_search_config
from hp_lsp.linked import LinkedText
from hp_lsp.search_job import values_fingerprint
from hp_lsp.session import DocState
from hp_lsp.settings import Settings
from hp_lsp.workspace import same_path

APPLY_TITLE = "Apply optimal strategy"
APPLY_COMMAND = "hpLsp.applyOptimalStrategy"
SOURCE_KIND = "source.applyOptimalStrategy"
SEARCH_CODES = frozenset({"HP610", "HP611"})


@dataclass(frozen=True, slots=True)
class Fix:
    title: str
    edits: tuple[TextEdit, ...]
    kind: str = "quickfix"
    preferred: bool = False


def _fmt(value: Any) -> str:
    if isinstance(value, list | tuple):
        return "[" + ", ".join(map(str, value)) + "]"
    return str(value).lower() if isinstance(value, bool) else str(value)


def fixes_for(text: str, path: str, data: dict[str, Any]) -> list[Fix]:
    """The quick fixes a diagnostic's data asks for, computed against `text` (empty when none applies).

    Data keys the engine sets: `replace_key` (a mistyped or renamed key), `nearest_valid` / `replace_value`
    (a value), `set_at` (a value for another key of the same file, where the fault shows at one key and its
    fix belongs at another), HP601's `asked` + `fitting` (a candidate list that no fitting plan meets: widen it with the
    nearest fitting values), HP600's `suggested_global_batch_size`. A finding relocated from another file
    (`file` in its data) gets none: its path does not address this text.
    """
    if not path or data.get("file"):
        return []
    leaf = path.rsplit(".", 1)[-1]
    out: list[Fix] = []

    def add(title: str, result: EditResult, preferred: bool = False) -> None:
        edits, _ = normalise(result)
        if edits:
            out.append(Fix(title, tuple(edits), preferred=preferred))

    if "replace_key" in data:
        new = str(data["replace_key"])
        add(f"Rename `{leaf}` to `{new}`", rename_key(text, path, new), preferred=True)
    for key in ("nearest_valid", "replace_value"):
        if key in data and data[key] is not None:
            add(f"Set `{leaf}` to {_fmt(data[key])}", set_value(text, path, data[key]), preferred=True)
            break
    other = data.get("set_at")
    if isinstance(other, dict) and isinstance(other.get("path"), str) and isinstance(other.get("value"), int | str):
        at = other["path"]
        add(f"Set `{at.rsplit('.', 1)[-1]}` to {_fmt(other['value'])}", set_value(text, at, other["value"]),
            preferred=True)
    widen = data.get("widen")
    if widen is None and isinstance(data.get("asked"), list) and isinstance(data.get("fitting"), list):
        asked = [int(v) for v in data["asked"]]
        fresh = [int(v) for v in data["fitting"] if v not in asked]
        # The fitting values closest (by ratio) to what was asked: the smallest change that lets a plan in.
        fresh.sort(key=lambda v: min(abs(v / a - 1) if a else v for a in asked) if asked else v)
        widen = sorted(fresh[:3])
    if widen is not None:
        values = list(widen) if isinstance(widen, list | tuple) else [widen]
        shown = sorted({*[int(v) for v in data.get("asked", [])], *values}) if data.get("asked") else values
        add(f"Widen `{leaf}` to {_fmt(shown)}", widen_list(text, path, values))
    for value in data.get("suggested_global_batch_size") or ():
        add(f"Set `{leaf}` to {_fmt(value)}", set_value(text, path, value))
    return out


def fix_for(text: str, path: str, data: dict[str, Any]) -> Fix | None:
    """The first quick fix for a diagnostic's data, or None."""
    fixes = fixes_for(text, path, data)
    return fixes[0] if fixes else None


def optimal_edits(state: DocState, text: str, path: str | None = None, live: Mapping[str, str] | None = None
                  ) -> tuple[tuple[TextEdit, ...] | None, str]:
    """Edits writing the best plan into `text` (the current text of the train.yaml at `path`, by default the
    document's own), or why there are none.

    Uses the edits the worker pre-computed when the search ran on this very text; otherwise rebuilds them
    with the engine's round-trip writer against the current text.
    """
    outcome = state.search
    if state.analysis is not None and state.analysis.too_large:
        return None, "the file is over hpLsp.maxFileSizeKb, so it is not searched (HP005)"
    if outcome is None or outcome.result is None:
        return None, "no search result yet (save the file to search)"
    if _changed_since_search(state, text, path, live):
        # The plan was searched for other texts: written into these it would put back what the user has changed
        # since (a global batch edited after the save went back to the searched one). Comments and spacing aside.
        return None, "the search is of an earlier version of the files: save to search them again, then apply"
    # What the trainer runs as written (engine.search.written): the best, or the fastest plan without the offload
    # no trainer key states.
    best = outcome.written.estimate if outcome.written is not None else outcome.result.best
    if best is None:
        why = outcome.written.why if outcome.written is not None else None
        return None, why or "no strategy fits the budget"
    own = path is None or path == state.path
    if own and outcome.text == text and outcome.edits is not None:
        return outcome.edits, best.short()
    res = plan_edits(text, best, path=path or state.path)
    edits, error = normalise(res)
    if edits is None:
        return None, error or "cannot write the strategy"
    return tuple(edits), best.short()


def _changed_since_search(state: DocState, text: str, path: str | None,
                           live: Mapping[str, str] | None) -> bool:
    """Whether a file the search read now reads otherwise (hp_lsp.search_job.values_fingerprint): the target's
    `text` and the open buffers in `live` (path -> text; the document's own among them). A document edited since
    whose text is not among them counts as changed. An outcome that kept no fingerprints is stale as its version
    says."""
    outcome = state.search
    assert outcome is not None
    if not outcome.read:
        return state.search_stale
    now = {**(live or {}), (path or state.path or ""): text}
    if state.search_stale and state.path not in now:  # edited since, and its text now is not known here
        return True
    return any(values_fingerprint(now[p]) != fp for p, fp in outcome.read if p in now)


def apply_target(state: DocState) -> str | None:
    """The path "apply" writes to: a train.yaml itself, or the train.yaml a search config references; None
    for a search config without one (a strategy belongs in a train.yaml, never in the search config)."""
    analysis = state.good or state.analysis
    config = analysis.config if analysis is not None else None
    if config is not None and config.kind == "search":
        return config.train_yaml or None
    return state.path


@dataclass(frozen=True, slots=True)
class Target:
    """What "apply" edits: its URI, version (None for a file not open), current text and LSP lines; or the
    reason it cannot be read (`text` None)."""

    uri: str
    path: str
    version: int | None
    text: str | None
    lines: Sequence[str] = ()
    reason: str | None = None


def open_target(path: str, state: DocState, open_docs: Mapping[str, DocState],
                document: Callable[[str], Any]) -> Target | None:
    """The document "apply" edits (at `path`, from `apply_target`) when the editor holds it: the document
    itself, else the linked train.yaml's open buffer; None when it is not open (read it with `disk_target`)."""
    if path == state.path:
        doc = document(state.uri)
        return Target(state.uri, path, doc.version, doc.source, doc.lines)
    for uri, other in open_docs.items():
        if other.path and same_path(other.path, path):
            doc = document(uri)
            return Target(uri, path, doc.version, doc.source, doc.lines)
    return None


def disk_target(path: str, linked: LinkedText) -> Target:
    """The train.yaml "apply" edits, read from disk off the event loop (hp_lsp/linked.py), or why it cannot be."""
    uri = from_fs_path(path) or path
    if linked.text is None:
        return Target(uri, path, None, None, reason=linked.reason)
    return Target(uri, path, None, linked.text, tuple(split_lines(linked.text)))


# -- protocol side: pure builders over a snapshot of the request ------------------------------------------
@dataclass(frozen=True, slots=True)
class ActionRequest:
    """A code-action request as the handler snapshotted it on the loop: the document's text, version, LSP
    lines and position codec when asked, its state, the range and kinds asked for, the client's diagnostics,
    what the client can apply, and the settings (a new search config takes the cluster from them)."""

    uri: str
    text: str
    version: int | None
    lines: Sequence[str]
    codec: PositionCodec
    state: DocState
    range: types.Range
    only: tuple[str, ...]
    client_diagnostics: tuple[types.Diagnostic, ...]
    features: ClientFeatures
    settings: Settings

    def wanted(self, kind: str) -> bool:
        return not self.only or any(kind == k or kind.startswith(f"{k}.") for k in self.only)

    def ours(self) -> list[types.Diagnostic]:
        return relevant_diagnostics(self.state, self.range, self.client_diagnostics)

    def needs_target(self) -> bool:
        """Whether "Apply optimal strategy" is asked for (its target may have to be read from disk)."""
        quick = self.wanted("quickfix") and any(d.code in SEARCH_CODES for d in self.ours())
        return quick or self.wanted(SOURCE_KIND)


def code_actions(req: ActionRequest, target: Target | None) -> list[types.CodeAction | types.Command]:
    """Quick fixes for the diagnostics in the request, "Apply optimal strategy" (quick fix on the search
    diagnostics, source action anywhere; `target` is what it edits), "Create search config" when the
    cluster is unknown. Pure but not instant (it rewrites strategies): the handler runs it on the edit
    thread, so a rewrite of a large or hostile file never blocks the loop."""
    ours = req.ours()
    out: list[types.CodeAction | types.Command] = _quick_fixes(req, ours) if req.wanted("quickfix") else []
    search_diags = [d for d in ours if d.code in SEARCH_CODES] if req.wanted("quickfix") else []
    if not (search_diags or req.wanted(SOURCE_KIND)) or target is None or target.text is None:
        return out
    own = {req.state.path: req.text} if req.state.path else {}
    edits, what = optimal_edits(req.state, target.text, target.path, own)
    if not edits:
        return out
    title = f"{APPLY_TITLE}: {what}"
    edit = workspace_edit(req.features, target.uri, target.version, to_lsp_edits(edits, target.lines, req.codec))
    if search_diags:
        out.append(types.CodeAction(title=title, kind=types.CodeActionKind.QuickFix, diagnostics=search_diags,
                                    edit=edit, is_preferred=True))
    if req.wanted(SOURCE_KIND):
        out.append(types.CodeAction(title=title, kind=SOURCE_KIND, edit=edit))
    return out


def _quick_fixes(req: ActionRequest, ours: list[types.Diagnostic]) -> list[types.CodeAction | types.Command]:
    """One action per distinct fix: two findings on one value (HP403 and HP412 on tp_size) often ask for the
    same edit, which the menu would otherwise list twice; the action names both diagnostics."""
    out: list[types.CodeAction | types.Command] = []
    merged: dict[tuple[str, tuple[TextEdit, ...]], list[types.Diagnostic]] = {}
    for d in ours:
        data = d.data if isinstance(d.data, dict) else {}
        for fix in fixes_for(req.text, str(data.get("path", "")), data):
            named = merged.get((fix.title, fix.edits))
            if named is not None:
                named.append(d)  # the action made below holds this very list
                continue
            merged[(fix.title, fix.edits)] = named = [d]
            edit = workspace_edit(req.features, req.uri, req.version, to_lsp_edits(fix.edits, req.lines, req.codec))
            kind = types.CodeActionKind(fix.kind) if fix.kind in _KNOWN_KINDS else fix.kind
            out.append(types.CodeAction(title=fix.title, kind=kind, diagnostics=named, edit=edit,
                                        is_preferred=fix.preferred or None))
        if wants_search_config(str(d.code) if d.code else None, data) and req.state.path:
            out.append(create_search_config_action(req.features, req.settings, req.state, d))
    return out


_KNOWN_KINDS = {k.value for k in types.CodeActionKind}


def _touches(a: types.Range, b: types.Range) -> bool:
    """Ranges overlap or meet (a cursor at either end of a diagnostic is on it)."""
    return (a.start.line, a.start.character) <= (b.end.line, b.end.character) and \
        (b.start.line, b.start.character) <= (a.end.line, a.end.character)


def relevant_diagnostics(state: DocState, rng: types.Range,
                         asked_for: Sequence[types.Diagnostic]) -> list[types.Diagnostic]:
    """Our diagnostics a code-action request is about: the latest ones the server published that touch the
    range, then any of ours the client sent that are not among them.

    Why not only the request's `context.diagnostics`: a client computes that from its own view, which can
    predate the last publish (VS Code fires a request on every cursor move, cancels and re-sends as results
    arrive; a request that was composed before the search's diagnostics landed carries none of them). The
    server's own latest results answer the same question without that race (D-015)."""
    latest = [d for d in state.published if d.source == SOURCE and _touches(d.range, rng)]
    seen = {(str(d.code), d.range.start.line, d.range.start.character) for d in latest}
    asked = [d for d in asked_for if d.source == SOURCE
             and (str(d.code), d.range.start.line, d.range.start.character) not in seen]
    return latest + asked


def apply_answer(target: Target | None, edits: tuple[TextEdit, ...] | None, what: str, features: ClientFeatures,
                 codec: PositionCodec) -> tuple[types.WorkspaceEdit | None, dict[str, Any]]:
    """hpLsp.applyOptimalStrategy's edit to send, or (None, its answer): anything that stops it (a train_yaml
    that is a directory, a symlink loop, unreadable, missing, a URL, a refused rewrite) is {"applied": false,
    "reason": ...}, never a JSON-RPC error. With an edit, the answer is completed once the client applied it."""
    if target is None:
        return None, {"applied": False, "reason": "a search config without train_yaml has no strategy to rewrite"}
    if target.text is None:
        return None, {"applied": False, "reason": f"cannot read the train.yaml: {target.reason}"}
    if edits is not None and not edits:
        return None, {"applied": False, "strategy": what, "reason": f"the file already states the best plan ({what})"}
    if not edits:
        return None, {"applied": False, "reason": what}
    edit = workspace_edit(features, target.uri, target.version, to_lsp_edits(edits, target.lines, codec))
    return edit, {"strategy": what}


def uri_arg(args: Sequence[Any]) -> str | None:
    """The document URI a command's first argument names (a string, {"uri": ...} or an object with .uri)."""
    if not args:
        return None
    first = args[0]
    uri = first.get("uri") if isinstance(first, dict) else first if isinstance(first, str) else \
        getattr(first, "uri", None)
    return uri if isinstance(uri, str) else None  # {"uri": {...}} names no document
