"""engine.document: ranges, YAML 1.1 typing, duplicates, tags, bounds."""

from __future__ import annotations

import pytest

from engine.diagnostics import Severity
from engine.document import Map, Scalar, Seq, decode, find, locate, parse
from engine.positions import Range

TEXT = """\
model:
  name: llama   # comment
  config_overrides:
    hidden_size: 4096
accelerator:
  tp_size: 8
  flag: yes
  lr: 1e-4
  lst: [1, 2, 4]
  blk:
    - 1
    - 2
  empty:
"""


def test_key_and_value_ranges_are_exact() -> None:
    doc = parse(TEXT)
    assert doc.diagnostics == ()
    key, value = locate(doc, "accelerator.tp_size")  # type: ignore[misc]
    assert key == Range.of(5, 2, 5, 9)
    assert value == Range.of(5, 11, 5, 12)
    key, value = locate(doc, "model.config_overrides.hidden_size")  # type: ignore[misc]
    assert key == Range.of(3, 4, 3, 15)
    assert value == Range.of(3, 17, 3, 21)


def test_block_collection_range_stops_at_last_child() -> None:
    doc = parse(TEXT)
    _, blk = locate(doc, "accelerator.blk")  # type: ignore[misc]
    assert blk == Range.of(10, 4, 11, 7)
    _, item = locate(doc, "accelerator.lst.2")  # type: ignore[misc]
    assert item == Range.of(8, 14, 8, 15)


def test_absent_path_is_none() -> None:
    doc = parse(TEXT)
    assert locate(doc, "accelerator.pp_size") is None
    assert locate(doc, "accelerator.tp_size.x") is None
    assert find(doc.root, "model.nope") == (None, None)


def test_scalars_are_typed_like_pyyaml_safe_load() -> None:
    """The trainer uses yaml.safe_load (YAML 1.1): `yes` is True and `1e-4` (no dot) is a string."""
    doc = parse(TEXT)
    root = doc.root
    assert isinstance(root, Map)
    acc = root.get("accelerator")
    assert isinstance(acc, Map)
    assert acc.get("flag").value is True  # type: ignore[union-attr]
    assert acc.get("lr").value == "1e-4"  # type: ignore[union-attr]
    assert acc.get("tp_size").value == 8  # type: ignore[union-attr]
    assert acc.get("empty").value is None  # type: ignore[union-attr]
    assert isinstance(acc.get("lst"), Seq)


def test_columns_count_code_points() -> None:
    doc = parse("é: 'héllo wörld'\nb: 1\n")
    _key, value = locate(doc, "é")  # type: ignore[misc]
    assert value == Range.of(0, 3, 0, 16)
    assert locate(doc, "b") == (Range.of(1, 0, 1, 1), Range.of(1, 3, 1, 4))


def test_duplicate_key_reports_both_positions() -> None:
    doc = parse("a:\n  k: 1\n  k: 2\n")
    codes = [(d.code, d.range, d.effective_severity.value) for d in doc.diagnostics]
    assert ("HP003", Range.of(2, 2, 2, 3), "error") in codes
    assert ("HP003", Range.of(1, 2, 1, 3), "information") in codes
    err = next(d for d in doc.diagnostics if d.is_error)
    assert err.data["first"] == Range.of(1, 2, 1, 3).to_json()
    assert find(doc.root, "a.k")[1].value == 2  # type: ignore[union-attr]  # last wins, as safe_load


def test_python_tag_is_refused_and_never_constructed() -> None:
    doc = parse("x: !!python/object/apply:os.system ['false']\n")
    assert [d.code for d in doc.diagnostics] == ["HP007"]
    assert doc.diagnostics[0].range.start.line == 0
    assert doc.diagnostics[0].range.start.character == 3


def test_custom_tag_refused() -> None:
    doc = parse("x: !secret abc\n")
    assert [d.code for d in doc.diagnostics] == ["HP007"]


