"""Where each handler runs and what it may touch: the server's one table of threads.

The server runs code in these places:

==============  ===========================================================  ==================================
place           what runs there                                              what it may touch
==============  ===========================================================  ==================================
loop            every LSP handler's entry, the scheduler's decisions,        `Session` (the only writer of
                publishing, worker callbacks (marshalled by                  document state), pygls' workspace,
                `call_soon_threadsafe`)                                      the client
check thread    `Scheduler.analyse_off_loop`: read, resolve, validate and    its `CheckInput` snapshot, the disk,
                price one document version (one thread: one text's checks    `SearchConfigIndex` and the cluster
                land in the order they were asked for)                       cache (both locked)
calibration     the same for a text that may be a RUNS file (it says         as the check thread (the log cache
thread          `runs`): its logs and profiles take seconds to read, and     is locked too)
                no config's check waits behind them
edit thread     code actions, Apply, the outline of a large file, the        its snapshot, the disk (linked
                file createSearchConfig writes (`Scheduler.off_loop`)        files), never `Session`
plan thread     `hpLsp.showPlan`'s drawing (`asyncio.to_thread`)             its chosen config and estimate
worker process  searches and candidate-list jobs (hp_lsp/search_job.py)       its pickled request, the disk
==============  ===========================================================  ==================================

`HANDLERS` is that table for the registered handlers; `hp_lsp.server.create_server` refuses to register a
handler the table does not place, so a new handler cannot be added without saying where its work runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Place(StrEnum):
    LOOP = "loop"
    CHECK_THREAD = "check thread"
    CALIBRATION_THREAD = "calibration thread"
    EDIT_THREAD = "edit thread"
    PLAN_THREAD = "plan thread"
    WORKER = "worker process"


@dataclass(frozen=True, slots=True)
class Runs:
    """A handler's work: where its entry runs (always the loop) and where it sends the rest."""

    then: tuple[Place, ...]  # the places its work continues in, besides the loop
    touches: str


_CHECKS = (Place.CHECK_THREAD, Place.CALIBRATION_THREAD)  # a document's check: a RUNS file's on the second
_DOC_EVENT = Runs((*_CHECKS, Place.WORKER), "Session via the scheduler; snapshots go off the loop")
_READ_ONLY = Runs((), "reads Session and the open buffers; writes nothing")

# handler function name -> where its work runs
HANDLERS: dict[str, Runs] = {
    "initialize": Runs((), "Session settings, the client's features"),
    "initialized": Runs((), "Session settings (pulled configuration), the file watcher registration"),
    "shutdown": Runs((Place.WORKER,), "stops the worker"),
    "exit_": Runs((Place.WORKER,), "stops the worker"),
    "did_open": _DOC_EVENT,
    "did_change": Runs(_CHECKS, "Session via the scheduler (debounced check)"),
    "did_save": _DOC_EVENT,
    "did_close": Runs((Place.WORKER,), "Session via the scheduler; cancels the document's jobs"),
    "did_change_watched_files": Runs((*_CHECKS, Place.WORKER),
                                     "SearchConfigIndex.forget (locked), the cluster cache (locked)"),
    "did_change_configuration": _DOC_EVENT,
    "on_hover": _READ_ONLY,
    "on_completion": _READ_ONLY,
    "on_symbols": Runs((Place.EDIT_THREAD,), "reads the last analysis; scans a text snapshot off the loop"),
    "on_code_lens": _READ_ONLY,
    "on_code_action": Runs((Place.EDIT_THREAD,), "reads Session on the loop; builds edits off the loop"),
    "progress_cancel": Runs((Place.WORKER,), "cancels a worker job"),
    "apply_optimal": Runs((Place.EDIT_THREAD,), "reads Session; reads linked files and builds edits off the loop"),
    "create_search_config": Runs((Place.EDIT_THREAD,), "reads Session on the loop; picks the name and writes one "
                                 "small new file (never overwrites) off the loop where the client cannot"),
    "show_plan": Runs((Place.PLAN_THREAD,), "reads Session on the loop; draws the plan off the loop"),
    "save_plan_trace": Runs((Place.PLAN_THREAD,),
                            "reads Session on the loop; writes the trace through the safe writer off the loop"),
}


def place_of(handler_name: str) -> Runs:
    """Where a registered handler's work runs; KeyError for a handler the table does not place."""
    return HANDLERS[handler_name]
