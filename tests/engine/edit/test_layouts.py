"""Fidelity on generated layouts: random indentation per section, flow or block sections, comments on
any line, blank lines, CRLF, a missing final newline, document markers; random strategies written into
them must read back exactly, leave every untouched line as it was, and be idempotent."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.edit import strategy_edits
from engine.specs import Strategy

from .helpers import check_edits, content_lines, is_subsequence, reads_back, strategies, untouched_lines

SECTIONS = {
    "training": {"train_iters": 100, "global_batch_size": 256, "micro_batch_size": 1},
    "accelerator": {"tp_size": 2, "pp_size": 2, "cp_size": 1, "ep_size": 1, "sequence_parallel": False,
                    "pp_interleave_num": 1, "pipeline_scheduler": "1f1b", "context_parallel_algo": "ring"},
    "fsdp_config": {"dp_shard_size": 8, "reshard_after_forward": True},
    "activation_checkpoint": {"mode": "selective", "selective_policy": "hyperparallel"},
    "dataset": {"data_transform": {"max_seq_len": 4096}},
    "optimizer": {"lr": "3.0e-4", "name": "adamw"},
}
COMMENTS = st.sampled_from(["", "", "  # note", " # ünïcødé ⚡", "   # tp: keep inside a node"])


def _scalar(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


@st.composite
def layouts(draw: st.DrawFn) -> str:
    eol = draw(st.sampled_from(["\n", "\r\n"]))
    lines: list[str] = []
    if draw(st.booleans()):
        lines.append("---")
    if draw(st.booleans()):
        lines.append("# generated recipe" + draw(COMMENTS))
    lines.append("model:" + draw(COMMENTS))
    ind = " " * draw(st.integers(1, 4))
    lines.append(f"{ind}pretrained_model_name_or_path: meta-llama/Llama-3.1-8B" + draw(COMMENTS))
    names = draw(st.permutations(list(SECTIONS)))
    for name in names:
        if not draw(st.booleans()):
            continue
        keys = [k for k in SECTIONS[name] if draw(st.booleans())]
        if not keys:
            continue
        if draw(st.booleans()):
            lines.append("")
        if draw(st.integers(0, 3)) == 0:  # a flow section
            body = ", ".join(f"{k}: {_flow(SECTIONS[name][k])}" for k in keys)
            lines.append(f"{name}: {{{body}}}" + draw(COMMENTS))
            continue
        lines.append(f"{name}:" + draw(COMMENTS))
        ind = " " * draw(st.integers(1, 4))
        for k in keys:
            if draw(st.integers(0, 4)) == 0:
                lines.append(f"{ind}# about {k}")
            v = SECTIONS[name][k]
            if isinstance(v, dict):
                lines.append(f"{ind}{k}:")
                sub = ind + " " * draw(st.integers(1, 3))
                lines.extend(f"{sub}{k2}: {_scalar(v2)}" for k2, v2 in v.items())
            else:
                lines.append(f"{ind}{k}: {_scalar(v)}" + draw(COMMENTS))
    if draw(st.booleans()):
        lines.append("# trailing comment")
    text = eol.join(lines)
    return text + eol if draw(st.integers(0, 3)) else text


def _flow(v: object) -> str:
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {_flow(x)}" for k, x in v.items()) + "}"
    return _scalar(v)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=layouts(), s=strategies())
def test_generated_layouts(text: str, s: Strategy) -> None:
    r = strategy_edits(text, s)
    check_edits(text, r)
    reads_back(r.new_text, s)
    assert is_subsequence(untouched_lines(text, r), content_lines(r.new_text))
    if "\r\n" in text:
        assert "\n" not in r.new_text.replace("\r\n", "")
    assert r.new_text.endswith(("\n", "\r")) == text.endswith(("\n", "\r"))
    assert strategy_edits(r.new_text, s).edits == ()
