"""The verdict (D-010): `fits` within the budget; over it, the peak's own error band (the estimate's
`peak_memory_range_gib`, docs/formats.md §3) decides between `marginal` (`fits` stays true and HP520 is a
warning) and `does not fit`: a plan is called out of memory only when even the band's low end is over the
budget."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[3]
TRAIN = ROOT / "examples" / "llama3-70b" / "train.yaml"


def estimate(memory_gb: float | None) -> tuple[int, dict]:  # type: ignore[type-arg]
    extra = ["--memory-gb", f"{memory_gb}"] if memory_gb else []
    p = subprocess.run([sys.executable, "-m", "engine.cli", "estimate", str(TRAIN), "--devices", "1024",
                        "--device-type", "H100", "--json", *extra], cwd=ROOT, capture_output=True, text=True,
                       timeout=120)
    return p.returncode, json.loads(p.stdout)


def test_verdicts_around_the_budget() -> None:
    code, doc = estimate(None)
    peak, band = doc["peak_memory_gib"], doc["error_band"]["memory"]
    assert code == 0 and doc["verdict"] == "fits" and 0.01 < band < 0.5
    assert doc["peak_memory_range_gib"] == [peak * (1 - band), peak * (1 + band)]
    for factor, verdict, fits, rc in ((1.5, "fits", True, 0), (1.01, "fits", True, 0),
                                      (1 - band / 2, "marginal", True, 0), (0.9 * (1 - band), "does not fit", False, 1)):
        code, doc = estimate(round(peak * factor, 3))
        assert doc["verdict"] == verdict and doc["fits"] is fits and code == rc, (factor, doc["verdict"])
        hp520 = [d for d in doc["diagnostics"] if d["code"] == "HP520"]
        if factor < 1:
            assert hp520 and hp520[0]["severity"] == ("warning" if verdict == "marginal" else "error")
        else:
            assert not hp520


def test_the_editor_s_few_words_say_each_verdict_with_its_budget() -> None:
    """The code lens and the hover word the verdict through one method (Estimate.fit_words), each with its own
    emphasis, so a marginal plan never reads as a bare "fits" in either."""
    from dataclasses import replace

    from engine.cost import estimate as price
    from engine.specs import RunOptions, Strategy
    from tests.engine.cost.shapes import LLAMA8B, cluster

    est = price(LLAMA8B, cluster(1, "H100"), RunOptions(), Strategy(dp=8, micro_batch_size=1, micro_batch_num=4), 80.0)
    peak, low = est.peak_memory_gib, est.peak_memory_range_gib[0]
    words = {v: replace(est, budget_gib=b) for v, b in (("fits", peak * 1.2), ("marginal", (peak + low) / 2),
                                                        ("does not fit", low * 0.8))}
    assert {v: e.verdict for v, e in words.items()} == {v: v for v in words}
    assert words["fits"].fit_words() == f"fits {peak * 1.2:.0f} GiB"
    assert words["marginal"].fit_words() == f"over {(peak + low) / 2:.0f} GiB, MAY fit"
    assert words["does not fit"].fit_words(lambda w: f"**{w}**") == f"does **not** fit {low * 0.8:.0f} GiB"