def test_alias_bomb_refused_quickly() -> None:
    lines = ['a: &a ["x","x","x","x","x","x","x","x","x","x"]']
    for i in range(1, 9):
        prev, cur = chr(96 + i), chr(97 + i)
        lines.append(f"{cur}: &{cur} [" + ",".join([f"*{prev}"] * 10) + "]")
    doc = parse("\n".join(lines) + "\n")
    assert doc.root is None
    assert [d.code for d in doc.diagnostics] == ["HP006"]
    assert doc.diagnostics[0].range.start.line == 1


def test_small_aliases_and_merge_keys_resolve() -> None:
    doc = parse("base: &b {tp: 2, pp: 4}\nrun:\n  <<: *b\n  pp: 8\n")
    assert doc.diagnostics == ()
    assert find(doc.root, "run.tp")[1].value == 2  # type: ignore[union-attr]
    assert find(doc.root, "run.pp")[1].value == 8  # type: ignore[union-attr]


def test_deep_nesting_is_refused() -> None:
    doc = parse("[" * 5000 + "]" * 5000)
    assert doc.root is None
    assert [d.code for d in doc.diagnostics] == ["HP005"]
    doc = parse("".join(" " * i + "a:\n" for i in range(300)))
    assert [d.code for d in doc.diagnostics] == ["HP005"]


def test_size_cap() -> None:
    doc = parse("a: 1\n" * 100, max_bytes=100)
    assert [d.code for d in doc.diagnostics] == ["HP005"]
    assert "too large" in doc.diagnostics[0].message


@pytest.mark.parametrize(
    ("text", "line", "char"),
    [
        ("a: [1, 2\n", 0, 3),  # unclosed bracket: at its opening
        ("a: 1\n\tb: 2\n", 1, 0),  # tab
        ("a: 'x\n", 0, 3),
        ("a: b: c\n", 0, 4),
    ],
)
def test_syntax_errors_are_positioned(text: str, line: int, char: int) -> None:
    doc = parse(text)
    assert [d.code for d in doc.diagnostics] == ["HP001"]
    assert (doc.diagnostics[0].range.start.line, doc.diagnostics[0].range.start.character) == (line, char)


def test_tab_message_says_spaces() -> None:
    doc = parse("a:\n\tb: 2\n")
    assert "spaces" in doc.diagnostics[0].message


def test_empty_and_comment_only() -> None:
    assert parse("").root is None and parse("").diagnostics == ()
    assert parse("# nothing\n").root is None


def test_decode_binary_and_latin1() -> None:
    text, diags = decode(b"a: 1\nb: \x00\x01")
    assert text is None and diags[0].code == "HP004" and diags[0].range.start.line == 1
    text, diags = decode(b"a: caf\xe9\n")
    assert text is None and diags[0].code == "HP004"
    assert diags[0].range == Range.of(0, 6, 0, 7)
    text, diags = decode(b"\xef\xbb\xbfa: 1\n")
    assert text == "a: 1\n" and diags == ()


def test_nul_in_text_refused() -> None:
    doc = parse("a: 1\x00")
    assert [d.code for d in doc.diagnostics] == ["HP004"]


def test_huge_integer_kept_as_text() -> None:
    doc = parse("a: " + "9" * 5000 + "\n")
    node = find(doc.root, "a")[1]
    assert isinstance(node, Scalar)


@pytest.mark.parametrize("text", ["? [a, b]\n: c\n", "a: 1\n? {x: 1}\n: c\n"])
def test_a_list_or_mapping_key_is_what_the_trainers_loader_refuses(text: str) -> None:
    """PyYAML's safe_load (the trainer's) stops at a list or mapping key ("found unhashable key"); libyaml composes
    it, and it passed without a word."""
    errors = [d for d in parse(text).diagnostics if d.code == "HP001"]
    assert len(errors) == 1 and "unhashable key" in errors[0].message
    assert errors[0].range.start.line == text.count("\n", 0, text.index("?")) and errors[0].range.start.character == 2


