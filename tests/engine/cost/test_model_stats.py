"""Parameter counts ([MODELS] §5) and FLOPs per token ([CAL] §7)."""

from __future__ import annotations

import pytest

from engine.cost import model_stats
from engine.specs import ModelSpec
from tests.engine.cost.shapes import DSV3, LLAMA70B, gpt


@pytest.mark.parametrize(
    ("model", "total_b", "active_b"),
    [
        (LLAMA70B, 70.55, 70.55),
        (ModelSpec(name="l8", num_layers=32, hidden=4096, heads=32, kv_heads=8, vocab=128256, ffn=14336), 8.03, 8.03),
        (ModelSpec(name="mixtral", num_layers=32, hidden=4096, heads=32, kv_heads=8, vocab=32000, ffn=14336,
                   num_experts=8, experts_per_tok=2, moe_ffn=14336), 46.70, 12.88),
        (ModelSpec(name="q3moe", num_layers=48, hidden=2048, heads=32, kv_heads=4, head_dim=128, vocab=151936,
                   ffn=6144, num_experts=128, experts_per_tok=8, moe_ffn=768), 30.53, 3.35),
        (DSV3, 671.0, 37.6),
    ],
)
def test_parameter_counts_match_models_md(model: ModelSpec, total_b: float, active_b: float) -> None:
    st = model_stats(model)
    assert st.total_params / 1e9 == pytest.approx(total_b, rel=2e-3)
    assert st.active_params / 1e9 == pytest.approx(active_b, rel=3e-3)


def test_mtp_params_reported_apart() -> None:
    assert model_stats(DSV3).mtp_params / 1e9 == pytest.approx(11.6, rel=5e-3)
    assert model_stats(LLAMA70B).mtp_params == 0


def test_gpt_matches_nar21_eq2() -> None:
    # P = 12·l·h²·(1 + 13/(12h) + (V + s)/(12·l·h)), 174.6B for the GPT-3 shape (NAR21 Table 2).
    m = gpt(96, 12288, 96)
    L, h, V, s = 96, 12288, 51200, 2048
    eq2 = 12 * L * h * h * (1 + 13 / (12 * h) + (V + s) / (12 * L * h))
    # Eq. 2 counts one final LayerNorm fewer than the model (2h): negligible.
    assert model_stats(m).total_params == pytest.approx(eq2, rel=1e-6)
    assert model_stats(m).total_params / 1e9 == pytest.approx(174.6, abs=0.05)


def test_flops_per_token_match_kor22_eq7_and_nar21_eq3() -> None:
    L, h, a, s, V = 96, 12288, 96, 2048, 51200
    st = model_stats(gpt(L, h, a))
    eq7 = 72 * L * h * h * (1 + s / (6 * h) + V / (12 * L * h))  # per token (B·s = 1 token)
    eq3 = 96 * L * h * h * (1 + s / (6 * h) + V / (16 * L * h))
    assert st.flops_per_token_noncausal == pytest.approx(eq7, rel=1e-12)
    assert st.flops_per_token_full_recompute == pytest.approx(eq3, rel=1e-12)
    # causal masking halves the s² products: 12·L·s·h of Eq. 7 becomes 6·L·s·h
    assert st.flops_per_token == pytest.approx(eq7 - 6 * L * s * h, rel=1e-12)


def test_check_value_k5_175b_step_flops() -> None:
    # [CAL] §7: K5-175B Eq. 7 per step = 1.41e17 FLOP (GBS 64, s 2048).
    st = model_stats(gpt(96, 12288, 96))
    assert st.flops_per_token_noncausal * 64 * 2048 == pytest.approx(1.41e17, rel=5e-3)
