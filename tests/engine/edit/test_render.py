"""Scalar tokens read back as the value written, with its type: PyYAML's emitter decides which strings may
stand plain and how a number is spelled (engine.edit.yamltext), and these properties hold it to that over
generated values, in every place a token goes (a block value, a flow mapping, a flow list) and through a
real edit of a file."""

from __future__ import annotations

import math
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.edit.text import apply_splices
from engine.edit.yamltext import Doc, Word, render_key, render_scalar, render_str, set_path

# Any text PyYAML can hold (no surrogates), with the characters that make YAML quoting hard over-weighted.
TRICKY = st.sampled_from(list(" -:#,[]{}&*!|>'\"%@`?~=<.\\\t\n\r\x85\u2028\u2029\x00\x7f\ufeff"))
TEXT = st.lists(st.one_of(st.characters(exclude_categories=["Cs"]), TRICKY), max_size=12).map("".join)
# strings that YAML 1.1 reads as another type when plain
SPECIAL = st.sampled_from(["off", "On", "yes", "NO", "true", "~", "null", "10", "0x1F", "0o7", "1_000", "1e5",
                           "1.0e-05", ".inf", "-.Inf", ".nan", "2024-01-01", "=", "<<", "", " ", "0-9", "10"])
STRINGS = st.one_of(TEXT, SPECIAL)
NUMBERS = st.one_of(st.integers(), st.floats(allow_nan=True, allow_infinity=True))
SCALARS = st.one_of(STRINGS, NUMBERS, st.booleans(), st.none())
QUOTE_STYLES = st.sampled_from([None, "'", '"'])
SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def same(a: Any, b: Any) -> bool:
    """Equal value and type (NaN equals NaN, -0.0 keeps its sign)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    return bool(a == b)


def read_everywhere(token: str) -> list[Any]:
    """The token read back as a block mapping value, in a flow mapping and in a flow list."""
    return [yaml.safe_load(f"k: {token}\n")["k"], yaml.safe_load(f"{{k: {token}, j: 1}}")["k"],
            yaml.safe_load(f"[{token}, 1]")[0]]


@SETTINGS
@given(SCALARS)
def test_a_new_scalar_reads_back_as_itself(value: Any) -> None:
    token = render_scalar(value)
    assert "\n" not in token and "\r" not in token
    for back in read_everywhere(token):
        assert same(back, value), (value, token, back)


@SETTINGS
@given(STRINGS, QUOTE_STYLES)
def test_a_string_in_any_old_quote_style_reads_back_as_itself(value: str, style: str | None) -> None:
    token = render_str(value, style)
    if style is not None:  # the old token's quotes are kept where they can hold the value on one line
        assert token[:1] in ("'", '"')
    for back in read_everywhere(token):
        assert same(back, value), (value, style, token, back)


@SETTINGS
@given(STRINGS)
def test_a_key_reads_back_as_itself_and_layer_ranges_are_quoted(key: str) -> None:
    token = render_key(key)
    assert yaml.safe_load(f"{token}: 1\n") == {key: 1}
    assert yaml.safe_load(f"{{{token}: 1}}") == {key: 1}
    if key[:1].isdigit():
        assert token.startswith('"')


@SETTINGS
@given(STRINGS)
def test_a_trainer_word_is_written_plain_when_its_characters_allow(word: str) -> None:
    token = render_scalar(Word(word))
    back = read_everywhere(token)[0]
    if token == word:  # plain: the reader may take it for another type (`off`), that is the point of Word
        assert back == word or not isinstance(back, str)
    else:  # characters that cannot stand plain: quoted, and then it is the string again
        assert same(back, word)


@SETTINGS
@given(st.booleans(), st.sampled_from(["true", "False", "YES", "no", "On", "off", "TRUE"]))
def test_a_boolean_keeps_its_spelling_family_and_case(value: bool, old: str) -> None:
    root = yaml.compose(f"k: {old}\n")
    assert isinstance(root, yaml.MappingNode)
    node = root.value[0][1]
    token = render_scalar(value, node)
    assert yaml.safe_load(f"k: {token}\n")["k"] is value
    assert token.lower() in {"true", "false", "yes", "no", "on", "off"}
    assert (token.lower() in ("true", "false")) == (old.lower() in ("true", "false"))
    assert token[:1].isupper() == old[:1].isupper()


@SETTINGS
@given(SCALARS, st.sampled_from(["plain", "'quoted'", '"quoted"', "~", "4", "1.5", "off", "[1, 2]"]))
def test_set_path_writes_a_value_that_reads_back_with_its_type(value: Any, old: str) -> None:
    """Through the edit itself: the splice into a file with a comment after the value reads back as the
    value, and the rest of the file stays as it was."""
    text = f"a:\n  b: {old}   # note\n  c: 1\n"
    splices = set_path(Doc.parse(text), ("a", "b"), value)
    new = apply_splices(text, splices)
    data = yaml.safe_load(new)
    assert same(data["a"]["b"], value), (value, old, new)
    assert data["a"]["c"] == 1 and new.endswith("  c: 1\n")


@pytest.mark.parametrize(("value", "token"), [
    ("off", '"off"'), ("10", '"10"'), ("full", "full"), ("1e-05", "1e-05"), ("3.0e-4", '"3.0e-4"'), ("", '""'), ("a, b", '"a, b"'),
    ("x.yaml", "x.yaml"), ("a: b", '"a: b"'), (1e-05, "1.0e-05"), (float("inf"), ".inf"), (float("nan"), ".nan"),
    (3, "3"), (None, "null"), (True, "true"), ("a\nb", '"a\\nb"'),
])
def test_tokens_as_written_before_the_emitter_decided(value: Any, token: str) -> None:
    """The spellings the files already written by hp-lsp use: unchanged."""
    assert render_scalar(value) == token
