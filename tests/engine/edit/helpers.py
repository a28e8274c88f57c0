"""Checks shared by the edit tests: edits are well formed, minimal, reproduce the new text and read back as
the strategy written; and the generator of random strategies the property tests write."""

from __future__ import annotations

import yaml
from hypothesis import strategies as st

from engine.edit import EditResult, apply_edits
from engine.edit.strategy import detect_schema, expected, read_back
from engine.edit.text import LineIndex, split_lines
from engine.specs import RecomputePlan, Strategy


def check_edits(old: str, result: EditResult) -> None:
    """Edits are sorted, non-overlapping, reproduce `new_text`, and each one either inserts text or
    replaces a single token (never a stretch of untouched text), except whole-line deletions."""
    assert result.ok, result.error
    assert apply_edits(old, result.edits) == result.new_text
    idx = LineIndex.of(old)
    free = _layer_lines(old)
    prev_end = -1
    for e in result.edits:
        start, end = idx.offset(e.range.start), idx.offset(e.range.end)
        assert start >= prev_end, "edits overlap or are out of order"
        prev_end = end
        covered = old[start:end]
        if not covered:
            continue
        if e.range.start.character == 0 and (e.range.end.character == 0 or end == len(old)):
            continue  # whole lines removed or rewritten (an entry replaced by another)
        if covered[0] in "\r\n" and end == len(old) and not e.new_text:
            continue  # the last lines of a file without a final newline, removed
        if e.range.start.line in free:
            continue  # entries of a per-layer recompute map come and go with the plan
        assert "\n" not in covered and "\r" not in covered, f"edit spans lines: {covered!r} -> {e.new_text!r}"
        line_start = idx.line_start(e.range.start.line)
        if "{" in old[line_start:start] or "[" in old[line_start:start]:
            continue  # inside a flow collection (a layers map): entries come and go
        assert " " not in covered.strip(), f"edit covers more than a token: {covered!r} -> {e.new_text!r}"


def _layer_lines(text: str) -> set[int]:
    """Lines of a block `activation_checkpoint.layers` mapping."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return set()
    for k, v in getattr(root, "value", []) if isinstance(root, yaml.MappingNode) else []:
        if k.value == "activation_checkpoint" and isinstance(v, yaml.MappingNode):
            for k2, v2 in v.value:
                if k2.value == "layers" and isinstance(v2, yaml.MappingNode):
                    return set(range(v2.start_mark.line, v2.end_mark.line + 1))
    return set()


def untouched_lines(old: str, result: EditResult) -> list[str]:
    """The old lines no edit touches (an insertion at a line start or end touches nothing)."""
    idx = LineIndex.of(old)
    touched: set[int] = set()
    for e in result.edits:
        start, end = idx.offset(e.range.start), idx.offset(e.range.end)
        if start == end:
            line = e.range.start.line
            if 0 < e.range.start.character < idx.line_content_end(line) - idx.line_start(line):
                touched.add(line)  # an insertion inside a line (a flow mapping) changes that line
            continue
        touched.update(range(e.range.start.line, idx.line_of(max(end - 1, start)) + 1))
    lines = [line.rstrip("\r\n") for line in split_lines(old)]
    return [line for i, line in enumerate(lines) if i not in touched]


def content_lines(text: str) -> list[str]:
    return [line.rstrip("\r\n") for line in split_lines(text)]


def is_subsequence(small: list[str], big: list[str]) -> bool:
    it = iter(big)
    return all(any(x == y for y in it) for x in small)


def reads_back(text: str, strategy: Strategy) -> None:
    data = yaml.safe_load(text)
    schema = detect_schema(data)
    assert read_back(data, schema) | {} == {**read_back(data, schema), **expected(strategy, schema)}


@st.composite
def strategies(draw: st.DrawFn, legacy: bool = False) -> Strategy:
    dp = draw(st.sampled_from([1, 2, 4, 8, 16]))
    cp = draw(st.sampled_from([1, 2, 4]))
    domain = dp if legacy else dp * cp  # a legacy file shards within dp only
    divisors = [d for d in range(1, domain + 1) if domain % d == 0]
    vpp = 1 if legacy else draw(st.sampled_from([1, 2, 3]))
    layers: tuple[tuple[int, int, str], ...] = ()
    if not legacy and draw(st.booleans()):
        cuts = sorted(draw(st.sets(st.integers(0, 40), min_size=1, max_size=6)))
        modes = st.sampled_from(["off", "selective", "full"])
        layers = tuple((a, a + draw(st.integers(0, 3)), draw(modes)) for a in cuts[::2])
        layers = tuple(x for i, x in enumerate(layers) if i == 0 or x[0] > layers[i - 1][1])
    return Strategy(
        dp=dp,
        dp_shard=draw(st.sampled_from(divisors)),
        tp=draw(st.sampled_from([1, 2, 4, 8])),
        pp=draw(st.sampled_from([1, 2, 4, 8])),
        cp=cp,
        ep=draw(st.sampled_from([1, 2, 8, 64])),
        etp=draw(st.sampled_from([1, 2])),
        vpp=vpp,
        pipeline_schedule="interleaved" if vpp > 1 else "1F1B",
        micro_batch_size=draw(st.sampled_from([1, 2, 4])),
        micro_batch_num=draw(st.integers(1, 64)),
        sequence_parallel=False if legacy else draw(st.booleans()),
        optimizer_shard=1 if legacy else draw(st.sampled_from(divisors)),
        recompute=RecomputePlan(draw(st.sampled_from(["off", "selective", "full"])), layers),  # type: ignore[arg-type]
    )
