"""YAML text -> a small immutable node tree with source ranges, read safely and in bounded time and memory.

Why PyYAML's C composer (`yaml.compose(..., Loader=CSafeLoader)`) and not ruamel: the node marks of both are
0-based code points, but libyaml composes a 5 MB file in about 0.5 s where ruamel takes 7.6 s
([LSP], "Large and hostile YAML"), libyaml refuses nesting deeper than 1000 levels
itself instead of overflowing the Python stack, and it resolves plain scalars with YAML 1.1 rules, which is
exactly how the trainer (`yaml.safe_load`) types them (`yes` is a bool, `1e-4` a string). When the C
extension is missing the pure-Python SafeLoader is used (same rules, slower; RecursionError caught).

Composing never constructs Python objects, so `!!python/...` tags are never executed: any tag outside the
YAML core schema becomes an HP007 diagnostic and the node is read as if untagged. Aliases share one node in
the tree (a DAG); the expanded size is computed with memoisation and a document whose expansion exceeds
`max_nodes` is refused (HP006) before anything walks it, which defuses "billion laughs".
"""

from __future__ import annotations

import bisect
import functools
import gc
import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from engine.diagnostics import Diagnostic, Severity
from engine.files import ReadFailure, read_bounded
from engine.positions import DOCUMENT_START, Position, Range

try:  # libyaml: fast, bounded nesting
    _BASE_LOADER: Any = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - PyYAML built without libyaml
    _BASE_LOADER = yaml.SafeLoader


class _Loader(_BASE_LOADER):  # type: ignore[misc,valid-type]
    """The safe loader with a cached implicit-tag resolver. libyaml's composer calls `resolve` once per node,
    and PyYAML's Python regex scan there was the largest Python cost of composing a big file; keys and small
    values repeat through a config, and an `lru_cache` hit runs no Python frame at all. Same rules (YAML 1.1)
    and tags: the result depends only on the arguments, since no path resolvers are registered."""

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self.resolve = functools.lru_cache(maxsize=1 << 16)(self._resolve_uncached)  # type: ignore[method-assign]

    def _resolve_uncached(self, kind: Any, value: Any, implicit: Any) -> Any:
        if kind is yaml.MappingNode:
            return self.DEFAULT_MAPPING_TAG
        if kind is yaml.SequenceNode:
            return self.DEFAULT_SEQUENCE_TAG
        return _BASE_LOADER.resolve(self, kind, value, implicit)


_LOADER: Any = _Loader

DEFAULT_MAX_BYTES = 10 * 1024 * 1024  # 10 MiB: a 5 MB file is still analysed (benchmarks/hostile_inputs.py)
DEFAULT_MAX_NODES = 1_000_000  # expanded nodes (aliases counted once per use)
DEFAULT_MAX_DEPTH = 128  # real configs nest < 10 deep; libyaml's own limit is 1000

_CORE_TAGS = frozenset(
    "tag:yaml.org,2002:" + t
    for t in ("str", "int", "float", "bool", "null", "map", "seq", "timestamp", "binary", "merge",
              "omap", "pairs", "set", "value")
)
_MERGE_TAG = "tag:yaml.org,2002:merge"
_TYPED_TAGS = frozenset("tag:yaml.org,2002:" + t for t in ("int", "float", "bool", "timestamp", "binary"))
_STR_TAG = "tag:yaml.org,2002:str"
_INT_TAG = "tag:yaml.org,2002:int"
_BOOL_TAG = "tag:yaml.org,2002:bool"
_NULL_TAG = "tag:yaml.org,2002:null"


class Node:
    """A YAML node. `range` covers the token (scalars) or the collection (block collections: up to the end of
    their last child, not to the next key's line). Nodes are immutable; a collection converts its children
    from the composed PyYAML nodes on first access, so a 5 MB file pays only for the sections read."""

    __slots__ = ("range",)

    def __init__(self, rng: Range) -> None:
        self.range = rng

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.range.start.line}:{self.range.start.character})"


class Scalar(Node):
    """A scalar typed as PyYAML's safe loader types it (YAML 1.1): str, int, float, bool, None, or other
    (timestamps, bytes). `text` is the scalar's string value before typing; `style` is PyYAML's quote
    style ('' plain, "'" single, '"' double, '|' / '>' block)."""

    __slots__ = ("style", "tag", "text", "value")

    def __init__(self, rng: Range, value: Any, text: str, tag: str, style: str) -> None:
        super().__init__(rng)
        self.value = value
        self.text = text
        self.tag = tag
        self.style = style

    def __repr__(self) -> str:
        return f"Scalar({self.value!r} @{self.range.start.line}:{self.range.start.character})"


