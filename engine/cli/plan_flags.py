"""The flags every plan command shares, declared and read back in one place: the cluster flags and the pricing
flags (`--framework`, `--ratios`) that `hp-plan` adds to each plan parser, and what a subcommand's `run` makes of
them (the explicit ClusterOverrides and RatiosRequest it hands to `check_file`). A subcommand imports these from
here, never from its parent package, whose job is the parser and the dispatch (docs/architecture.md)."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING, Any

from engine.integers import MAX_CONFIG_INT, shown_int

if TYPE_CHECKING:
    from engine.config.types import ClusterOverrides
    from engine.ratios.attach import RatiosRequest


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text[:40]!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    if value > MAX_CONFIG_INT:  # what a file may state (engine.integers), so a flag is bounded alike
        raise argparse.ArgumentTypeError(f"expected at most {MAX_CONFIG_INT:,}, got {shown_int(value)}")
    return value


def _positive_float(text: str) -> float:
    """A finite positive number (engine.config.types.positive_number: the editor settings' rule too)."""
    from engine.config.types import positive_number

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    number = positive_number(value)
    if number is None:
        raise argparse.ArgumentTypeError(f"expected a finite positive number, got {text}")
    return number


def cluster_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group(
        "cluster flags", "override the cluster; flags given here win over the file's cluster / context values"
    )
    g.add_argument("--devices", type=positive_int, metavar="N", help="total number of devices (world size)")
    g.add_argument("--nodes", type=positive_int, metavar="N", help="number of nodes")
    g.add_argument("--cards-per-node", type=positive_int, metavar="N", help="devices per node")
    g.add_argument("--device-type", metavar="NAME", help="catalog device name, e.g. H100, A100, A2 (case-insensitive)")
    g.add_argument("--memory-gb", type=_positive_float, metavar="X", help="device memory in GiB")


def _framework_name(text: str) -> str:
    from engine.catalog.frameworks import FRAMEWORKS, find_framework

    fw = find_framework(text)
    if fw is None:
        raise argparse.ArgumentTypeError(f"unknown framework {text!r}; one of {', '.join(FRAMEWORKS)}")
    return fw.name


def pricing_flags(p: argparse.ArgumentParser, *, ratios: bool = True) -> None:
    """--framework, and --ratios where the command prices (`check` prices nothing, yet the stack decides some of
    its rules: which pipeline layout it takes, HP416 / HP422)."""
    g = p.add_argument_group("pricing flags", "win over the file's estimator section")
    g.add_argument("--framework", type=_framework_name, metavar="NAME",
                   help="the stack that runs the plan: hyperparallel (default), megatron, mindspeed, torchtitan "
                   "(docs/formats.md §5; docs/cost-model.md §5)")
    if ratios:
        g.add_argument("--ratios", metavar="FILE", help="apply this ratios file (hp-plan calibrate -o); wins over "
                       "the search config's estimator.ratios_file")


def ratios_request(args: argparse.Namespace) -> RatiosRequest | None:
    """`--ratios FILE` as an explicit request (it wins over estimator.ratios_file), or None."""
    path = getattr(args, "ratios", None)
    if not path:
        return None
    from engine.ratios.attach import RatiosRequest

    return RatiosRequest(os.path.abspath(os.path.expanduser(path)), "--ratios", explicit=True)


def cluster_overrides(args: argparse.Namespace) -> ClusterOverrides | None:
    """The cluster flags as ClusterOverrides (explicit: they win over the files), or None if none given."""
    from engine.config.types import ClusterOverrides

    # Values as argparse parsed them (int, str, float or None): typed Any, as getattr returns them.
    fields: dict[str, Any] = {
        "devices": getattr(args, "devices", None),
        "num_nodes": getattr(args, "nodes", None),
        "cards_per_node": getattr(args, "cards_per_node", None),
        "device_type": getattr(args, "device_type", None),
        "memory_gb": getattr(args, "memory_gb", None),
        "framework": getattr(args, "framework", None),
    }
    if all(v is None for v in fields.values()):
        return None
    return ClusterOverrides(**fields, explicit=True,
                            memory_source="flag --memory-gb" if fields["memory_gb"] is not None else None)


