"""Readers for train.yaml and search configs, resolved into one frozen `Config`."""

from engine.config.types import (
    DIMENSIONS,
    ClusterOverrides,
    Config,
    Dimension,
    Loaded,
    Location,
)

__all__ = ["DIMENSIONS", "ClusterOverrides", "Config", "Dimension", "Loaded", "Location"]
