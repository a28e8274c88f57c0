"""Which stack a config prices for: (framework, device type), the key a ratios file is valid for.

Ratios correct one stack's kernels and links, so they carry the framework (docs/formats.md §5: `estimator.framework`,
default `hyperparallel`) and the catalog device name of the runs they were fitted on.
"""

from __future__ import annotations

from engine.config.types import Config
from engine.document import Map, parse, read_text

DEFAULT_FRAMEWORK = "hyperparallel"


def _declared_framework(path: str | None) -> str | None:
    """`estimator.framework` as a search config writes it (read here until the config carries it)."""
    if not path:
        return None
    text, _ = read_text(path)
    if text is None:
        return None
    root = parse(text).root
    est = root.get("estimator") if isinstance(root, Map) else None
    fw = est.get("framework") if isinstance(est, Map) else None
    value = getattr(fw, "value", None)
    return value.strip().lower() if isinstance(value, str) and value.strip() else None


def framework_of(config: Config) -> str:
    """The framework the config is priced for: the config's own reading when the cost model has one, else
    the search config's `estimator.framework`, else the default."""
    for holder in (config.run, config):
        value = getattr(holder, "framework", None)
        if isinstance(value, str) and value:
            return value.lower()
        name = getattr(value, "name", None)
        if isinstance(name, str) and name:
            return name.lower()
    return _declared_framework(config.path) or DEFAULT_FRAMEWORK


def stack_of(config: Config) -> tuple[str, str]:
    """(framework, device type) of a config; the device type is the catalog name ('' when unknown)."""
    device = config.cluster.device.name if config.cluster is not None else ""
    return framework_of(config), device
