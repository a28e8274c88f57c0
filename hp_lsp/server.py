"""The language server: the LanguageServer subclass and feature registration, nothing else.

Each handler delegates to a feature module (features/) or the scheduler; state lives in session.py; the
search runs in the worker process (worker.py). Handlers take their first parameter named `ls` (pygls
injects the server by that name: [LSP] §1).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import logging
import os
import sys
import traceback
from collections.abc import Callable
from typing import Any, TypeVar

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from hp_lsp import __version__
from hp_lsp.documents import HpProtocol
from hp_lsp.features import calibration, code_actions, code_lens, completion, hover, plan, symbols
from hp_lsp.features.progress import SearchProgress
from hp_lsp.outline import Entry, scan
from hp_lsp.positions import from_client_position
from hp_lsp.scheduler import Scheduler
from hp_lsp.search_job import run_job
from hp_lsp.session import Session
from hp_lsp.settings import SECTION, section_of
from hp_lsp.worker import SearchWorker

log = logging.getLogger(__name__)
WATCH_ID = "hp-lsp-watch-yaml"


class HpLanguageServer(LanguageServer):
    def __init__(self, *, search_fn: Any = run_job) -> None:
        super().__init__("hp-lsp", __version__, protocol_cls=HpProtocol)  # LSP lines, no leak: documents.py
        self.session = Session()
        self.scheduler = Scheduler(self)
        self.worker = SearchWorker(search_fn, self.scheduler.search_done, on_start=self.scheduler.search_started,
                                   on_progress=self.scheduler.search_progress)
        self.search_progress = SearchProgress(self, on_cancel=self.worker.cancel)
        self.loop: asyncio.AbstractEventLoop | None = None

    def call_soon(self, fn: Any, *args: Any) -> None:
        """Run `fn(*args)` on the event loop (from the worker's thread); dropped once the loop is gone."""
        loop = self.loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile (exit)
                loop.call_soon_threadsafe(fn, *args)

    def log(self, kind: types.MessageType, message: str) -> None:
        log.warning("%s", message) if kind <= types.MessageType.Warning else log.info("%s", message)
        with contextlib.suppress(Exception):  # the stream is closed (exit): stderr has it
            self.window_log_message(types.LogMessageParams(type=kind, message=message))

    def report_server_error(self, error: Exception, source: Any) -> None:
        """Errors go to the log, never to a popup: a storm of dialogs while typing helps no one."""
        self.log(types.MessageType.Error, f"hp-lsp internal error: {error!r}")

    def stop_worker(self) -> None:
        self.worker.shutdown()
        self.scheduler.shutdown()

    # capability helpers
    def supports_configuration(self) -> bool:
        ws = self.client_capabilities.workspace
        return bool(ws and ws.configuration)

    def supports_watched_files_registration(self) -> bool:
        ws = self.client_capabilities.workspace
        return bool(ws and ws.did_change_watched_files and ws.did_change_watched_files.dynamic_registration)


F = TypeVar("F", bound=Callable[..., Any])


def answer_or(default: Any) -> Callable[[F], F]:
    """A request handler that fails answers `default` and logs the traceback: editors turn request errors
    into popups, and a hover on a half-typed key is no reason for one."""

    def wrap(fn: F) -> F:
        if inspect.iscoroutinefunction(fn):
            @functools.wraps(fn)
            async def ainner(ls: HpLanguageServer, params: Any) -> Any:
                try:
                    return await fn(ls, params)
                except Exception:
                    ls.log(types.MessageType.Error, f"hp-lsp: {fn.__name__} failed:\n{traceback.format_exc()}")
                    return default

            return ainner  # type: ignore[return-value]

        @functools.wraps(fn)
        def inner(ls: HpLanguageServer, params: Any) -> Any:
            try:
                return fn(ls, params)
            except Exception:
                ls.log(types.MessageType.Error, f"hp-lsp: {fn.__name__} failed:\n{traceback.format_exc()}")
                return default

        return inner  # type: ignore[return-value]

    return wrap


def create_server(*, search_fn: Any = run_job) -> HpLanguageServer:
    server = HpLanguageServer(search_fn=search_fn)

    # -- lifecycle ---------------------------------------------------------------------------------------
    @server.feature(types.INITIALIZE)
    def initialize(ls: HpLanguageServer, params: types.InitializeParams) -> None:
        ls.session.update_settings(initialization=section_of(params.initialization_options))

    @server.feature(types.INITIALIZED)
    async def initialized(ls: HpLanguageServer, params: types.InitializedParams) -> None:
        ls.loop = asyncio.get_running_loop()
        ls.worker.warm_up()
        errors = ls.session.sources.merged().errors
        if ls.supports_configuration():
            await pull_configuration(ls)
        elif errors:
            show_settings_errors(ls, errors)
        if ls.supports_watched_files_registration():
            try:
                await ls.client_register_capability_async(types.RegistrationParams(registrations=[
                    types.Registration(
                        id=WATCH_ID,
                        method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                        register_options=types.DidChangeWatchedFilesRegistrationOptions(watchers=[
                            types.FileSystemWatcher(glob_pattern="**/*.{yaml,yml}"),
                        ]),
                    )
                ]))
            except Exception as exc:
                ls.log(types.MessageType.Warning, f"hp-lsp: could not watch files: {exc}")

    @server.feature(types.SHUTDOWN)
    def shutdown(ls: HpLanguageServer, params: None) -> None:
        ls.stop_worker()

    @server.feature(types.EXIT)
    def exit_(ls: HpLanguageServer, params: None) -> None:
        """Leave now. After the worker is gone, the interpreter's own teardown (joining pygls' stdin reader
        thread, finalising numpy) measured 0.2-0.7 s; everything the client needs was written and flushed,
        so the process ends here with the code the spec asks for (0 after shutdown, else 1)."""
        ls.stop_worker()
        ls.loop = None
        code = 0 if getattr(ls.protocol, "_shutdown", False) else 1
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        os._exit(code)

    # -- documents -----------------------------------------------------------------------------------
    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: HpLanguageServer, params: types.DidOpenTextDocumentParams) -> None:
        ls.scheduler.opened(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: HpLanguageServer, params: types.DidChangeTextDocumentParams) -> None:
        ls.scheduler.changed(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE, types.SaveOptions(include_text=False))
    def did_save(ls: HpLanguageServer, params: types.DidSaveTextDocumentParams) -> None:
        ls.scheduler.saved(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: HpLanguageServer, params: types.DidCloseTextDocumentParams) -> None:
        ls.scheduler.closed(params.text_document.uri)

    @server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def did_change_watched_files(ls: HpLanguageServer, params: types.DidChangeWatchedFilesParams) -> None:
        ls.scheduler.files_changed([c.uri for c in params.changes])

    # -- settings ------------------------------------------------------------------------------------
    @server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def did_change_configuration(ls: HpLanguageServer, params: types.DidChangeConfigurationParams) -> None:
        pushed = section_of(params.settings)
        changed, errors = ls.session.update_settings(did_change=pushed)
        if ls.supports_configuration():
            changed = await pull_configuration(ls) or changed
        elif errors:
            show_settings_errors(ls, errors)
        if changed:
            ls.scheduler.settings_changed()

    # -- language features ---------------------------------------------------------------------------
    @server.feature(types.TEXT_DOCUMENT_HOVER)
    @answer_or(None)
    def on_hover(ls: HpLanguageServer, params: types.HoverParams) -> types.Hover | None:
        state = ls.session.get(params.text_document.uri)
        if state is None or state.analysis is None or not state.analysis.is_config:
            return None
        doc = ls.workspace.get_text_document(params.text_document.uri)
        pos = from_client_position(doc.lines, doc.position_codec, params.position)
        if state.analysis.calibration is not None:  # a RUNS file
            text = calibration.runs_hover(state.analysis.calibration, pos.line)
        else:
            text = hover.hover_markdown(state, current_entries(ls, state.analysis, doc), pos.line, pos.character)
        if not text:
            return None
        return types.Hover(contents=types.MarkupContent(kind=hover_kind(ls), value=text))

    @server.feature(types.TEXT_DOCUMENT_COMPLETION, types.CompletionOptions(trigger_characters=[":"]))
    @answer_or(None)
    def on_completion(ls: HpLanguageServer, params: types.CompletionParams) -> types.CompletionList | None:
        state = ls.session.get(params.text_document.uri)
        if state is None:
            return None
        if state.analysis is not None and not state.analysis.is_config and not config_name(state.path):
            return None  # other YAML is left alone; a new, still empty train*.yaml / *search*.yaml is not
        doc = ls.workspace.get_text_document(params.text_document.uri)
        pos = from_client_position(doc.lines, doc.position_codec, params.position)
        line_text = doc.lines[pos.line].rstrip("\r\n") if pos.line < len(doc.lines) else ""
        items = completion.complete(current_entries(ls, None, doc), line_text, pos.line, pos.character)
        return types.CompletionList(is_incomplete=False, items=items)

    @server.feature(types.TEXT_DOCUMENT_DOCUMENT_SYMBOL)
    @answer_or([])
    async def on_symbols(ls: HpLanguageServer, params: types.DocumentSymbolParams) -> list[types.DocumentSymbol]:
        doc = ls.workspace.get_text_document(params.text_document.uri)
        state = ls.session.get(params.text_document.uri)
        analysis = state.analysis if state is not None else None
        if analysis is not None and analysis.version == doc.version and not analysis.too_large:
            entries: tuple[Entry, ...] = tuple(analysis.entries)
        else:  # scanning a large text takes seconds: off the loop, and only as far as the outline shows
            entries = await ls.scheduler.off_loop(current_entries, ls, analysis, doc, symbols.MAX_SYMBOLS)
        return symbols.document_symbols(entries, doc.lines, doc.position_codec)

    @server.feature(types.TEXT_DOCUMENT_CODE_LENS)
    @answer_or([])
    def on_code_lens(ls: HpLanguageServer, params: types.CodeLensParams) -> list[types.CodeLens]:
        from hp_lsp.positions import to_client_range

        state = ls.session.get(params.text_document.uri)
        if state is None or state.analysis is None or not state.analysis.is_config:
            return []
        doc = ls.workspace.get_text_document(params.text_document.uri)
        return [
            types.CodeLens(range=to_client_range(doc.lines, doc.position_codec, lens.range),
                           command=types.Command(title=lens.title, command=lens.command,
                                                 arguments=list(lens.arguments) or None))
            for lens in [*code_lens.lenses(state, current_entries(ls, state.analysis, doc)),
                         *calibration.ratios_lenses(state)]
        ]

    @server.feature(types.TEXT_DOCUMENT_CODE_ACTION, types.CodeActionOptions(
        code_action_kinds=[types.CodeActionKind.QuickFix, code_actions.SOURCE_KIND]))
    @answer_or([])
    async def on_code_action(ls: HpLanguageServer,
                             params: types.CodeActionParams) -> list[types.CodeAction | types.Command]:
        from hp_lsp.features.code_actions import code_actions_for

        return await code_actions_for(ls, params)

    @server.command(code_actions.APPLY_COMMAND)
    async def apply_optimal(ls: HpLanguageServer, *args: Any) -> dict[str, Any]:
        from hp_lsp.features.code_actions import apply_optimal_command

        try:
            return await apply_optimal_command(ls, args)
        except Exception as exc:  # a reason, never a JSON-RPC error with a traceback
            ls.log(types.MessageType.Error, f"hp-lsp: apply failed:\n{traceback.format_exc()}")
            return {"applied": False, "reason": f"internal error: {exc!r}"}

    @server.command(code_actions.CREATE_SEARCH_CONFIG_COMMAND)
    async def create_search_config(ls: HpLanguageServer, *args: Any) -> dict[str, Any]:
        from hp_lsp.features.code_actions import create_search_config_command

        return await create_search_config_command(ls, args)

    @server.command(plan.SHOW_PLAN_COMMAND)
    async def show_plan(ls: HpLanguageServer, *args: Any) -> dict[str, Any]:
        return await plan.show_plan_command(ls, args)

    @server.feature(types.WINDOW_WORK_DONE_PROGRESS_CANCEL)
    def progress_cancel(ls: HpLanguageServer, params: types.WorkDoneProgressCancelParams) -> None:
        ls.search_progress.cancelled(params.token)

    return server


