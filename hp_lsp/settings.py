"""Typed editor settings (section `hpLsp`, docs/formats.md §4) merged from every source the client uses.

Sources, later wins key by key: `initializationOptions`, `workspace/configuration` (only where the client
advertises it; Neovim 0.7 does not), `workspace/didChangeConfiguration`. An explicit `null` in a later source
(for a key, or for a group such as `cluster`) resets that key to its default: it is how a client says "unset",
and the value an earlier source gave must not outlive it. Invalid values fall back to the default and are
reported once, so a typo in settings never stops the server.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from engine.config.types import ClusterOverrides, positive_number
from engine.document import DEFAULT_MAX_BYTES
from engine.search import MAX_DEVICES

if TYPE_CHECKING:
    from engine.ratios.attach import RatiosRequest

SECTION = "hpLsp"
DEFAULT_MAX_FILE_SIZE_KB = 1024


@dataclass(frozen=True, slots=True)
class Settings:
    num_nodes: int | None = None
    cards_per_node: int | None = None
    device_type: str | None = None
    device_memory_gb: float | None = None
    memory_limit_gb: float | None = None
    search_on_save: bool = True
    max_file_size_kb: int = DEFAULT_MAX_FILE_SIZE_KB
    trace_server: str = "off"
    framework: str | None = None  # docs/formats.md §5: the framework priced when the files state none
    ratios_file: str | None = None  # hpLsp.ratiosFile (docs/formats.md §4, §6): used when a file states none

    def ratios_request(self, root: str | None = None) -> RatiosRequest | None:
        """The setting as a ratios request (a relative path is relative to the workspace root); the file's
        own estimator.ratios_file wins over it."""
        if not self.ratios_file:
            return None
        import os

        from engine.ratios.attach import RatiosRequest

        path = os.path.expanduser(self.ratios_file)
        if not os.path.isabs(path):
            path = os.path.join(root or os.getcwd(), path)
        return RatiosRequest(os.path.normpath(path), f"setting {SECTION}.ratiosFile")

    def overrides(self) -> ClusterOverrides | None:
        """The cluster facts these settings state, for files that leave the cluster unsaid.

        `cluster.deviceMemoryGb` states the device's memory; `memoryLimitGb` is a budget, which like a file's
        `constraint.memory_limit_gb` only narrows it: budget = min(limit, device memory), Config.budget_gib, the
        rule `hp-plan` applies (docs/formats.md §2). A limit of 1000 on an 80 GB H100 prices against 80.
        """
        if not any((self.num_nodes, self.cards_per_node, self.device_type, self.device_memory_gb,
                    self.memory_limit_gb, self.framework)):
            return None
        devices = self.num_nodes * self.cards_per_node if self.num_nodes and self.cards_per_node else None
        return ClusterOverrides(
            devices=devices,
            num_nodes=self.num_nodes,
            cards_per_node=self.cards_per_node,
            device_type=self.device_type,
            memory_gb=self.device_memory_gb,
            memory_source=f"setting {SECTION}.cluster.deviceMemoryGb" if self.device_memory_gb else None,
            memory_limit_gb=self.memory_limit_gb,
            memory_limit_source=f"setting {SECTION}.memoryLimitGb" if self.memory_limit_gb else None,
            framework=_framework_name(self.framework),
        )


def _framework_name(name: str | None) -> str | None:
    """The catalog name of a framework setting (aliases such as "nemo" accepted); unknown names are unset."""
    from engine.catalog.frameworks import find_framework

    fw = find_framework(name) if name else None
    return fw.name if fw is not None else None


@dataclass(frozen=True, slots=True)
class Parsed:
    settings: Settings
    errors: tuple[str, ...] = ()


# dotted setting name -> (Settings field, expected kind)
_FIELDS: dict[str, tuple[str, str]] = {
    "cluster.numNodes": ("num_nodes", "posint"),
    "cluster.cardsPerNode": ("cards_per_node", "posint"),
    "cluster.deviceType": ("device_type", "str"),
    "cluster.deviceMemoryGb": ("device_memory_gb", "posfloat"),
    "memoryLimitGb": ("memory_limit_gb", "posfloat"),
    "searchOnSave": ("search_on_save", "bool"),
    "maxFileSizeKb": ("max_file_size_kb", "posint"),
    "trace.server": ("trace_server", "trace"),
    "ratiosFile": ("ratios_file", "str"),
    "framework": ("framework", "str"),
}


# The largest value an integer setting takes: a file size up to the engine's own read limit (the CLI's; linked files
# are read whole, and `maxFileSizeKb: 1e400`'s overflow had let a 1 GB train.yaml be read into 2 GB of memory), a
# node or device count up to the cluster the search prices (engine.search.MAX_DEVICES).
_MOST: dict[str, int] = {"maxFileSizeKb": DEFAULT_MAX_BYTES // 1024, "cluster.numNodes": MAX_DEVICES,
                         "cluster.cardsPerNode": MAX_DEVICES}


def section_of(payload: Any) -> dict[str, Any]:
    """The `hpLsp` section of a payload, flattened to dotted keys.

    Accepts `{"hpLsp": {...}}` (initializationOptions, didChangeConfiguration) as well as the bare section
    (what workspace/configuration returns), nested (`{"cluster": {"numNodes": 8}}`) or dotted
    (`{"cluster.numNodes": 8}`). Anything else yields an empty dict.
    """
    if not isinstance(payload, Mapping):
        return {}
    if SECTION in payload:
        inner = payload[SECTION]
        return _flatten(inner) if isinstance(inner, Mapping) else {}
    return _flatten(payload)


def _flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping) and key not in _FIELDS:
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


def _coerce(kind: str, value: Any) -> tuple[bool, Any]:
    if value is None:
        return True, None
    if kind == "bool":
        return (True, value) if isinstance(value, bool) else (False, None)
    if kind == "str":
        return (True, value.strip() or None) if isinstance(value, str) else (False, None)
    if kind == "trace":
        return (True, value) if value in ("off", "messages", "verbose") else (False, None)
    if isinstance(value, bool):
        return False, None
    if kind == "posint":
        if isinstance(value, int) and value > 0:
            return True, value
        if isinstance(value, float) and value.is_integer() and value > 0:
            return True, int(value)
        return False, None
    if kind == "posfloat":
        number = positive_number(value) if isinstance(value, int | float) else None
        return (True, number) if number is not None else (False, None)
    raise ValueError(kind)


def parse(flat: Mapping[str, Any]) -> Parsed:
    """Typed settings from a flat dict; unknown names are ignored (the client may send its own)."""
    values, errors = _valid(flat)
    return Parsed(Settings(**{k: v for k, v in values.items() if v is not None}), tuple(errors))


def _explicit_null(flat: Mapping[str, Any], name: str) -> bool:
    """True when `name` or a group above it (`cluster` for `cluster.numNodes`) is given as null."""
    parts = name.split(".")
    return any(".".join(parts[:i]) in flat and flat[".".join(parts[:i])] is None for i in range(1, len(parts)))


def _valid(flat: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The valid values of one layer by Settings field; None marks an explicit null (reset to default)."""
    values: dict[str, Any] = {}
    errors: list[str] = []
    for name, (attr, kind) in _FIELDS.items():
        if name not in flat:
            if _explicit_null(flat, name):
                values[attr] = None
            continue
        ok, val = _coerce(kind, flat[name])
        most = _MOST.get(name)
        if ok and most is not None and val is not None and val > most:
            errors.append(f"{SECTION}.{name}: invalid value {_shown(flat[name])} (at most {most:,}), ignored (the "
                          "default is used)")
        elif ok:
            values[attr] = val  # None: an explicit null (or a blank string), which resets the key
        else:
            errors.append(f"{SECTION}.{name}: invalid value {_shown(flat[name])}, ignored (the default is used)")
    return values, errors + _groups_not_objects(flat)


