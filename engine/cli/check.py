"""`hp-plan check FILE [--json]`: validate only (docs/formats.md §3).

Text: one compiler-style line per diagnostic, `path:line:col: severity CODE: message`, 1-based, in the file
where the problem was written (a search config's train.yaml included); for a search config the
`parallelism resolved:` line HyperParallel prints; the stated strategy when there is one; then a count. JSON: `{"file",
"diagnostics": [...]}` with 0-based ranges, plus `files`, `kind`, `dimensions` and `stated` (new keys).
Exit 1 if any error, else 0.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, TextIO

from engine.check import check_file
from engine.cli.plan_flags import cluster_overrides
from engine.diagnostics import Diagnostic, Severity, has_errors
from engine.jsonout import write_json


def display_path(path: str) -> str:
    """A path as the user would type it: relative to the working directory when it lies below it (a search
    config's train_yaml is resolved to an absolute path), else unchanged."""
    try:
        rel = os.path.relpath(path)
    except ValueError:  # another drive (Windows)
        return path
    return path if rel.startswith("..") else rel


def format_line(d: Diagnostic, file: str) -> str:
    """`path:line:col: severity CODE: message`, 1-based line and column."""
    where = display_path(d.file) if d.file else file
    sev = d.effective_severity.value
    return f"{where}:{d.range.start.line + 1}:{d.range.start.character + 1}: {sev} {d.code}: {d.message}"


def _counts(diags: tuple[Diagnostic, ...]) -> str:
    n = {s: sum(1 for d in diags if d.effective_severity is s) for s in Severity}
    parts = [f"{n[Severity.ERROR]} error{'s' if n[Severity.ERROR] != 1 else ''}",
             f"{n[Severity.WARNING]} warning{'s' if n[Severity.WARNING] != 1 else ''}"]
    notes = n[Severity.INFORMATION] + n[Severity.HINT]
    if notes:
        parts.append(f"{notes} note{'s' if notes != 1 else ''}")
    return ", ".join(parts)


def run(args: argparse.Namespace, *, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    file = str(args.file)
    loaded = check_file(file, overrides=cluster_overrides(args))
    diags = loaded.diagnostics
    cfg = loaded.config
    if getattr(args, "json", False):
        doc: dict[str, Any] = {"file": file, "diagnostics": [d.to_json() for d in diags]}
        doc["files"] = list(loaded.files)
        doc["kind"] = cfg.kind if cfg is not None else None
        doc["dimensions"] = {d.name: d.summary().split(": ", 1)[1] for d in cfg.dimensions.values()} if cfg else {}
        doc["stated"] = cfg.stated.to_json() if cfg is not None and cfg.stated is not None else None
        write_json(out, doc)
    else:
        for d in diags:
            out.write(format_line(d, file) + "\n")
        if cfg is not None and cfg.kind == "search":
            # HyperParallel's own resolution line ([HP] §2.2), one clause per dimension.
            resolved = "; ".join(d.summary().replace(": ", "=", 1) for d in cfg.dimensions.values())
            out.write(f"{file}: parallelism resolved: {resolved}\n")
        if cfg is not None and cfg.stated is not None:
            out.write(f"{file}: stated strategy: {cfg.stated.short()}\n")
        if diags:
            out.write(f"{file}: {_counts(diags)}\n")
        else:
            out.write(f"{file}: no problems found\n")
    return 1 if has_errors(diags) else 0
