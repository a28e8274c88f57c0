"""Readers for train.yaml and search configs, resolved into one frozen `Config`.

`load(path, text=None, overrides=None) -> Loaded` reads and resolves (reading and type diagnostics only);
`engine.check.check_file` adds unknown-key and cross-field validation. See engine/config/resolve.py for the
semantics and the dotted paths `Config.locations` holds.
"""

from engine.config.resolve import load
from engine.config.types import (
    DIMENSIONS,
    ClusterOverrides,
    Config,
    Dimension,
    Loaded,
    Location,
)

__all__ = ["DIMENSIONS", "ClusterOverrides", "Config", "Dimension", "Loaded", "Location", "load"]