def _groups_not_objects(flat: Mapping[str, Any]) -> list[str]:
    """A group given a value that is not an object (`"cluster": 8`, `"cluster": "x"`): its keys cannot be read,
    which had been ignored without a word. A null group is the reset `_explicit_null` reads."""
    groups: dict[str, list[str]] = {}
    for name in _FIELDS:
        if "." in name:
            group, key = name.rsplit(".", 1)
            groups.setdefault(group, []).append(key)
    return [f"{SECTION}.{group}: invalid value {_shown(flat[group])} (an object of {', '.join(keys)}), ignored"
            for group, keys in groups.items() if group in flat and flat[group] is not None]


def _shown(value: Any) -> str:
    """A refused value as the message shows it: short (a 400-digit number is not echoed whole), and an
    infinity from JSON's `1e400` named as what it became."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"{value!r} (not a finite number)"
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:37]}..."


@dataclass(slots=True)
class SettingsSources:
    """The raw section from each source, kept apart so a later source replaces only its own layer."""

    initialization: dict[str, Any] = field(default_factory=dict)
    configuration: dict[str, Any] = field(default_factory=dict)
    did_change: dict[str, Any] = field(default_factory=dict)

    def merged(self) -> Parsed:
        """Each layer typed on its own, then merged: an invalid value in a later layer leaves the earlier
        layer's valid value (or the default) in place; an explicit null in a later layer removes it, so the
        default applies again."""
        values: dict[str, Any] = {}
        errors: list[str] = []
        for layer in (self.initialization, self.configuration, self.did_change):
            v, e = _valid(layer)
            for attr, val in v.items():
                if val is None:
                    values.pop(attr, None)
                else:
                    values[attr] = val
            errors += e
        return Parsed(Settings(**values), tuple(errors))
