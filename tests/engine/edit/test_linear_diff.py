"""The strategy rewrite is linear in a line's tokens (D-004): a comment holding 6,000 ": " on a
strategy line took 6.7 s (difflib's matcher is quadratic on repeated tokens). Now the common ends of every
sequence are trimmed before matching, and the matcher never sees more than MATCH_BUDGET comparisons."""

from __future__ import annotations

import difflib
import time
from pathlib import Path
from typing import Any

import pytest

from engine.edit import strategy_edits
from engine.edit import text as text_mod
from engine.specs import Strategy
from tests.engine.edit.helpers import check_edits

LLAMA = Path(__file__).resolve().parents[3] / "examples" / "llama3-70b" / "train.yaml"
STRATEGY = Strategy(dp=2, dp_shard=2, tp=4, pp=2, micro_batch_size=1, micro_batch_num=8)


def hostile(n: int) -> str:
    base = LLAMA.read_text()
    end = base.index("\n", base.index("tp_size"))
    return base[:end] + "  # " + "x: " * n + base[end:]


def test_matcher_never_sees_a_quadratic_input(monkeypatch: pytest.MonkeyPatch) -> None:
    sizes: list[int] = []
    real = difflib.SequenceMatcher

    def recording(*args: Any, a: Any = (), b: Any = (), **kw: Any) -> difflib.SequenceMatcher[Any]:
        sizes.append(len(a) * len(b))
        return real(*args, a=a, b=b, **kw)

    monkeypatch.setattr(text_mod.difflib, "SequenceMatcher", recording)
    text = hostile(6000)
    res = strategy_edits(text, STRATEGY)
    check_edits(text, res)
    assert "x: " * 6000 in res.new_text  # the comment is untouched
    assert max(sizes, default=0) <= text_mod.MATCH_BUDGET


def test_6000_separators_rewrite_in_well_under_a_second() -> None:
    text = hostile(6000)
    t0 = time.process_time()
    res = strategy_edits(text, STRATEGY)
    assert res.ok and time.process_time() - t0 < 2.0  # quadratic, it took 6.7 s (D-004)


def test_opcodes_match_difflib_on_small_inputs() -> None:
    for a, b in [("abcde", "abXde"), ("aaaa", "aa"), ("", "ab"), ("ab", ""), ("abc", "abc"), ("xay", "xby")]:
        ops = text_mod.opcodes(list(a), list(b))
        rebuilt = "".join(b[j1:j2] if t != "equal" else a[i1:i2] for t, i1, i2, j1, j2 in ops)
        assert rebuilt == b


def test_a_large_middle_becomes_one_replacement() -> None:
    a, b = ["x"] * 1000 + ["a"], ["y"] * 1000 + ["a"]
    assert text_mod.opcodes(a, b) == [("replace", 0, 1000, 0, 1000), ("equal", 1000, 1001, 1000, 1001)]
