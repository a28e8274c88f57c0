"""Attaching a ratios file to a resolved config, so every pricing path (estimate, search, apply, the language
server) prices calibrated: the ratios ride in `config.run.ratios` and `price_table` applies them.

Which file (docs/formats.md §6): `--ratios` (explicit, wins), else the search config's `estimator.ratios_file`
(relative to the search config), else the setting `hpLsp.ratiosFile`. A ratios file fitted on another
framework or device type is applied with an HP809 warning; one that cannot be read is HP810 and nothing
is applied.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from engine.config.types import Config, Loaded
from engine.diagnostics import Diagnostic
from engine.positions import DOCUMENT_START
from engine.ratios.ratiofile import load_ratios
from engine.ratios.stack import stack_of


@dataclass(frozen=True, slots=True)
class RatiosRequest:
    """A ratios file named outside the config: `source` says by whom ("--ratios", "setting hpLsp.ratiosFile");
    `explicit` (a CLI flag) wins over the config's own `estimator.ratios_file`."""

    path: str
    source: str
    explicit: bool = False


def _chosen(config: Config, request: RatiosRequest | None) -> tuple[str, str] | None:
    if request is not None and request.explicit:
        return request.path, request.source
    if config.ratios_file:
        return config.ratios_file, "estimator.ratios_file"
    if request is not None:
        return request.path, request.source
    return None


def _at(config: Config, source: str) -> tuple[object, str, str | None]:
    loc = config.locations.get("estimator.ratios_file") if source == "estimator.ratios_file" else None
    if loc is None:
        return DOCUMENT_START, "estimator.ratios_file" if source == "estimator.ratios_file" else "", None
    file = loc.file if loc.file and loc.file != config.path else None
    return loc.value, "estimator.ratios_file", file


def with_ratios(loaded: Loaded, request: RatiosRequest | None = None,
                texts: dict[str, str] | None = None) -> Loaded:
    """`loaded` with the chosen ratios file applied to its config's run options, plus the diagnostics of
    reading it; the ratios file joins `files` so the editor re-checks when it changes."""
    config = loaded.config
    if config is None:
        return loaded
    chosen = _chosen(config, request)
    if chosen is None:
        return loaded
    path, source = chosen
    rng, dotted, file = _at(config, source)
    ratios, problems = load_ratios(path, (texts or {}).get(path))
    files = tuple(loaded.files) + ((path,) if path not in loaded.files else ())
    if ratios is None:
        why = problems[0].message if problems else "unreadable"
        d = Diagnostic("HP810", f"ratios file {path} (from {source}) is not applied: {why}", rng,  # type: ignore[arg-type]
                       dotted, file=file)
        return replace(loaded, diagnostics=(*tuple(loaded.diagnostics), d), files=files)
    diags = list(loaded.diagnostics)
    framework, device = stack_of(config)
    if (ratios.framework and ratios.framework != framework) or (
            ratios.device_type and device and ratios.device_type.lower() != device.lower()):
        diags.append(Diagnostic(
            "HP809", f"the ratios in {path} were fitted on {ratios.framework or '?'} / {ratios.device_type or '?'}, "
            f"this plan runs on {framework} / {device}: the correction may not carry over; calibrate on a run "
            "of this stack", rng, dotted, file=file))  # type: ignore[arg-type]
    run = replace(config.run, ratios=ratios)
    return replace(loaded, config=replace(config, run=run), diagnostics=tuple(diags), files=files)