class Seq(Node):
    __slots__ = ("_builder", "_depth", "_items", "_raw", "flow")

    def __init__(self, rng: Range, raw: yaml.SequenceNode, builder: _Builder, depth: int) -> None:
        super().__init__(rng)
        self._raw = raw
        self._builder = builder
        self._depth = depth
        self._items: tuple[Node, ...] | None = None
        self.flow = bool(raw.flow_style)

    @property
    def items(self) -> tuple[Node, ...]:
        if self._items is None:
            self._items = tuple(self._builder.build(c, self._depth + 1) for c in self._raw.value)
        return self._items


class Map(Node):
    """A mapping. `pairs` keeps every pair in source order (duplicates included); lookups see the last value
    of a key, as the trainer's loader does, and keys merged in with `<<` after the explicit ones."""

    __slots__ = ("_builder", "_depth", "_index", "_pairs", "_raw", "flow")

    def __init__(self, rng: Range, raw: yaml.MappingNode, builder: _Builder, depth: int) -> None:
        super().__init__(rng)
        self._raw = raw
        self._builder = builder
        self._depth = depth
        self._pairs: tuple[tuple[Node, Node], ...] | None = None
        self._index: dict[Any, tuple[Node, Node]] | None = None
        self.flow = bool(raw.flow_style)

    def _load(self) -> dict[Any, tuple[Node, Node]]:
        if self._index is None:
            self._pairs, self._index = self._builder.mapping_children(self._raw, self._depth)
        return self._index

    @property
    def pairs(self) -> tuple[tuple[Node, Node], ...]:
        self._load()
        assert self._pairs is not None
        return self._pairs

    def get(self, key: str) -> Node | None:
        hit = self._load().get(key)
        return hit[1] if hit else None

    def key_node(self, key: str) -> Node | None:
        hit = self._load().get(key)
        return hit[0] if hit else None

    def items(self) -> list[tuple[str, Node, Node]]:
        """(key, key node, value node) for every distinct string key, last value winning, in source order."""
        out = [(k, kn, vn) for k, (kn, vn) in self._load().items() if isinstance(k, str)]
        out.sort(key=lambda t: (t[1].range.start.line, t[1].range.start.character))
        return out

    def __contains__(self, key: object) -> bool:
        try:
            return key in self._load()
        except TypeError:
            return False


@dataclass(frozen=True, slots=True)
class Document:
    """A parsed text. `root` is None when the text is empty (comments only) or could not be parsed;
    `diagnostics` holds the reading problems (codes HP0xx) with precise ranges."""

    text: str
    root: Node | None
    diagnostics: tuple[Diagnostic, ...] = ()
    path: str | None = None

    @property
    def ok(self) -> bool:
        return not any(d.is_error for d in self.diagnostics)

    def end(self) -> Position:
        return end_position(self.text)


# Line breaks as LSP counts them (LF, CR, CRLF), which every range here uses: editors number lines so.
# libyaml also breaks lines at NEL, LS and PS (YAML 1.1), so with one of those in the text its mark lines
# run ahead of the editor's; marks are then converted from their code-point index (`Marks`).
_BREAK_RE = re.compile("\r\n|[\r\n]")
_YAML_ONLY_BREAKS = re.compile("[\x85\u2028\u2029]")


def split_lines(text: str) -> list[str]:
    """The text's lines without their breaks (LSP's notion of a line break)."""
    return _BREAK_RE.split(text)


def end_position(text: str) -> Position:
    """The position just past the last character of `text`."""
    lines = split_lines(text)
    return Position(len(lines) - 1, len(lines[-1]))


def clamp(text: str, pos: Position) -> Position:
    """The nearest position inside `text` (a mark past the end of a line or of the text is pulled back)."""
    lines = split_lines(text)
    if pos.line >= len(lines):
        return Position(len(lines) - 1, len(lines[-1]))
    line = max(pos.line, 0)
    return Position(line, max(0, min(pos.character, len(lines[line]))))


def _pos_of_index(text: str, index: int) -> Position:
    index = max(0, min(index, len(text)))
    return end_position(text[:index])


class Marks:
    """libyaml marks -> LSP positions in `text`. A mark's line and column are used as they are unless the
    text holds a break only YAML counts (NEL, LS, PS) or a BOM that was cut off before composing; then the
    position comes from the mark's code-point index (`shift`: characters cut off the front)."""

    __slots__ = ("_line_starts", "_starts", "shift", "text")

    def __init__(self, text: str, shift: int = 0) -> None:
        self.text = text
        self.shift = shift
        self._starts: list[int] | None = None  # set where marks are converted from their index
        self._line_starts: list[int] | None = None  # built on the first at_index: each call is then a bisection
        if shift or _YAML_ONLY_BREAKS.search(text):
            self._starts = self._line_starts = [0] + [m.end() for m in _BREAK_RE.finditer(text)]

    def at_index(self, index: int) -> Position:
        starts = self._line_starts
        if starts is None:
            starts = self._line_starts = [0] + [m.end() for m in _BREAK_RE.finditer(self.text)]
        index = max(0, min(index, len(self.text)))
        line = bisect.bisect_right(starts, index) - 1
        return Position(line, index - starts[line])

    def pos(self, mark: Any) -> Position:
        if self._starts is None:
            return Position(int(mark.line), int(mark.column))
        return self.at_index(int(mark.index) + self.shift)

    def range(self, node: yaml.Node) -> Range:
        return Range(self.pos(node.start_mark), self.pos(node.end_mark))


