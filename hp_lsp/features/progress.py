"""Work-done progress for searches that take longer than DELAY_S, cancellable from the editor.

Created only when the client advertises `window.workDoneProgress` (both VS Code and Neovim 0.7 do); a fresh
token per search, dropped from pygls' registry when the search ends (pygls never forgets tokens itself).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from lsprotocol import types

DELAY_S = 0.2
log = logging.getLogger(__name__)


class WorkDone(Protocol):
    """pygls' progress tracker (`LanguageServer.work_done_progress`): the calls made here."""

    tokens: dict[Any, Any]

    async def create_async(self, token: str) -> Any: ...
    def begin(self, token: str, value: types.WorkDoneProgressBegin) -> None: ...
    def report(self, token: str, value: types.WorkDoneProgressReport) -> None: ...
    def end(self, token: str, value: types.WorkDoneProgressEnd) -> None: ...


@dataclass(slots=True)
class SearchProgress:
    tracker: WorkDone
    enabled: Callable[[], bool]  # the client advertised window.workDoneProgress (hp_lsp.client.ClientFeatures)
    on_cancel: Callable[[str], None]
    tokens: dict[str, str] = field(default_factory=dict)  # uri -> token
    _owners: dict[str, str] = field(default_factory=dict)  # token -> uri
    _pending: dict[str, asyncio.Task[None]] = field(default_factory=dict)

    def started(self, uri: str, title: str) -> None:
        """A search for `uri` began; show progress if it is still running after DELAY_S."""
        if not self.enabled():
            return
        self.finished(uri)
        self._pending[uri] = asyncio.ensure_future(self._begin_later(uri, title))

    async def _begin_later(self, uri: str, title: str) -> None:
        await asyncio.sleep(DELAY_S)
        token = str(uuid.uuid4())
        try:
            await self.tracker.create_async(token)
        except Exception as exc:  # the client refused: no progress, the search goes on
            log.warning("progress not created: %s", exc)
            return
        if self._pending.get(uri) is not asyncio.current_task():
            self.tracker.tokens.pop(token, None)
            return  # finished while the client answered
        self._pending.pop(uri, None)
        self.tokens[uri] = token
        self._owners[token] = uri
        self.tracker.begin(token, types.WorkDoneProgressBegin(
            title=title, message=uri.rsplit("/", 1)[-1], percentage=0, cancellable=True))

    def report(self, uri: str, fraction: float) -> None:
        token = self.tokens.get(uri)
        if token is not None:
            pct = max(0, min(100, int(fraction * 100)))
            self.tracker.report(token, types.WorkDoneProgressReport(percentage=pct))

    def finished(self, uri: str, message: str | None = None) -> None:
        task = self._pending.pop(uri, None)
        if task is not None:
            task.cancel()
        token = self.tokens.pop(uri, None)
        if token is not None:
            self._owners.pop(token, None)
            self.tracker.end(token, types.WorkDoneProgressEnd(message=message))
            self.tracker.tokens.pop(token, None)

    def cancelled(self, token: str | int) -> None:
        """The user cancelled from the editor's progress UI."""
        uri = self._owners.get(str(token))
        if uri is not None:
            self.on_cancel(uri)
