"""`hp-plan`: check, estimate, search, apply, explain, compare and export HyperParallel configs from the command line (docs/formats.md §3).

The parser is defined here for every subcommand (the flags all plan commands share, and what they mean to
a command, in `engine.cli.plan_flags`); each subcommand lives in `engine.cli.<name>` with
`run(args) -> int` and is imported only when used, so `hp-plan check` never pays for numpy or the search.
Exit codes: 0 success, 1 the input has errors or no strategy fits, 2 usage error. No traceback ever reaches
the user, and with `--json` stdout always receives exactly one JSON document.
"""

from __future__ import annotations

import argparse
import atexit
import errno
import importlib
import os
import signal
import sys
from collections.abc import Callable, Sequence
from typing import Any, Literal, NoReturn, TextIO

from engine import HP_PLAN_PROCESS, __version__, exit_on_interrupt
from engine.cli.plan_flags import cluster_flags, positive_int, pricing_flags

SUBCOMMANDS = ("check", "estimate", "search", "apply", "calibrate", "explain", "compare", "export")

POSITIONS_NOTE = (
    "Text output writes positions as path:line:column, 1-based like a compiler's; --json ranges are 0-based "
    "lines and characters (code points), as the Language Server Protocol counts them."
)


class UsageError(Exception):
    """argparse's complaint, raised instead of exiting so that --json can still print a document."""