def config_name(path: str | None) -> bool:
    """train*.yaml and *search*.yaml: the names the editor clients attach to (editors/)."""
    base = os.path.basename(path or "").lower()
    return base.endswith((".yaml", ".yml")) and (base.startswith("train") or "search" in base)


def current_entries(ls: HpLanguageServer, analysis: Any, doc: Any, limit: int | None = None) -> tuple[Entry, ...]:
    """The outline of the document as it is now: the last analysis' when it is of this version, else a fresh
    scan (a few ms for a real config); nothing for texts over maxFileSizeKb."""
    if analysis is not None and analysis.version == doc.version and not analysis.too_large:
        return tuple(analysis.entries)
    source = doc.source
    if len(source) > ls.session.settings.max_file_size_kb * 1024:
        return ()
    return tuple(scan(source, limit))


def hover_kind(ls: HpLanguageServer) -> types.MarkupKind:
    td = ls.client_capabilities.text_document
    formats = td.hover.content_format if td and td.hover else None
    if formats and types.MarkupKind.Markdown not in formats:
        return types.MarkupKind.PlainText
    return types.MarkupKind.Markdown


async def pull_configuration(ls: HpLanguageServer) -> bool:
    """Ask the client for section hpLsp (only called when it advertises workspace/configuration)."""
    try:
        res = await asyncio.wait_for(ls.workspace_configuration_async(
            types.ConfigurationParams(items=[types.ConfigurationItem(section=SECTION)])), timeout=5)
    except Exception as exc:
        ls.log(types.MessageType.Warning, f"hp-lsp: workspace/configuration failed: {exc}")
        return False
    value = res[0] if res else None
    changed, errors = ls.session.update_settings(configuration=section_of(value))
    if errors:
        show_settings_errors(ls, errors)
    return changed


def show_settings_errors(ls: HpLanguageServer, errors: tuple[str, ...]) -> None:
    ls.window_show_message(types.ShowMessageParams(type=types.MessageType.Warning, message="; ".join(errors)))
