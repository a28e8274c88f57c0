"""Which stack a config prices for: (framework, device type), the key a ratios file is valid for.

Ratios correct one stack's kernels and links, so they carry the framework (docs/formats.md §5: `estimator.framework`,
default `hyperparallel`) and the catalog device name of the runs they were fitted on. The framework is the one
the cost model prices (engine.catalog.frameworks.framework_of, the one rule: aliases and case resolved).
"""

from __future__ import annotations

from engine.catalog.frameworks import framework_of
from engine.config.types import Config


def stack_of(config: Config) -> tuple[str, str]:
    """(framework, device type) of a config; the device type is the catalog name ('' when unknown)."""
    device = config.cluster.device.name if config.cluster is not None else ""
    return framework_of(config.run).name, device
