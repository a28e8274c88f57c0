"""The hp-lsp engine: read, validate, price and search HyperParallel parallel strategies.

The engine knows nothing of the Language Server Protocol. The CLI (`hp-plan`) and the language server
(`hp_lsp`) are two front ends over the same calls, so a number shown in the editor is the number the
command line prints.
"""

__version__ = "0.1.0"

import os as _os
import signal as _signal
import sys as _sys

# The `hp-plan` process (its console script, or `python -m engine.cli`) ends quietly on a Ctrl-C that comes
# while it starts: this package loads first, so the handler is in place before the command line's modules
# load (an interrupt there printed an import traceback). engine.cli hands Ctrl-C back to Python while a
# command runs, so the command's `finally` blocks still run. Any other program importing the engine keeps its
# own handler.
_ORIG: list[str] = list(getattr(_sys, "orig_argv", []))
HP_PLAN_PROCESS = _os.path.basename(_sys.argv[0]) == "hp-plan" or (
    "-m" in _ORIG and _ORIG[_ORIG.index("-m") + 1:_ORIG.index("-m") + 2] == ["engine.cli"])


def exit_on_interrupt(signum: int, frame: object) -> None:
    """SIGINT outside a running command: exit at once with the shell's code for it (128 + SIGINT)."""
    _os._exit(128 + _signal.SIGINT)


if HP_PLAN_PROCESS and _signal.getsignal(_signal.SIGINT) is _signal.default_int_handler:
    _signal.signal(_signal.SIGINT, exit_on_interrupt)