def decode(data: bytes, *, path: str | None = None) -> tuple[str | None, tuple[Diagnostic, ...]]:
    """Bytes -> text. Binary content (NUL bytes) and invalid UTF-8 become HP004 at the offending byte's
    line and column; a UTF-8 BOM is dropped (editors hide it; positions then match the editor's)."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):  # UTF-16's byte-order mark (its NULs read as "binary")
        return None, (Diagnostic("HP004", "UTF-16 text: HyperParallel's trainer reads its configs as UTF-8; save "
                                 "the file as UTF-8", Range(Position(0, 0), Position(0, 1))),)
    if b"\x00" in data:
        idx = data.index(b"\x00")
        head = data[:idx].decode("utf-8", errors="replace")
        pos = _pos_of_index(head, len(head))
        return None, (Diagnostic("HP004", "binary file (contains NUL bytes): not a YAML config",
                                 Range(pos, Position(pos.line, pos.character + 1))),)
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        return data.decode("utf-8"), ()
    except UnicodeDecodeError as exc:
        head = data[: exc.start].decode("utf-8", errors="replace")
        pos = _pos_of_index(head, len(head))
        return None, (Diagnostic(
            "HP004",
            f"file is not valid UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start}); save it as UTF-8",
            Range(pos, Position(pos.line, pos.character + 1)),
        ),)


def read_text(path: str, *, max_bytes: int = DEFAULT_MAX_BYTES) -> tuple[str | None, tuple[Diagnostic, ...]]:
    """Read a file from disk as UTF-8 text, refusing (HP004/HP005) what cannot be analysed. Goes through the
    bounded reader (engine.files): regular files only, size checked before reading."""
    got = read_bounded(path, max_bytes)
    if isinstance(got, ReadFailure):
        if got.kind == "too_large":
            return None, (_too_large(got.size, max_bytes),)
        if got.kind == "missing":
            return None, (Diagnostic("HP004", f"config file not found: {path}"),)
        return None, (Diagnostic("HP004", got.reason),)
    return decode(got.data, path=path)


def _fmt_size(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1_000_000 else f"{n / 1e3:.1f} KB"


def _too_large(size: int | None, max_bytes: int, rng: Range = DOCUMENT_START) -> Diagnostic:
    limit = _fmt_size(max_bytes)
    what = f"{_fmt_size(size)} > {limit}" if size is not None else f"over {limit}"
    return Diagnostic("HP005", f"file too large to analyse: {what} (raise the size limit, hpLsp.maxFileSizeKb)",
                      rng)


def text_too_large(text: str, max_bytes: int) -> Diagnostic | None:
    """HP005 for an editor buffer over `max_bytes`, on its first line: the server tests a buffer before it
    reads anything, by the rule the reader applies to a file (one emitter of the code, here)."""
    size = len(text.encode("utf-8", errors="surrogatepass"))
    if size <= max_bytes:
        return None
    return _too_large(size, max_bytes, Range.of(0, 0, 0, len(text.split("\n", 1)[0])))


def _reader_diag(exc: yaml.reader.ReaderError, text: str, body: str, marks: Marks) -> Diagnostic:
    """A character YAML does not allow (VT, FF, \x1c, other C0 controls...): libyaml reports its UTF-8
    byte offset in the composed body."""
    index = len(body.encode("utf-8", errors="surrogatepass")[: max(0, int(exc.position))].decode("utf-8", "ignore"))
    pos = marks.at_index(index + marks.shift)
    code = exc.character if isinstance(exc.character, int) else ord(str(exc.character)[:1] or "?")
    return Diagnostic("HP001", f"YAML syntax error: character U+{code:04X} is not allowed in YAML ({exc.reason}); "
                      "remove it or write it as an escape in a double-quoted string",
                      Range(pos, clamp(text, Position(pos.line, pos.character + 1))))


def _syntax_diag(exc: yaml.YAMLError, text: str, marks: Marks | None = None) -> Diagnostic:
    marks = marks or Marks(text)
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    context = getattr(exc, "context", None)
    pos = clamp(text, marks.pos(mark) if mark is not None else end_position(text))
    ctx_mark = getattr(exc, "context_mark", None)
    if ctx_mark is not None and pos >= clamp(text, end_position(text)):
        # An unclosed bracket or quote is reported at the end of the text; point at where it was opened.
        pos = clamp(text, marks.pos(ctx_mark))
    end = clamp(text, Position(pos.line, pos.character + 1))
    lines = split_lines(text)
    at_tab = pos.line < len(lines) and pos.character < len(lines[pos.line]) and lines[pos.line][pos.character] == "\t"
    if "maximum nesting depth" in str(problem):
        return Diagnostic("HP005", "nesting too deep to analyse (more than 1000 levels)", Range(pos, end))
    msg = str(problem)
    if "tab" in msg or at_tab:
        msg = "tab character: YAML indentation must use spaces, not tabs"
    elif context and context not in msg:
        msg = f"{msg} ({context})"
    return Diagnostic("HP001", f"YAML syntax error: {msg}", Range(pos, end))


_BOOL = {"yes": True, "no": False, "true": True, "false": False, "on": True, "off": False}


class _Builder:
    """Checks the composed tree once (size with aliases expanded, depth, tags, duplicate keys) and then
    converts nodes on demand, sharing aliased nodes."""

    def __init__(self, text: str, max_nodes: int, max_depth: int, marks: Marks | None = None) -> None:
        self.text = text
        self.marks = marks or Marks(text)
        self.max_nodes = max_nodes
        self.max_depth = max_depth
        self.memo: dict[int, Node] = {}
        self.diags: list[Diagnostic] = []
        self.constructor = yaml.SafeLoader("")  # only its scalar constructors are used (never python tags)

    # -- one pass over the distinct nodes ----------------------------------------------------------------------
    def check(self, root: yaml.Node) -> Diagnostic | None:
        """Expanded size (memoised per shared node, so a billion-laughs document costs its distinct nodes),
        nesting depth, tags outside the core schema and duplicate keys. Returns a refusal, or None."""
        sizes: dict[int, int] = {}
        cap = self.max_nodes + 1
        scalar_cls = yaml.ScalarNode
        core = _CORE_TAGS
        explicit = "!" in self.text  # explicit tags (`!!timestamp 5`) can name a type the text is not
        if isinstance(root, scalar_cls):
            if root.tag not in core and root.tag != "!":
                self._tag(root)
            return None
        stack: list[tuple[yaml.Node, int, bool]] = [(root, 0, False)]
        path: set[int] = set()  # the nodes entered and not yet left: the ancestors of what is entered next
        while stack:
            node, depth, done = stack.pop()
            nid = id(node)
            if nid in sizes:
                continue
            value = node.value
            is_map = isinstance(node, yaml.MappingNode)
            children = [x for pair in value for x in pair] if is_map else value
            if not done:
                if depth > self.max_depth:
                    rng = self.marks.range(node)
                    return Diagnostic("HP005", f"nesting too deep to analyse (more than {self.max_depth} levels)",
                                      Range(rng.start, rng.start))
                if node.tag not in core:
                    self._tag(node)
                if is_map:
                    self._duplicates(node)  # type: ignore[arg-type]
                stack.append((node, depth, True))
                path.add(nid)
                for n, c in enumerate(children):
                    if id(c) in path:  # `a: &x [*x]`: an alias inside the node it names
                        rng = self.alias_spans(node).get(n) or self.marks.range(c)
                        return Diagnostic("HP005", "an alias refers to the node that holds it (a cycle): a config "
                                          "that contains itself cannot be analysed", Range(rng.start, rng.start))
                    if c.__class__ is scalar_cls:
                        if c.tag not in core and c.tag != "!":
                            self._tag(c)
                        elif explicit and c.tag in _TYPED_TAGS:
                            self._typed(c)
                    elif id(c) not in sizes:
                        stack.append((c, depth + 1, False))
                continue
            path.discard(nid)
            total = 1
            get = sizes.get
            for c in children:
                total += get(id(c), 1)
            sizes[nid] = min(total, cap)
        if sizes[id(root)] > self.max_nodes:
            return Diagnostic(
                "HP006",
                f"alias expansion too large: over {self.max_nodes:,} nodes once aliases are expanded (a 'billion "
                "laughs' document?); refusing to analyse",
                _first_alias_range(self.text),
            )
        return None

    def _typed(self, node: yaml.ScalarNode) -> None:
        """An explicitly typed scalar the trainer's loader cannot construct (`!!timestamp 5`, `!!int x`,
        `!!bool maybe`): yaml.safe_load fails on the whole file, so it is an error here too."""
        try:
            self.constructor.construct_object(node, deep=False)
            return
        except Exception:  # PyYAML's constructors raise AttributeError, KeyError, ValueError
            pass
        shown = node.tag.replace("tag:yaml.org,2002:", "!!")
        self.diags.append(Diagnostic(
            "HP007",
            f"{node.value!r} is not a valid {shown} value: the trainer's yaml.safe_load fails on this file. "
            f"Remove the tag or fix the value",
            self.marks.range(node),
            data={"tag": shown},
        ))

    def _tag(self, node: yaml.Node) -> None:
        tag = node.tag or ""
        shown = tag.replace("tag:yaml.org,2002:", "!!")
        rng = self.marks.range(node)
        end = Position(rng.start.line, rng.start.character + len(shown))
        self.diags.append(Diagnostic(
            "HP007",
            f"unsupported YAML tag {shown}: tags are never executed here; the trainer's safe loader refuses it "
            "too. Remove the tag",
            Range(rng.start, clamp(self.text, end)),
            data={"tag": shown},
        ))

    def alias_spans(self, node: yaml.Node) -> dict[int, Range]:
        """alias_tokens of `node` as ranges of this text."""
        return {n: Range(self.marks.at_index(a), self.marks.at_index(b))
                for n, (a, b) in alias_tokens(self.text, node, self.marks.shift).items()}

    def _merge_conflicts(self, lst: yaml.SequenceNode, explicit: set[str]) -> list[tuple[str, str]]:
        """(key, its values) for each string key that two mappings of a merge list give different values (as the
        loader types them, their own merges included) and the mapping itself does not state (its own key wins
        under every PyYAML)."""
        seen: dict[str, list[Node]] = {}
        for src in merged_sources(self.build(lst, 0)):
            for key, (_k, v) in src._load().items():
                if isinstance(key, str) and key not in explicit:
                    seen.setdefault(key, []).append(v)

        def typed(v: Node) -> object:
            return (type(v.value), v.value) if isinstance(v, Scalar) else id(v)

        def shown(v: Node) -> str:
            if not isinstance(v, Scalar):
                return type(v).__name__.lower()
            return repr(v.value)[:40] if isinstance(v.value, str) else v.text[:40]

        return [(k, " and ".join(dict.fromkeys(shown(v) for v in vs))) for k, vs in seen.items()
                if len({typed(v) for v in vs}) > 1]

    def _duplicates(self, node: yaml.MappingNode) -> None:
        seen: dict[tuple[str, str], int] = {}
        spans: dict[int, Range] | None = None  # alias_spans, computed on the first key said

        def at(i: int) -> Range:
            nonlocal spans
            spans = self.alias_spans(node) if spans is None else spans
            return spans.get(2 * i) or self.marks.range(node.value[i][0])

        merge_lists: list[tuple[int, yaml.SequenceNode]] = []
        for i, (k, value) in enumerate(node.value):
            if isinstance(k, yaml.SequenceNode | yaml.MappingNode) and k.tag != _MERGE_TAG:
                # A list or mapping as a key (`? [a, b]`): the trainer's safe_load builds a dict of it and stops
                # ("found unhashable key"); libyaml composes it, so it is said here.
                self.diags.append(Diagnostic(
                    "HP001", "YAML syntax error: HyperParallel's trainer (PyYAML safe_load) refuses a list or mapping "
                    "as a key (found unhashable key); use a plain key", at(i)))
                continue
            if k.tag == _MERGE_TAG:
                found = _unmergeable(value)
                if found:
                    # PyYAML's constructor (the trainer's safe_load) stops on it: "expected a mapping or list of
                    # mappings for merging"; libyaml composes it and our reader skipped it without a word.
                    self.diags.append(Diagnostic(
                        "HP001", f"YAML syntax error: a merge (<<) takes a mapping or a list of mappings, not {found}; "
                        "HyperParallel's trainer (PyYAML safe_load) refuses this file", at(i)))
                elif isinstance(value, yaml.SequenceNode):
                    merge_lists.append((i, value))
                continue
            if not isinstance(k, yaml.ScalarNode):
                continue
            ident = (k.tag, k.value)
            if ident not in seen:
                seen[ident] = i
                continue
            first_rng, rng = at(seen[ident]), at(i)
            key = k.value
            self.diags.append(Diagnostic(
                "HP003",
                f"duplicate key '{key}' (first defined at line {first_rng.start.line + 1}); the later value wins "
                "in the trainer: remove one",
                rng,
                data={"first": first_rng.to_json(), "key": str(key)},
            ))
            self.diags.append(Diagnostic(
                "HP003",
                f"key '{key}' is defined again at line {rng.start.line + 1}; this value is ignored",
                first_rng,
                severity=Severity.INFORMATION,
                data={"second": rng.to_json(), "key": str(key)},
            ))
            seen[ident] = i
        for i, lst in merge_lists:
            for key, values in self._merge_conflicts(lst, {str(k.value) for k, _ in node.value if k.tag != _MERGE_TAG}):
                self.diags.append(Diagnostic(
                    "HP012", f"'{key}' is merged in from two mappings of this list with different values "
                    f"({values}): PyYAML up to 6.0.3 reads the first (the YAML merge rule, and what is checked and "
                    "priced here), PyYAML 6.0.4 mostly the last, so the trainer's reading depends on its PyYAML: "
                    f"state '{key}' in this mapping", at(i), data={"key": key}))

    # -- conversion on demand --------------------------------------------------------------------------------
    def build(self, node: yaml.Node, depth: int = 0) -> Node:
        cached = self.memo.get(id(node))
        if cached is not None:
            return cached
        out: Node
        if isinstance(node, yaml.ScalarNode):
            out = self._scalar(node)
        elif isinstance(node, yaml.SequenceNode):
            out = Seq(self._collection_range(node), node, self, depth)
        else:
            assert isinstance(node, yaml.MappingNode)
            out = Map(self._collection_range(node), node, self, depth)
        self.memo[id(node)] = out
        return out

    def _collection_range(self, node: Any) -> Range:
        rng = self.marks.range(node)
        if node.flow_style or not node.value:
            return rng
        # A block collection's end mark runs to the next token (often the next line): end at the last child's
        # end instead, found by descending through last children without converting anything.
        last: Any = node.value[-1]
        while True:
            if isinstance(last, tuple):
                last = last[1]
            if isinstance(last, yaml.ScalarNode) or last.flow_style or not last.value:
                break
            last = last.value[-1]
        end = self.marks.pos(last.end_mark)
        if isinstance(last, yaml.ScalarNode) and last.value == "" and not last.style:
            end = self.marks.pos(last.start_mark)
        return Range(rng.start, max(rng.start, min(end, rng.end)))

    def _scalar(self, node: yaml.ScalarNode) -> Scalar:
        tag = node.tag or ""
        raw = node.value
        value: Any = raw
        if tag == _STR_TAG or tag == "!":
            pass
        elif tag == _INT_TAG and raw.isdigit() and len(raw) < 4000 and (raw == "0" or raw[0] != "0"):
            value = int(raw)
        elif tag == _BOOL_TAG and raw.lower() in _BOOL:
            value = _BOOL[raw.lower()]
        elif tag == _NULL_TAG:
            value = None
        elif tag in _CORE_TAGS and tag != _MERGE_TAG:
            try:
                value = self.constructor.construct_object(node, deep=False)
            except Exception:  # AttributeError for `!!timestamp 5`, KeyError for `!!bool x`
                value = raw  # e.g. a 10^5-digit int or a bad timestamp: keep the text (check() reported it)
        rng = self.marks.range(node)
        if raw == "" and not node.style and rng.start != rng.end:
            rng = Range(rng.start, rng.start)
        return Scalar(rng, value, str(raw), tag, node.style or "")

    def mapping_children(self, node: yaml.MappingNode, depth: int
                         ) -> tuple[tuple[tuple[Node, Node], ...], dict[Any, tuple[Node, Node]]]:
        pairs: list[tuple[Node, Node]] = []
        index: dict[Any, tuple[Node, Node]] = {}
        merged: dict[Any, tuple[Node, Node]] = {}
        # keys written as aliases (`*n : 2`) carry the alias's place, not the anchor's (alias_tokens)
        spans = self.alias_spans(node) if "*" in self.text else {}
        for i, (k, v) in enumerate(node.value):
            kn = self.build(k, depth + 1)
            at = spans.get(2 * i)
            if at is not None and isinstance(kn, Scalar):
                kn = Scalar(at, kn.value, kn.text, kn.tag, kn.style)
            vn = self.build(v, depth + 1)
            pairs.append((kn, vn))
            if k.tag == _MERGE_TAG:
                # Within one merge list the earlier mapping wins (the YAML merge-key spec, PyYAML up to 6.0.3;
                # 6.0.4 keeps the later one: HP012 where they differ); of two `<<` keys the later wins (both).
                this: dict[Any, tuple[Node, Node]] = {}
                for src in merged_sources(vn):
                    for key, pair in src._load().items():
                        this.setdefault(key, pair)
                merged.update(this)
                continue
            key = kn.value if isinstance(kn, Scalar) else None
            try:
                hash(key)
            except TypeError:
                continue
            if key is None and not (isinstance(kn, Scalar) and kn.tag == _NULL_TAG):
                continue  # complex keys: kept in pairs, not addressable
            index[key] = (kn, vn)
        for key, pair in merged.items():
            index.setdefault(key, pair)
        return tuple(pairs), index


def parse(
    text: str,
    *,
    path: str | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_nodes: int = DEFAULT_MAX_NODES,
    max_depth: int = DEFAULT_MAX_DEPTH,
) -> Document:
    """Parse YAML text into a Document. Never raises for any input text; every problem is a diagnostic."""
    size = len(text.encode("utf-8", errors="surrogatepass")) if len(text) * 4 > max_bytes else len(text)
    if size > max_bytes:
        return Document(text, None, (_too_large(size, max_bytes),), path)
    if "\x00" in text:
        pos = _pos_of_index(text, text.index("\x00"))
        return Document(text, None, (Diagnostic(
            "HP004", "binary content (NUL character): not a YAML config",
            Range(pos, Position(pos.line, pos.character + 1))),), path)
    body = text[1:] if text.startswith("\ufeff") else text
    # Composing allocates one node and two marks per YAML node and no reference cycles; the cyclic collector
    # would rescan that growing heap again and again (7x the compose time of a node-dense 5 MB file, measured).
    # It is paused only for this call and resumed as found.
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _parse_body(text, body, path, max_nodes, max_depth)
    finally:
        if gc_was_enabled:
            gc.enable()


def _parse_body(text: str, body: str, path: str | None, max_nodes: int, max_depth: int) -> Document:
    marks = Marks(text, len(text) - len(body))
    try:
        composed = yaml.compose(body, Loader=_LOADER)
    except yaml.reader.ReaderError as exc:
        return Document(text, None, (_reader_diag(exc, text, body, marks),), path)
    except yaml.YAMLError as exc:
        return Document(text, None, (_syntax_diag(exc, text, marks),), path)
    except RecursionError:
        return Document(text, None, (Diagnostic("HP005", "nesting too deep to analyse"),), path)
    except (ValueError, UnicodeError) as exc:  # libyaml reader errors on odd code points
        return Document(text, None, (Diagnostic("HP001", f"YAML syntax error: {exc}"),), path)
    if composed is None:
        return Document(text, None, (), path)
    builder = _Builder(text, max_nodes, max_depth, marks)
    try:
        refusal = builder.check(composed)
    except RecursionError:  # pragma: no cover - the check is iterative
        refusal = Diagnostic("HP005", "nesting too deep to analyse")
    if refusal is not None:
        return Document(text, None, (refusal,), path)
    trainer = _trainer_refusal(text, body, marks) if "\t" in body else None
    return Document(text, builder.build(composed), (*((trainer,) if trainer else ()), *builder.diags), path)


def _offset_of(text: str, pos: Position) -> int:
    """Code-point offset of an LSP position in `text` (clamped)."""
    lines = _BREAK_RE.split(text)
    breaks = [m.group(0) for m in _BREAK_RE.finditer(text)]
    line = min(pos.line, len(lines) - 1)
    return sum(len(lines[i]) + len(breaks[i]) for i in range(line)) + min(pos.character, len(lines[line]))


def _trainer_refusal(text: str, body: str, marks: Marks) -> Diagnostic | None:
    """What the trainer's own loader refuses although libyaml accepts it. HyperParallel loads its config with
    PyYAML's pure-Python `yaml.safe_load`, whose scanner skips only spaces between tokens: a tab after a
    value (`tp_size: 8\t# c`), after a colon (`mode:\tfull`) or inside a flow list is "found character
    '\t' that cannot start any token" there, while libyaml takes tabs as separators. Only texts holding a
    tab pay for this second, pure-Python pass (events only, nothing constructed)."""
    try:
        for _event in yaml.parse(body, Loader=yaml.SafeLoader):
            pass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        pos = clamp(text, marks.pos(mark)) if mark is not None else Position(0, 0)
        at_tab = "'\\t'" in str(exc.problem or "") or text[_offset_of(text, pos):][:1] == "\t"
        what = ("a tab here: HyperParallel's trainer loads with PyYAML's pure-Python safe_load, which refuses "
                "tabs between tokens (libyaml accepts them); use spaces" if at_tab else
                f"HyperParallel's trainer (PyYAML safe_load) refuses this file: {exc.problem}")
        return Diagnostic("HP001", f"YAML syntax error: {what}", Range(pos, clamp(text, Position(pos.line, pos.character + 1))))
    except (yaml.YAMLError, RecursionError, ValueError):
        return None
    return None


_ALIAS_RE = re.compile(r"(?<![\w'\"])\*[^\s,\[\]{}]+")
# An alias token, or a comment (a `#` at a line's start or after a blank), which is skipped: a `*name` in a
# comment is no alias.
_ALIAS_OR_COMMENT = re.compile(r"(?:^|(?<=[ \t]))#[^\r\n\x85\u2028\u2029]*|(?<![\w'\"])\*[^\s,\[\]{}]+", re.M)


def alias_tokens(text: str, node: yaml.Node, shift: int = 0) -> dict[int, tuple[int, int]]:
    """Where the children of a collection written as aliases (`*name`) are written in `text` (start, end offsets),
    by their place in its children (a mapping's: key, value, key, value, ...); `shift`: characters cut off the
    text's front before composing. An alias is the node it names, whose marks are the anchor's, earlier in the
    file: a child written in place starts at or after the end of what is written ahead of it, an alias starts
    before, and its own token is the first `*name` after that end outside a comment. The one home of that rule
    (the reader's key and cycle positions, the writer's section ends). One pass; the text is searched only at
    aliases."""
    kids = [c for kv in node.value for c in kv] if isinstance(node, yaml.MappingNode) else list(node.value)
    out: dict[int, tuple[int, int]] = {}
    floor = node.start_mark.index
    for n, c in enumerate(kids):
        if c.start_mark.index >= floor:
            floor = c.end_mark.index
            continue
        m = next((m for m in _ALIAS_OR_COMMENT.finditer(text, floor + shift, node.end_mark.index + shift)
                  if m.group(0)[0] != "#"), None)
        if m is None:
            break
        out[n] = (m.start(), m.end())
        floor = m.end() - shift
    return out


def merged_sources(value: Node) -> tuple[Map, ...]:
    """The mappings a merge key's value (`<<: *a` or `<<: [*a, *b]`) merges in, in order: what both the merge
    itself (mapping_children, the earlier one winning) and its conflicts (HP012) walk. Anything else merges
    nothing (`_unmergeable` says so)."""
    items = value.items if isinstance(value, Seq) else (value,)
    return tuple(src for src in items if isinstance(src, Map))


def _unmergeable(value: yaml.Node) -> str:
    """What a merge key's value holds that PyYAML cannot merge ("" where it merges): a scalar, or a list with an
    item that is no mapping (flatten_mapping's two refusals)."""
    if isinstance(value, yaml.MappingNode):
        return ""
    if isinstance(value, yaml.SequenceNode):
        return next(("a list holding " + _kind(v) for v in value.value if not isinstance(v, yaml.MappingNode)), "")
    return _kind(value)


def _kind(node: yaml.Node) -> str:
    """A node as a message names it."""
    return "a list" if isinstance(node, yaml.SequenceNode) else f"the scalar {str(node.value)[:40]!r}"


def _first_alias_range(text: str) -> Range:
    m = _ALIAS_RE.search(text)
    if not m:
        return DOCUMENT_START
    return Range(_pos_of_index(text, m.start()), _pos_of_index(text, m.end()))


# -- navigation --------------------------------------------------------------------------------------------


def split_path(dotted: str) -> list[str]:
    return [p for p in dotted.split(".") if p != ""] if dotted else []


def find(root: Node | None, dotted: str) -> tuple[Node | None, Node | None]:
    """(key node, value node) at a dotted path; list items are addressed by index (`parallelism.tp.1`).
    (None, None) when the path does not exist."""
    node = root
    key_node: Node | None = None
    for part in split_path(dotted):
        if isinstance(node, Map):
            if part not in node:
                return None, None
            key_node, node = node.key_node(part), node.get(part)
        elif isinstance(node, Seq) and part.isdigit() and int(part) < len(node.items):
            node = node.items[int(part)]
            key_node = node
        else:
            return None, None
    return key_node, node


def locate(doc: Document, dotted: str) -> tuple[Range, Range] | None:
    """(key range, value range) of a dotted path in the document, or None when absent."""
    key, value = find(doc.root, dotted)
    if key is None or value is None:
        return None
    return key.range, value.range


@dataclass(slots=True)
class Reads:
    """What one request has read and parsed, so a file it meets twice is read and parsed once: a search
    config's train.yaml is the config's source and, again, the file that states the plan it compares with;
    a train.yaml being typed is checked and is the text its search config's cluster is read with. A disk
    read is keyed on the path (one request sees one state of the disk), a parse on the path, the size limit
    and the text itself. One request, one thread: never shared, never kept after the request."""

    _texts: dict[tuple[str, int], tuple[str | None, tuple[Diagnostic, ...]]] = field(default_factory=dict)
    _docs: dict[tuple[str | None, int, str], Document] = field(default_factory=dict)

    def read(self, path: str, max_bytes: int) -> tuple[str | None, tuple[Diagnostic, ...]]:
        key = (path, max_bytes)
        if key not in self._texts:
            # A text already read whole under another limit that this one surely admits is the same read.
            got = next(((text, diags) for (p, _), (text, diags) in self._texts.items()
                        if p == path and text is not None and not diags and 4 * len(text) <= max_bytes), None)
            self._texts[key] = got if got is not None else read_text(path, max_bytes=max_bytes)
        return self._texts[key]

    def parsed_texts(self) -> dict[str, str]:
        """path -> the text this request parsed for it (the last, where a path was parsed twice)."""
        return {path: text for (path, _limit, text) in self._docs if path is not None}

    def parse(self, text: str, path: str | None, max_bytes: int) -> Document:
        # A text that fits any limit it is parsed under parses the same under each (a UTF-8 character is at most
        # 4 bytes): one key for it, so the check (hpLsp.maxFileSizeKb) and the stated plan (the default) share it.
        key = (path, max_bytes if 4 * len(text) > max_bytes else -1, text)
        doc = self._docs.get(key)
        if doc is None:
            doc = self._docs[key] = parse(text, path=path, max_bytes=max_bytes)
        return doc