@pytest.mark.parametrize(("text", "code", "at"), [
    ("a: &k [x]\nb:\n  ? *k\n  : 1\n", "HP001", (2, 4)),  # a list key written as an alias
    ("a: &k [x]\n? *k\n: 1\n", "HP001", (1, 2)),  # the anchor in the same mapping
    ("m: {? &k [x] : 1, ? *k : 2}\n", "HP001", (0, 20)),  # flow style, two of them
    ("a: &k foo\nb:\n  foo: 2\n  ? *k\n  : 1\n", "HP003", (3, 4)),  # a duplicate key written as an alias
])
def test_a_key_written_as_an_alias_is_said_where_the_alias_is(text: str, code: str, at: tuple[int, int]) -> None:
    """An alias key is the node it names, whose marks are the anchor's: HP001 and HP003 had pointed at the anchor,
    lines away from the key the user wrote."""
    said = [d for d in parse(text).diagnostics if d.code == code and d.severity != Severity.INFORMATION]
    assert (said[-1].range.start.line, said[-1].range.start.character) == at
    assert text.splitlines()[at[0]][at[1]:].startswith("*k")


@pytest.mark.parametrize("text", ["a: &x [*x]\n", "b: &y {k: *y}\n", "c: &z [1, [2, *z]]\n"])
def test_an_alias_inside_the_node_it_names_is_a_cycle(text: str) -> None:
    """It read as "nesting too deep (more than 128 levels)"; shared aliases that are no cycle stay fine."""
    (d,) = [d for d in parse(text).diagnostics if d.code == "HP005"]
    assert "a cycle" in d.message
    assert not parse("base: &b {x: 1}\nu: *b\nv: {<<: *b, y: 2}\nw: [*b, *b]\n").diagnostics


@pytest.mark.parametrize(("text", "found"), [
    ("a:\n  <<: 5\n  b: 1\n", "the scalar '5'"),
    ("s: &s hello\na:\n  <<: [*s]\n", "a list holding the scalar 'hello'"),
    ("a:\n  <<: [[1]]\n", "a list holding a list"),
])
def test_a_merge_of_no_mapping_is_what_the_trainers_loader_refuses(text: str, found: str) -> None:
    """PyYAML's constructor stops on it ("expected a mapping or list of mappings for merging"); it passed without a
    word, and the merge was skipped."""
    (d,) = [d for d in parse(text).diagnostics if d.code == "HP001"]
    assert found in d.message and "merge" in d.message
    assert text.splitlines()[d.range.start.line][d.range.start.character:].startswith("<<")
    assert not [d for d in parse("b: &b {x: 1}\na:\n  <<: [*b, {y: 2}]\n  <<: *b\n").diagnostics if d.code == "HP001"]


def test_a_key_two_merged_mappings_disagree_on_is_said_and_read_as_the_merge_rule_says() -> None:
    """`<<: [*base, *over]` giving tp_size 2 and 4: PyYAML up to 6.0.3 reads the first, 6.0.4 the last (HP012);
    read here as the first. Stated in the mapping, or merged by two `<<` keys (the later wins under both), it is
    no question."""
    text = "base: &base {tp: 2, pp: 1}\nover: &over {tp: 4, pp: 1}\na:\n  <<: [*base, *over]\n"
    doc = parse(text)
    (d,) = [d for d in doc.diagnostics if d.code == "HP012"]
    assert "'tp'" in d.message and "2 and 4" in d.message and d.range.start.line == 3
    a = find(doc.root, "a")[1]
    assert isinstance(a, Map) and a.get("tp").value == 2  # type: ignore[union-attr]
    assert not [d for d in parse(text + "  tp: 8\n").diagnostics if d.code == "HP012"]
    two = parse("base: &base {tp: 2}\nover: &over {tp: 4}\na:\n  <<: *base\n  <<: *over\n")
    assert not [d for d in two.diagnostics if d.code == "HP012"]
    assert find(two.root, "a")[1].get("tp").value == 4  # type: ignore[union-attr]


