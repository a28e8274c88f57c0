"""explain takes apart the pricing that made the estimate (Estimate.stages), not a second one: its stages hold
the estimate's per-stage memory, and a plan's stages are what a fresh one-row pricing of the same plan on the
run it was priced with gives. A search config's stated plan is priced on the train.yaml's own recompute modules
(engine.search.stated.as_searched), so explain shows that plan's memory, not the search's `auto` one's."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from engine.check import check_file
from engine.cost.strategy_rules import estimate_config
from engine.explain import explain_estimate
from engine.explain.build import stages_of_plan
from engine.results import MEMORY_TERMS
from engine.search.stated import stated_estimate
from tests.support.configs import AUTO_SEARCH, AUTO_TRAIN

ROOT = Path(__file__).resolve().parents[3]
PLANS = [ROOT / "examples" / "explain" / "interleaved.yaml",
         ROOT / "benchmarks" / "calibration_runs" / "deepseek-v3-512xh100-nemo" / "search.yaml",
         ROOT / "benchmarks" / "memory_runs" / "tt-405b-512gpu-3d-interleaved.yaml"]


@pytest.mark.parametrize("path", PLANS, ids=lambda p: p.parent.name if p.name == "search.yaml" else p.stem)
def test_explain_shows_the_stages_of_the_pricing_that_made_the_estimate(path: Path) -> None:
    config = check_file(str(path)).config
    assert config is not None
    est, _ = estimate_config(config)
    assert est is not None and est.stages is not None
    assert stages_of_plan(config, replace(est, stages=None)) == est.stages  # the same plan priced afresh
    ex = explain_estimate(config, est)
    totals = [sum(row.memory_gib[k] for k in MEMORY_TERMS) for row in ex.stages]
    assert totals == pytest.approx(list(est.stage_memory_gib), rel=1e-12)


def test_a_search_config_s_stated_plan_is_explained_with_its_own_recompute_modules(tmp_path: Path) -> None:
    (tmp_path / "train.yaml").write_text(AUTO_TRAIN.replace("mode: selective",
                                                            "mode: selective\n  recompute_modules: [core_attn, mlp]"))
    (tmp_path / "search.yaml").write_text(AUTO_SEARCH.replace("MODS", "auto").replace("FW", "megatron"))
    config = check_file(str(tmp_path / "search.yaml")).config
    assert config is not None and config.run.recompute_modules == ("auto",)
    est = stated_estimate(config)
    assert est is not None and est.stages is not None
    ex = explain_estimate(config, est)
    totals = [sum(row.memory_gib[k] for k in MEMORY_TERMS) for row in ex.stages]
    assert totals == pytest.approx(list(est.stage_memory_gib), rel=1e-12)
