"""The language server: the pygls server, its collaborators, and the handlers, registered from one table.

Each handler is a module-level function that snapshots what its request needs on the event loop, calls a
builder in features/ (pure over typed inputs) or the scheduler, and converts the result; `create_server`
registers them from `FEATURES` and `COMMANDS`, as pygls' examples and taplo do. State lives in session.py;
what the client can do is resolved once at `initialize` (client.py); the scheduler decides when to check,
search and publish (scheduler.py); the search runs in the worker process (worker.py); threads.py is the table
of where each handler's work runs and what it may touch. Handlers take their
first parameter named `ls` (pygls injects the server by that name: [LSP] §1).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import json
import os
import sys
import threading
import traceback
from collections.abc import Callable
from typing import Any, TypeVar

from lsprotocol import types
from pygls.io_ import StdoutWriter
from pygls.lsp.server import LanguageServer
from pygls.uris import from_fs_path

from hp_lsp import __version__
from hp_lsp.analysis import Analysis
from hp_lsp.client import Client, ClientFeatures
from hp_lsp.client_units import from_client_position, to_client_range
from hp_lsp.documents import HpProtocol
from hp_lsp.features import (
    calibration,
    code_actions,
    code_lens,
    completion,
    hover,
    new_search_config,
    plan,
    symbols,
)
from hp_lsp.features.plain_text import plain_text
from hp_lsp.features.progress import SearchProgress
from hp_lsp.linked import read_linked
from hp_lsp.outline import Entry, scan
from hp_lsp.scheduler import Scheduler
from hp_lsp.search_job import run_job
from hp_lsp.session import DocState, Session
from hp_lsp.settings import SECTION, section_of
from hp_lsp.threads import place_of
from hp_lsp.transport import Dispatcher, StdinSource, StreamSource, error_response, serve
from hp_lsp.worker import SearchWorker

WATCH_ID = "hp-lsp-watch-yaml"


class HpLanguageServer(LanguageServer):
    """The pygls server and the collaborators it wires together; it holds no logic of its own."""

    def __init__(self, *, search_fn: Any = run_job) -> None:
        super().__init__("hp-lsp", __version__, protocol_cls=HpProtocol)  # LSP lines, no leak: documents.py
        self.session = Session()
        self.client = Client(self)
        self.loop: asyncio.AbstractEventLoop | None = None
        # The worker's callbacks reach the scheduler, made just below (they fire only after a job is submitted).
        self.worker = SearchWorker(search_fn, lambda outcome: self.scheduler.search_done(outcome),
                                   on_start=lambda job: self.scheduler.search_started(job),
                                   on_progress=lambda job, f: self.scheduler.search_progress(job, f))
        self.search_progress = SearchProgress(self.work_done_progress, lambda: self.client.features.work_done_progress,
                                              self.worker.cancel)
        self.scheduler = Scheduler(session=self.session, workspace=lambda: self.workspace, client=self.client,
                                   jobs=self.worker, progress=self.search_progress, call_soon=self.call_soon,
                                   log=self.client.log)

    def call_soon(self, fn: Any, *args: Any) -> None:
        """Run `fn(*args)` on the event loop (from the worker's thread); dropped once the loop is gone."""
        loop = self.loop
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile (exit)
                loop.call_soon_threadsafe(fn, *args)

    def report_server_error(self, error: Exception, source: Any) -> None:
        """Errors go to the log, never to a popup: a storm of dialogs while typing helps no one."""
        self.client.log(types.MessageType.Error, f"hp-lsp internal error: {error!r}")

    def stop_worker(self) -> None:
        self.worker.shutdown()
        self.scheduler.shutdown()

    # -- transports: pygls' start_io/start_tcp with the bounded reader of transport.py ----------------------
    def dispatcher(self) -> Dispatcher:
        return Dispatcher(self.protocol, self.protocol._send_data,
                          lambda message: self.client.log(types.MessageType.Error, message))

    def start_io(self, stdin: Any = None, stdout: Any = None) -> None:
        """Serve one client on stdin/stdout until the end of input, `exit`, or a framing error."""
        self._stop_event = threading.Event()
        self.protocol.set_writer(StdoutWriter(stdout or sys.stdout.buffer))
        try:
            asyncio.run(serve(StdinSource(stdin or sys.stdin.buffer), self.dispatcher(), self._stop_event))
        except BrokenPipeError:
            pass  # the client went away: nothing is left to answer
        except (KeyboardInterrupt, SystemExit):
            pass
        finally:
            self.shutdown()

    def start_tcp(self, host: str, port: int) -> None:
        """Serve the first client that connects, and only it: a second connection is refused with a JSON-RPC
        error and closed (it would otherwise share, and take over, the first client's session). The process
        ends with its one client's connection, as with stdio."""
        self._stop_event = stop = threading.Event()
        busy = asyncio.Event()

        async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            if busy.is_set():
                await refuse_connection(writer)
                return
            busy.set()
            self.protocol.set_writer(writer)  # type: ignore[arg-type]
            try:
                await serve(StreamSource(reader), self.dispatcher(), stop)
            finally:
                self.shutdown()

        async def listen() -> None:
            self._server = await asyncio.start_server(connection, host, port)
            async with self._server:
                with contextlib.suppress(asyncio.CancelledError):
                    await self._server.serve_forever()

        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(listen())


TCP_BUSY = -32000  # a server error code: JSONRPC §5.1 leaves -32000..-32099 to the implementation


async def refuse_connection(writer: asyncio.StreamWriter) -> None:
    """Tell a second TCP client why it is not served, in a frame any LSP client reads, then close it."""
    body = json.dumps(error_response(None, TCP_BUSY, "hp-lsp serves one client per process and one is "
                                     "connected; start another `hp-lsp --tcp --port N` for this one")).encode()
    with contextlib.suppress(OSError):
        writer.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        await writer.drain()
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()


F = TypeVar("F", bound=Callable[..., Any])


def answer_or(default: Any) -> Callable[[F], F]:
    """A request handler that fails answers `default` and logs the traceback: editors turn request errors
    into popups, and a hover on a half-typed key is no reason for one."""

    def failed(ls: HpLanguageServer, fn: Callable[..., Any]) -> Any:
        ls.client.log(types.MessageType.Error, f"hp-lsp: {fn.__name__} failed:\n{traceback.format_exc()}")
        return default

    def wrap(fn: F) -> F:
        if inspect.iscoroutinefunction(fn):
            @functools.wraps(fn)
            async def ainner(ls: HpLanguageServer, params: Any) -> Any:
                try:
                    return await fn(ls, params)
                except Exception:
                    return failed(ls, fn)

            return ainner  # type: ignore[return-value]

        @functools.wraps(fn)
        def inner(ls: HpLanguageServer, params: Any) -> Any:
            try:
                return fn(ls, params)
            except Exception:
                return failed(ls, fn)

        return inner  # type: ignore[return-value]

    return wrap


def command_or(key: str, **fields: Any) -> Callable[[F], F]:
    """A workspace/executeCommand handler that fails answers `fields` and `key`: the reason, and logs the
    traceback: a JSON-RPC error would carry the traceback (and the server's paths) to the client, which shows it
    as a popup. Arguments of the wrong shape (`{"uri": {...}}`) are the usual cause."""

    def wrap(fn: F) -> F:
        @functools.wraps(fn)
        async def inner(ls: HpLanguageServer, *args: Any) -> Any:
            try:
                return await fn(ls, *args)
            except Exception as exc:
                ls.client.log(types.MessageType.Error, f"hp-lsp: {fn.__name__} failed:\n{traceback.format_exc()}")
                return {**fields, key: f"internal error: {exc!r}"}

        return inner  # type: ignore[return-value]

    return wrap


# -- lifecycle -----------------------------------------------------------------------------------------------
def initialize(ls: HpLanguageServer, params: types.InitializeParams) -> None:
    ls.client.features = ClientFeatures.resolve(params.capabilities)
    ls.session.update_settings(initialization=section_of(params.initialization_options))


async def initialized(ls: HpLanguageServer, params: types.InitializedParams) -> None:
    ls.loop = asyncio.get_running_loop()
    ls.worker.warm_up()
    errors = ls.session.sources.merged().errors
    if ls.client.features.configuration:
        # The client opens its documents right after `initialized`, while this request is in flight: a check
        # that ran first used the defaults, so the settings, once here, check them again (the cluster and
        # framework settings were ignored until the next edit).
        if await pull_configuration(ls):
            ls.scheduler.settings_changed()
    elif errors:
        show_settings_errors(ls, errors)
    if ls.client.features.watched_files_registration:
        await watch_yaml_files(ls)


def shutdown(ls: HpLanguageServer, params: None) -> None:
    ls.stop_worker()


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


# -- documents and settings ----------------------------------------------------------------------------------
def did_open(ls: HpLanguageServer, params: types.DidOpenTextDocumentParams) -> None:
    ls.scheduler.opened(params.text_document.uri)


def did_change(ls: HpLanguageServer, params: types.DidChangeTextDocumentParams) -> None:
    ls.scheduler.changed(params.text_document.uri)


def did_save(ls: HpLanguageServer, params: types.DidSaveTextDocumentParams) -> None:
    ls.scheduler.saved(params.text_document.uri)


def did_close(ls: HpLanguageServer, params: types.DidCloseTextDocumentParams) -> None:
    ls.scheduler.closed(params.text_document.uri)


def did_change_watched_files(ls: HpLanguageServer, params: types.DidChangeWatchedFilesParams) -> None:
    ls.scheduler.files_changed([c.uri for c in params.changes])


async def did_change_configuration(ls: HpLanguageServer, params: types.DidChangeConfigurationParams) -> None:
    changed, errors = ls.session.update_settings(did_change=section_of(params.settings))
    if ls.client.features.configuration:
        changed = await pull_configuration(ls) or changed
    elif errors:
        show_settings_errors(ls, errors)
    if changed:
        ls.scheduler.settings_changed()


def progress_cancel(ls: HpLanguageServer, params: types.WorkDoneProgressCancelParams) -> None:
    ls.search_progress.cancelled(params.token)


async def pull_configuration(ls: HpLanguageServer) -> bool:
    """Ask the client for section hpLsp (only called when it advertises workspace/configuration)."""
    try:
        res = await asyncio.wait_for(ls.workspace_configuration_async(
            types.ConfigurationParams(items=[types.ConfigurationItem(section=SECTION)])), timeout=5)
    except Exception as exc:
        ls.client.log(types.MessageType.Warning, f"hp-lsp: workspace/configuration failed: {exc}")
        return False
    changed, errors = ls.session.update_settings(configuration=section_of(res[0] if res else None))
    if errors:
        show_settings_errors(ls, errors)
    return changed


def show_settings_errors(ls: HpLanguageServer, errors: tuple[str, ...]) -> None:
    ls.client.show(types.MessageType.Warning, "; ".join(errors))


async def watch_yaml_files(ls: HpLanguageServer) -> None:
    """Register for changes of YAML files on disk (a train.yaml a search config reads may change there)."""
    watch = types.DidChangeWatchedFilesRegistrationOptions(watchers=[
        types.FileSystemWatcher(glob_pattern="**/*.{yaml,yml}")])
    try:
        await ls.client_register_capability_async(types.RegistrationParams(registrations=[types.Registration(
            id=WATCH_ID, method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES, register_options=watch)]))
    except Exception as exc:
        ls.client.log(types.MessageType.Warning, f"hp-lsp: could not watch files: {exc}")


# -- language features ---------------------------------------------------------------------------------------
def config_state(ls: HpLanguageServer, uri: str) -> DocState | None:
    """The document's state when its last check found a HyperParallel config (other YAML is left alone)."""
    state = ls.session.get(uri)
    if state is None or state.analysis is None or not state.analysis.is_config:
        return None
    return state


@answer_or(None)
def on_hover(ls: HpLanguageServer, params: types.HoverParams) -> types.Hover | None:
    state = config_state(ls, params.text_document.uri)
    if state is None or state.analysis is None:
        return None
    doc = ls.workspace.get_text_document(params.text_document.uri)
    pos = from_client_position(doc.lines, doc.position_codec, params.position)
    if state.analysis.calibration is not None:  # a RUNS file
        text = calibration.runs_hover(state.analysis.calibration, pos.line)
    else:
        entries = current_entries(state.analysis, doc, ls.session.settings.max_file_size_kb)
        text = hover.hover_markdown(state, entries, pos.line, pos.character)
    if not text:
        return None
    kind = ls.client.features.hover_kind
    if kind == types.MarkupKind.PlainText:
        text = plain_text(text)
    return types.Hover(contents=types.MarkupContent(kind=kind, value=text))


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
    entries = current_entries(None, doc, ls.session.settings.max_file_size_kb)
    return types.CompletionList(is_incomplete=False, items=completion.complete(entries, line_text, pos.line,
                                                                               pos.character))


@answer_or([])
async def on_symbols(ls: HpLanguageServer, params: types.DocumentSymbolParams) -> list[types.DocumentSymbol]:
    doc = ls.workspace.get_text_document(params.text_document.uri)
    state = ls.session.get(params.text_document.uri)
    analysis = state.analysis if state is not None else None
    if analysis is not None and analysis.version == doc.version and not analysis.too_large:
        entries: tuple[Entry, ...] = tuple(analysis.entries)
    else:  # scanning a large text takes seconds: off the loop, and only as far as the outline shows
        entries = await ls.scheduler.off_loop(current_entries, analysis, doc, ls.session.settings.max_file_size_kb,
                                              symbols.MAX_SYMBOLS)
    return symbols.document_symbols(entries, doc.lines, doc.position_codec)


@answer_or([])
def on_code_lens(ls: HpLanguageServer, params: types.CodeLensParams) -> list[types.CodeLens]:
    state = config_state(ls, params.text_document.uri)
    if state is None:
        return []
    doc = ls.workspace.get_text_document(params.text_document.uri)
    entries = current_entries(state.analysis, doc, ls.session.settings.max_file_size_kb)
    return [
        types.CodeLens(range=to_client_range(doc.lines, doc.position_codec, lens.range),
                       command=types.Command(title=lens.title, command=lens.command,
                                             arguments=list(lens.arguments) or None))
        for lens in [*code_lens.lenses(state, entries), *calibration.ratios_lenses(state)]
    ]


@answer_or([])
async def on_code_action(ls: HpLanguageServer,
                         params: types.CodeActionParams) -> list[types.CodeAction | types.Command]:
    """Snapshot on the loop, read the Apply target if one is asked for, build on the edit thread."""
    uri = params.text_document.uri
    state = config_state(ls, uri)
    if state is None:
        return []
    doc = ls.workspace.get_text_document(uri)
    req = code_actions.ActionRequest(
        uri, doc.source, doc.version, doc.lines, doc.position_codec, state, params.range,
        tuple(params.context.only or ()), tuple(params.context.diagnostics), ls.client.features, ls.session.settings)
    target = await apply_target(ls, state) if req.needs_target() else None
    return await ls.scheduler.off_loop(code_actions.code_actions, req, target)


async def apply_target(ls: HpLanguageServer, state: DocState) -> code_actions.Target | None:
    """What "apply" edits: an open buffer, else the linked train.yaml read from disk off the loop."""
    path = code_actions.apply_target(state)
    if path is None:
        return None
    found = code_actions.open_target(path, state, ls.session.docs, ls.workspace.get_text_document)
    if found is not None:
        return found
    linked = await ls.scheduler.off_loop(read_linked, path, ls.session.settings.max_file_size_kb * 1024)
    return code_actions.disk_target(path, linked)


# -- commands ------------------------------------------------------------------------------------------------
@command_or("reason", applied=False)
async def apply_optimal(ls: HpLanguageServer, *args: Any) -> dict[str, Any]:
    """hpLsp.applyOptimalStrategy [uri] -> workspace/applyEdit; {"applied": bool, ...}, never an error."""
    uri = code_actions.uri_arg(args)
    state = ls.session.get(uri) if uri else None
    if state is None:
        return {"applied": False, "reason": "document not open"}
    target = await apply_target(ls, state)
    edits, what = None, ""
    if target is not None and target.text is not None:
        live = ls.scheduler.open_texts()  # the buffers now: a plan of older texts is refused
        edits, what = await ls.scheduler.off_loop(code_actions.optimal_edits, state, target.text, target.path, live)
    edit, answer = code_actions.apply_answer(target, edits, what, ls.client.features, ls.workspace.position_codec)
    if edit is None:
        return answer
    res = await ls.client.apply_edit(edit, code_actions.APPLY_TITLE)
    return {"applied": bool(res.applied), **answer, **({"reason": res.failure_reason} if res.failure_reason else {})}


@command_or("reason", created=False)
async def create_search_config(ls: HpLanguageServer, *args: Any) -> dict[str, Any]:
    """hpLsp.createSearchConfig [uri]: create the search config (through applyEdit where the client can)."""
    uri = code_actions.uri_arg(args)
    state = ls.session.get(uri) if uri else None
    if state is None:
        return {"created": False, "reason": "document not open"}
    why = new_search_config.refusal(state)
    if why is not None or not state.path:
        return {"created": False, "reason": why or "the document is not a file on disk"}
    # Whether the train.yaml is a file, which names exist, the write: on the edit thread, so a slow or hung file
    # system never freezes the loop.
    if ls.client.features.create_files:
        prepared = await ls.scheduler.off_loop(new_search_config.prepare, ls.session.settings, state.path)
        if isinstance(prepared, str):
            return {"created": False, "reason": prepared}
        target, text = prepared
        res = await ls.client.apply_edit(new_search_config.create_edit(target, text), "Create search config")
        return {"created": bool(res.applied), "path": target}
    # The client cannot create files through an edit (Neovim 0.7): write it ourselves, never overwriting.
    written, failed = await ls.scheduler.off_loop(new_search_config.write_beside, ls.session.settings, state.path)
    if written is None:
        return {"created": False, "reason": failed}
    target = written
    ls.client.show(types.MessageType.Info, f"Created {target}")
    ls.scheduler.files_changed([from_fs_path(target) or target])
    return {"created": True, "path": target}


@command_or("error")
async def show_plan(ls: HpLanguageServer, *args: Any) -> dict[str, Any]:
    """hpLsp.showPlan [uri, which?] -> the plan view (drawn off the loop), or {"error": why}."""
    uri = code_actions.uri_arg(args)
    state = ls.session.get(uri) if uri else None
    choice = plan.choose_for_command(uri, state, args)
    if not isinstance(choice, plan.PlanChoice) or uri is None or state is None:
        return choice if isinstance(choice, dict) else {"error": "document not open", "uri": uri}
    doc = await asyncio.to_thread(plan.plan_view, choice.config, choice.estimate, choice.which)
    return {**doc, **plan.view_meta(uri, state, choice)}


@command_or("error")
async def save_plan_trace(ls: HpLanguageServer, *args: Any) -> dict[str, Any]:
    """hpLsp.savePlanTrace [uri, path, which?] -> {"written": path} or {"error": why} (written off the loop)."""
    uri = code_actions.uri_arg(args)
    state = ls.session.get(uri) if uri else None
    path = args[1] if len(args) > 1 and isinstance(args[1], str) and args[1].strip() else None
    if path is None or not os.path.isabs(os.path.expanduser(path)):
        return {"error": "name the file to write by its absolute path: [uri, path, which?]", "uri": uri}
    choice = plan.choose_for_command(uri, state, args, which_at=2)
    if not isinstance(choice, plan.PlanChoice):
        return choice
    kept = ls.session.kept_files(uri) if uri else ()
    return await asyncio.to_thread(plan.save_trace, choice.config, choice.estimate, os.path.expanduser(path), kept)


# -- the tables ----------------------------------------------------------------------------------------------
FEATURES: tuple[tuple[str, Any, Callable[..., Any]], ...] = (
    (types.INITIALIZE, None, initialize),
    (types.INITIALIZED, None, initialized),
    (types.SHUTDOWN, None, shutdown),
    (types.EXIT, None, exit_),
    (types.TEXT_DOCUMENT_DID_OPEN, None, did_open),
    (types.TEXT_DOCUMENT_DID_CHANGE, None, did_change),
    (types.TEXT_DOCUMENT_DID_SAVE, types.SaveOptions(include_text=False), did_save),
    (types.TEXT_DOCUMENT_DID_CLOSE, None, did_close),
    (types.WORKSPACE_DID_CHANGE_WATCHED_FILES, None, did_change_watched_files),
    (types.WORKSPACE_DID_CHANGE_CONFIGURATION, None, did_change_configuration),
    (types.TEXT_DOCUMENT_HOVER, None, on_hover),
    (types.TEXT_DOCUMENT_COMPLETION, types.CompletionOptions(trigger_characters=[":"]), on_completion),
    (types.TEXT_DOCUMENT_DOCUMENT_SYMBOL, None, on_symbols),
    (types.TEXT_DOCUMENT_CODE_LENS, None, on_code_lens),
    (types.TEXT_DOCUMENT_CODE_ACTION, types.CodeActionOptions(
        code_action_kinds=[types.CodeActionKind.QuickFix, code_actions.SOURCE_KIND]), on_code_action),
    (types.WINDOW_WORK_DONE_PROGRESS_CANCEL, None, progress_cancel),
)
COMMANDS: tuple[tuple[str, Callable[..., Any]], ...] = (
    (code_actions.APPLY_COMMAND, apply_optimal),
    (new_search_config.CREATE_SEARCH_CONFIG_COMMAND, create_search_config),
    (plan.SHOW_PLAN_COMMAND, show_plan),
    (plan.SAVE_TRACE_COMMAND, save_plan_trace),
)


def create_server(*, search_fn: Any = run_job) -> HpLanguageServer:
    """A server with every handler of the tables registered (`search_fn`: the worker's job, for tests)."""
    server = HpLanguageServer(search_fn=search_fn)
    for _method, _options, handler in FEATURES:
        place_of(handler.__name__)  # every handler says where its work runs (hp_lsp/threads.py)
    for _name, command in COMMANDS:
        place_of(command.__name__)
    for method, options, handler in FEATURES:
        server.feature(method, options)(handler)
    for name, command in COMMANDS:
        server.command(name)(command)
    return server


# -- helpers -------------------------------------------------------------------------------------------------
def config_name(path: str | None) -> bool:
    """train*.yaml and *search*.yaml: the names the editor clients attach to (editors/)."""
    base = os.path.basename(path or "").lower()
    return base.endswith((".yaml", ".yml")) and (base.startswith("train") or "search" in base)


def current_entries(analysis: Analysis | None, doc: Any, max_file_size_kb: int,
                    limit: int | None = None) -> tuple[Entry, ...]:
    """The outline of the document as it is now: the last analysis' when it is of this version, else a fresh
    scan (a few ms for a real config); nothing for texts over maxFileSizeKb."""
    if analysis is not None and analysis.version == doc.version and not analysis.too_large:
        return tuple(analysis.entries)
    source = doc.source
    if len(source) > max_file_size_kb * 1024:
        return ()
    return tuple(scan(source, limit))