@pytest.mark.parametrize(("text", "at"), [
    ("n: &n tp_siz\naccelerator:\n  pp_size: 1\n  *n : 2\n", (3, 2)),
])
def test_a_key_written_as_an_alias_is_where_its_checks_point(text: str, at: tuple[int, int]) -> None:
    """Map keys built from an alias carry the alias's place: HP101 and its rename fix pointed at the anchor."""
    doc = parse(text)
    acc = find(doc.root, "accelerator")[1]
    assert isinstance(acc, Map)
    kn = acc.key_node("tp_siz")
    assert kn is not None and (kn.range.start.line, kn.range.start.character) == at


@pytest.mark.parametrize(("text", "at"), [
    ("a: &x\n  b: 1\n  self: *x\n", (2, 8)),
    ("a: &x\n  <<: *x\n", (1, 6)),
    ("a: &x {y: [*z], w: *x}\nz: &z 1\n", None),  # *z names no anchor yet: a syntax error (HP001), no cycle
    ("b: &y 1\na: &x [*y, *x]\n", (1, 11)),
])
def test_a_cycle_is_said_at_the_alias_that_closes_it(text: str, at: tuple[int, int] | None) -> None:
    found = [d for d in parse(text).diagnostics if d.code == "HP005"]
    if at is None:
        assert not found
        return
    assert (found[0].range.start.line, found[0].range.start.character) == at
    assert text.splitlines()[at[0]][at[1]:].startswith("*x")


def test_merged_and_alias_keys_side_by_side_keep_their_places() -> None:
    """A merge (`<<: *b`) before an alias key (`*n : 4`): the alias's token was searched from the merge key's end
    and `*b` was taken for it (HP003 one line off)."""
    text = "n: &n tp_size\nb: &b {tp_size: 2}\naccelerator:\n  <<: *b\n  *n : 4\n  tp_size: 8\n"
    first = next(d for d in parse(text).diagnostics if d.code == "HP003" and d.severity == Severity.INFORMATION)
    assert (first.range.start.line, first.range.start.character) == (4, 2)


def test_utf16_is_said_as_utf16() -> None:
    """A UTF-16 file (Windows Notepad's "Unicode") read as "binary file (contains NUL bytes)"."""
    text, diags = decode("a: 1\n".encode("utf-16"))
    assert text is None and diags[0].code == "HP004" and "UTF-16" in diags[0].message


def test_a_star_in_a_comment_is_no_alias() -> None:
    """`# renamed below to *n` before the alias key `*n`: the key's place was taken inside the comment."""
    text = "n: &n tp_size\naccelerator:\n  tp_size: 8   # renamed below to *n\n  *n : 4\n"
    err = next(d for d in parse(text).diagnostics if d.code == "HP003" and d.severity != Severity.INFORMATION)
    assert (err.range.start.line, err.range.start.character) == (3, 2)


def test_merge_conflicts_are_read_as_typed_values_through_nested_merges() -> None:
    """A conflict hidden in a nested merge (`b: {<<: *a}`) was missed; `1` against `0x1` (both 1) was flagged, and
    `1` against `'1'` (a number and a string) was not."""
    def said(text: str) -> list[str]:
        return [d.message for d in parse(text).diagnostics if d.code == "HP012"]
    assert said("a: &a {tp: 1}\nb: &b {<<: *a}\nc: &c {tp: 2}\nm:\n  <<: [*b, *c]\n")
    assert "1 and '1'" in said("b: &b {tp: 1}\nc: &c {tp: '1'}\nm:\n  <<: [*b, *c]\n")[0]
    assert not said("b: &b {tp: 1}\nc: &c {tp: 0x1}\nm:\n  <<: [*b, *c]\n")
