"""The model's own timeline as a profiler trace, for the calibration tests: `hp-plan explain --trace` on a small
fixed pipeline plan, optionally priced under a ratios file written here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.support.cli import ROOT
from tests.support.cli import hp_plan_script as hp_plan

EXAMPLE = ROOT / "examples" / "explain" / "1f1b.yaml"  # 4 pipeline stages, tp 2, 16 H100


def explain_trace(out: Path, *extra: str) -> dict[str, Any]:
    """`hp-plan explain EXAMPLE --trace OUT --json` (with `extra` arguments): the JSON it prints."""
    r = hp_plan("explain", str(EXAMPLE), "--trace", str(out), "--json", *extra)
    assert r.returncode == 0, r.stdout + r.stderr
    return json.loads(r.stdout)  # type: ignore[no-any-return]


def ratios_file(path: Path, parts: dict[str, float] | None = None, **ratios: float) -> Path:
    """A ratios file at `path`: every group ratio 1 unless given, and `parts` when given."""
    groups = {"compute": 1.0, "tp_comm": 1.0, "cp_comm": 1.0, "ep_comm": 1.0, "dp_comm": 1.0, "pp": 1.0,
              "optimizer": 1.0, **ratios}
    extra = f"parts: {json.dumps(parts)}\n" if parts else ""
    path.write_text(f"ratios: {json.dumps(groups)}\n{extra}memory_ratio: 1.0\nfitted_on: []\n")
    return path