class _Formatter(argparse.HelpFormatter):
    """argparse's formatter with the terminal width looked up once per process: argparse builds a formatter
    for every add_argument (to check its metavar), and each looks the width up again (D-016: start fast)."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None) -> None:
        super().__init__(prog, indent_increment, max_help_position, width if width is not None else _width())


_WIDTH: list[int] = []


def _width() -> int:
    """What argparse would use: shutil.get_terminal_size's columns less 2, read as shutil reads them (COLUMNS,
    else the terminal of stdout, else 80) without importing shutil (and its archive modules)."""
    if not _WIDTH:
        try:
            columns = int(os.environ.get("COLUMNS", "0"))
        except ValueError:
            columns = 0
        if columns <= 0:
            try:
                columns = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
            except (AttributeError, ValueError, OSError):
                columns = 0
        _WIDTH.append((columns if columns > 0 else 80) - 2)
    return _WIDTH[0]


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args: object, **kwargs: object) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: error: {message}")


# BLAS libraries start one thread per core when numpy loads (OpenBLAS: half of numpy's import time, issue
# 16); the CLI's arrays are small and element-wise, so one thread is all it uses. Set before any subcommand
# imports numpy, and only where the user has not chosen a value.
BLAS_THREAD_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def _one_blas_thread() -> None:
    for var in BLAS_THREAD_VARS:
        os.environ.setdefault(var, "1")


# The widest text timeline `explain --width` draws: one character per column and stage is kept while drawing,
# so a width typed 10000000 took 1.5 GB. Ten times a wide terminal is still a picture.
MAX_TIMELINE_WIDTH = 2000


def _timeline_width(text: str) -> int:
    value = positive_int(text)
    if value > MAX_TIMELINE_WIDTH:
        raise argparse.ArgumentTypeError(f"expected at most {MAX_TIMELINE_WIDTH} columns, got {value}")
    return value


def _tokens(text: str) -> float:
    from engine.explain.tokens import parse_tokens

    try:
        return parse_tokens(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _plan_parser(sub: argparse._SubParsersAction, name: str, help: str, description: str,  # type: ignore[type-arg]
                 *, json_doc: str | None, options: Callable[[argparse.ArgumentParser], None] | None = None,
                 file_metavar: str = "FILE", file_help: str | None = None, options_first: bool = False,
                 tokens: bool = True, pricing: bool | Literal["framework"] = True) -> argparse.ArgumentParser:
    """The parser of a command that reads one plan file: FILE, --json (`json_doc`: where the document is
    specified) and the command's own `options` (before --json with `options_first`, the order --help has
    always listed them in), then --tokens, the cluster flags and the pricing flags, which every plan command
    shares so that one file priced by two commands is priced alike."""
    p = sub.add_parser(name, help=help, description=description, epilog=POSITIONS_NOTE)
    p.add_argument("file", metavar=file_metavar, help=file_help)
    if options is not None and options_first:
        options(p)
    p.add_argument("--json", action="store_true",
                   help="print one JSON document" + (f" ({json_doc})" if json_doc else ""))
    if options is not None and not options_first:
        options(p)
    if tokens:
        p.add_argument("--tokens", type=_tokens, metavar="N",
                       help="a token budget (15e12, 15T, 300B): wall-clock days and device-hours for the plan")
    cluster_flags(p)
    if pricing:
        pricing_flags(p, ratios=pricing != "framework")
    return p


def _explain_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--svg", metavar="OUT", help="also write the timeline and a memory-per-stage chart as SVG to OUT")
    p.add_argument("--trace", metavar="OUT", help="also write the predicted step as a Chrome trace (JSON: Perfetto "
                   "and chrome://tracing open it; one process per pipeline stage) to OUT")
    p.add_argument("--best", action="store_true", help="explain the search's best plan, not the stated one")
    p.add_argument("--width", type=_timeline_width, default=96, metavar="N",
                   help=f"text timeline width (96; at most {MAX_TIMELINE_WIDTH})")


def _compare_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("file_b", metavar="FILE_B", nargs="?")
    p.add_argument("--best", action="store_true", help="compare FILE_A's stated plan with the search's best")


def _export_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--to", required=True, choices=("megatron", "torchtitan", "mindspeed"), help="the target stack")
    p.add_argument("--best", action="store_true", help="export the search's best plan, not the stated one")


def _search_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--top", type=positive_int, default=10, metavar="K", help="how many strategies to show (10)")


def _apply_options(p: argparse.ArgumentParser) -> None:
    out = p.add_mutually_exclusive_group()
    out.add_argument("-o", "--output", metavar="OUT", help="write the edited train.yaml to OUT")
    out.add_argument("--in-place", action="store_true", help="rewrite the train.yaml itself")
    p.add_argument("--dry-run", action="store_true", help="print a unified diff instead of writing anything")
    p.add_argument("--force", action="store_true",
                   help="rewrite even when the best plan's gain in tokens/s is inside the cost model's error band "
                   "for the two plans (the HP611 threshold; below it nothing is rewritten by default)")


def _add_explain(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """explain (docs/formats.md §7; docs/explain.md)."""
    _plan_parser(sub, "explain", "per-stage time and memory, what bounds the step, the pipeline timeline",
                 "Price the plan FILE states (for a search config with searched dimensions, the best one) and "
                 "show one row per pipeline stage (layers, memory by part, forward, backward, recompute, exposed "
                 "communication, idle), what bounds the step, and the pipeline schedule as a timeline of "
                 "micro-batches whose last interval ends at the step time.",
                 json_doc="docs/formats.md §7 `explain`", options=_explain_options)


def _add_compare(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """compare (docs/formats.md §7; docs/explain.md)."""
    _plan_parser(sub, "compare", "two plans side by side: every term, the speedup, the error band",
                 "Price two complete plans on the same model and cluster (two files, or --best: FILE_A's stated "
                 "plan against the best the search finds) and show every time and memory term side by side, the "
                 "speedup in tokens/s at the same global batch size, the terms that make the difference and "
                 "whether the gap is inside the cost model's error band.",
                 json_doc="docs/formats.md §7 `compare`", options=_compare_options, options_first=True,
                 file_metavar="FILE_A")


def _add_export(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """export (docs/formats.md §7; docs/explain.md)."""
    _plan_parser(sub, "export", "the plan as Megatron / MindSpeed flags or a torchtitan TOML fragment",
                 "Print the plan FILE states (for a search config with searched dimensions, the best one) as "
                 "the arguments of another training stack: Megatron-LM or MindSpeed-LLM command-line flags, or "
                 "a torchtitan TOML fragment. Settings the stack cannot express get a warning (HP753). The "
                 "mapping is in docs/explain.md.",
                 json_doc=None, options=_export_options, options_first=True, tokens=False, pricing=False)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The `hp-plan` parser. With `only` (a subcommand name) just that subcommand is defined: `main` parses
    with it when the command line names one, since the others' arguments are never read (building all eight
    took more time than reading a config; D-016)."""
    parser = _Parser(
        prog="hp-plan",
        description="Validate, price and search parallel strategies for HyperParallel train.yaml and search "
        "configs.",
        epilog=POSITIONS_NOTE + " Exit codes: 0 success, 1 errors in the input or no strategy fits, 2 usage.",
    )
    parser.add_argument("--version", action="version", version=f"hp-plan {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, add in _SUBPARSERS.items():
        if only is None or name == only:
            add(sub)
    return parser


def _add_check(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    _plan_parser(sub, "check", "validate a train.yaml or search config (exit 1 on any error)",
                 "Validate FILE: YAML, keys, types, model facts and cross-field rules.",
                 json_doc="docs/formats.md §3 `check`", file_help="a train.yaml or a search config",
                 tokens=False, pricing="framework")


def _add_estimate(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    _plan_parser(sub, "estimate", "price the strategy the file states (no search)",
                 "Price the strategy FILE states: memory per stage, step time, MFU.",
                 json_doc="docs/formats.md §3 `estimate`")


def _add_search(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    _plan_parser(sub, "search", "search the strategy space and rank what fits",
                 "Search the strategies FILE allows and rank those that fit the memory budget.",
                 json_doc="docs/formats.md §3 `search`", options=_search_options)


def _add_apply(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    _plan_parser(sub, "apply", "write the best strategy back into the train.yaml (round-trip)",
                 "Search, then write the best strategy into the train.yaml (FILE itself, or the train_yaml a "
                 "search config names), keeping comments and layout. Without -o or --in-place the edited "
                 "train.yaml is printed on stdout and no file changes; a summary goes to stderr. Nothing is "
                 "written unless the result reads back as the strategy.",
                 json_doc=None, options=_apply_options, options_first=True, tokens=False)


def _add_calibrate(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("calibrate", help="fit ratios from measured runs (a RUNS file)",
                       description="Price every run of RUNS (each a config stating one strategy and what it "
                       "measured, a training log or a profiler trace), fit ratios that make the model "
                       "reproduce them, and print measured / uncalibrated / calibrated step and peak per run, "
                       "with leave-one-out predictions, and per part of the step (GEMM, attention, element-wise, "
                       "recompute, each collective per link class, bubble, optimizer; the memory parts) its "
                       "ratio and why, and the host part (host time the model does not price: seconds per "
                       "launch unit, from a profile's idle beyond the pipeline bubble) and why. -o writes the ratios file that --ratios and "
                       "estimator.ratios_file apply. Nothing is written when any run has an error. See docs/calibration.md.",
                       epilog=POSITIONS_NOTE)
    p.add_argument("file", metavar="RUNS", help="a RUNS file (docs/formats.md §6)")
    p.add_argument("-o", "--output", metavar="RATIOS", help="write the fitted ratios file here")
    p.add_argument("--json", action="store_true", help="print one JSON document (docs/formats.md §6)")
    p.add_argument("--rule", choices=("parts", "local", "step", "compute"), default="parts",
                   help="what a step time without a profile corrects: parts (the default: one ratio per part of "
                   "the priced step, each with a prior spread, the most probable set given the runs; each run's "
                   "remaining misfit stays at its own plan), local (a stack-wide factor "
                   "only when the runs' misfit is beyond the model's own spread on the stack, plus each run's "
                   "misfit on plans like it), step (every part of every plan by one factor) or compute "
                   "(compute and recompute only)")


_SUBPARSERS: dict[str, Callable[[argparse._SubParsersAction], None]] = {  # type: ignore[type-arg]
    "check": _add_check, "estimate": _add_estimate, "search": _add_search, "apply": _add_apply,
    "calibrate": _add_calibrate, "explain": _add_explain, "compare": _add_compare, "export": _add_export}
assert tuple(_SUBPARSERS) == SUBCOMMANDS


def _print_json(doc: dict[str, object]) -> None:
    from engine.jsonout import write_json

    write_json(sys.stdout, doc)


def _wants_json(argv: Sequence[str]) -> bool:
    return "--json" in argv


def _internal(args_json: bool, file: str, exc: BaseException) -> int:
    from engine.config.resolve import internal_error

    d = internal_error(exc)
    if args_json:
        _print_json({"file": file, "diagnostics": [d.to_json()]})
    else:
        print(f"{file}:1:1: error {d.code}: {d.message}", file=sys.stdout)
    return 1


def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point `hp-plan`; returns the exit code (the console script exits with it)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    _one_blas_thread()
    as_json = _wants_json(argv)
    parser = build_parser(argv[0] if argv and argv[0] in SUBCOMMANDS else None)
    try:
        args = parser.parse_args(argv)
    except UsageError as exc:
        if as_json:
            _print_json({"error": str(exc), "diagnostics": []})
        print(str(exc), file=sys.stderr)
        print("run 'hp-plan --help' for usage", file=sys.stderr)
        return 2
    except SystemExit as exc:  # --help / --version
        return int(exc.code or 0) if isinstance(exc.code, int) else 0
    if args.command is None:
        parser.print_help(sys.stderr)
        if as_json:
            _print_json({"error": "no command given", "diagnostics": []})
        return 2
    file = str(getattr(args, "file", ""))
    try:
        module = importlib.import_module(f"engine.cli.{args.command}")
    except ModuleNotFoundError as exc:
        if exc.name == f"engine.cli.{args.command}":
            msg = f"hp-plan {args.command}: not available yet"
            if as_json:
                _print_json({"file": file, "error": msg, "diagnostics": []})
            print(msg, file=sys.stderr)
            return 2
        return _internal(as_json, file, exc)
    except Exception as exc:
        return _internal(as_json, file, exc)
    try:
        if HP_PLAN_PROCESS and signal.getsignal(signal.SIGINT) is exit_on_interrupt:
            signal.signal(signal.SIGINT, signal.default_int_handler)  # a command cleans up on Ctrl-C
        code = module.run(args)
        return int(code) if isinstance(code, int) else 0
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 1
    except Exception as exc:  # the contract: never a traceback
        return _internal(as_json, file, exc)


class OutputFailed(BaseException):
    """Standard output cannot be written (closed, full, or its reader went away). A BaseException, so no
    command's own `except Exception` takes it for an input error and writes again."""

    def __init__(self, error: OSError | ValueError) -> None:
        super().__init__(str(error))
        self.error = error


class _Guarded:
    """A standard stream whose write or flush failure ends the command (stdout: OutputFailed) or is ignored
    (stderr: nowhere left to report it). A closed stream (`>&-`: sys.stdout is None) fails its first write."""

    def __init__(self, stream: TextIO | None, *, raises: bool) -> None:
        self._stream = stream
        self._raises = raises

    def _failed(self, exc: OSError | ValueError) -> None:
        if self._raises:
            raise OutputFailed(exc) from None

    def write(self, text: str) -> int:
        try:
            if self._stream is None:
                raise OSError(errno.EBADF, "standard output is closed")
            return self._stream.write(text)
        except (OSError, ValueError) as exc:
            self._failed(exc)
            return len(text)

    def flush(self) -> None:
        try:
            if self._stream is not None:
                self._stream.flush()
        except (OSError, ValueError) as exc:
            self._failed(exc)

    def isatty(self) -> bool:
        try:
            return self._stream is not None and self._stream.isatty()
        except (OSError, ValueError):
            return False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _output_failed(failure: OutputFailed) -> int:
    """Exit 1; say why unless the reader simply went away (`| head -1`: a broken pipe is no news)."""
    err = failure.error
    if not (isinstance(err, OSError) and err.errno == errno.EPIPE):
        reason = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
        sys.stderr.write(f"hp-plan: cannot write the output: {reason}\n")
    return 1


def console() -> NoReturn:
    """The `hp-plan` console script (and `python -m engine.cli`): main, the exit handlers, stdout and stderr
    flushed, then the process ends without the interpreter's teardown. Freeing every module and object
    (numpy's among them) took 10-30 ms of CPU after the output was complete (D-016); nothing is lost by
    skipping it, as the commands close the files they write and start no thread. Output that cannot be
    written (stdout closed, a full disk, a reader that went away) ends the command quietly with exit 1 and
    at most a one-line reason on stderr; Ctrl-C exits 130 without a traceback."""
    sys.stdout = _Guarded(sys.stdout, raises=True)  # type: ignore[assignment]
    sys.stderr = _Guarded(sys.stderr, raises=False)  # type: ignore[assignment]
    try:
        code = main()
        atexit._run_exitfuncs()  # what registered to run at exit (logging's flush) still runs
        sys.stdout.flush()
    except OutputFailed as failure:
        code = _output_failed(failure)
    except KeyboardInterrupt:
        code = 128 + signal.SIGINT
    if HP_PLAN_PROCESS:
        signal.signal(signal.SIGINT, exit_on_interrupt)
    sys.stderr.flush()
    os._exit(code)


__all__ = ["SUBCOMMANDS", "build_parser", "console", "main"]
