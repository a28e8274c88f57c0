"""The train.yaml keys a searched plan replaces. An error on one of them (a stated tp that does not divide the heads,
an FSDP shard that does not divide dp·cp on the cluster the flags name) is about the stated strategy, which the
commands that search (`apply`, `explain --best`, `export --best`) set aside: it blocks only the commands that price
the stated plan. One home, so the three agree on what they can do with a file."""

from __future__ import annotations

import os

from engine.config.types import Config
from engine.diagnostics import Diagnostic

# The keys apply rewrites (engine.edit), in both train.yaml schemas.
STRATEGY_PATHS = (
    "accelerator.", "fsdp_config.dp_shard_size", "training.global_batch_size", "training.micro_batch_size",
    "activation_checkpoint.", "context.device_num", "train.accelerator.", "train.global_batch_size",
    "train.micro_batch_size", "train.micro_batch_num", "train.gradient_checkpointing.",
)


def repairable(d: Diagnostic, train_path: str, file: str) -> bool:
    """Whether error `d` sits on a strategy key of the train.yaml at `train_path` (`file` is the file checked,
    where a diagnostic without its own file sits)."""
    where = d.file or file
    same = os.path.abspath(where) == os.path.abspath(train_path)
    return same and bool(d.path) and str(d.path).startswith(STRATEGY_PATHS)


def blocking(diags: list[Diagnostic], config: Config | None, file: str) -> list[Diagnostic]:
    """The errors a searching command cannot set aside: every error where no train.yaml holds the strategy, else
    those off its strategy keys."""
    train_path = None if config is None else (file if config.kind == "train" else config.train_yaml)
    return [d for d in diags if d.is_error and (train_path is None or not repairable(d, train_path, file))]


def split_errors(diags: list[Diagnostic], config: Config | None, file: str, *, best: bool
                 ) -> tuple[list[Diagnostic], list[Diagnostic]]:
    """(the errors that stop a command, the errors it sets aside): with `best` the stated strategy's errors are set
    aside (blocking), else every error stops it."""
    stops = blocking(diags, config, file) if best else [d for d in diags if d.is_error]
    return stops, [d for d in diags if d.is_error and d not in stops]


def set_aside_note(aside: list[Diagnostic]) -> str | None:
    """What a searching command says of the stated strategy's errors it set aside (shown above it, not blocking):
    None when there are none."""
    if not aside:
        return None
    codes = ", ".join(sorted({d.code for d in aside}))
    return (f"the stated strategy's errors ({codes}) are set aside: --best prices the searched plan, which "
            "replaces that strategy")
