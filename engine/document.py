"""YAML text -> a small immutable node tree with source ranges, read safely and in bounded time and memory.

Why PyYAML's C composer (`yaml.compose(..., Loader=CSafeLoader)`) and not ruamel: the node marks of both are
0-based code points, but libyaml composes a 5 MB file in about 0.5 s where ruamel takes 7.6 s
(../shared/reference/LSP_NOTES.md, "Large and hostile YAML"), libyaml refuses nesting deeper than 1000 levels
itself instead of overflowing the Python stack, and it resolves plain scalars with YAML 1.1 rules, which is
exactly how the trainer (`yaml.safe_load`) types them (`yes` is a bool, `1e-4` a string). When the C
extension is missing the pure-Python SafeLoader is used (same rules, slower; RecursionError caught).

Composing never constructs Python objects, so `!!python/...` tags are never executed: any tag outside the
YAML core schema becomes an HP007 diagnostic and the node is read as if untagged. Aliases share one node in
the tree (a DAG); the expanded size is computed with memoisation and a document whose expansion exceeds
`max_nodes` is refused (HP006) before anything walks it, which defuses "billion laughs".
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from engine.diagnostics import Diagnostic, Severity
from engine.positions import DOCUMENT_START, Position, Range

try:  # libyaml: fast, bounded nesting
    _LOADER: Any = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - PyYAML built without libyaml
    _LOADER = yaml.SafeLoader

DEFAULT_MAX_BYTES = 10 * 1024 * 1024  # 10 MiB: a 5 MB file is still analysed (benchmarks/hostile_inputs.py)
DEFAULT_MAX_NODES = 1_000_000  # expanded nodes (aliases counted once per use)
DEFAULT_MAX_DEPTH = 128  # real configs nest < 10 deep; libyaml's own limit is 1000

_CORE_TAGS = frozenset(
    "tag:yaml.org,2002:" + t
    for t in ("str", "int", "float", "bool", "null", "map", "seq", "timestamp", "binary", "merge",
              "omap", "pairs", "set", "value")
)
_MERGE_TAG = "tag:yaml.org,2002:merge"


@dataclass(frozen=True, slots=True, eq=False)
class Node:
    """A YAML node. `range` covers the token (scalars) or the collection (up to its last child)."""

    range: Range


@dataclass(frozen=True, slots=True, eq=False)
class Scalar(Node):
    """A scalar typed as PyYAML's safe loader types it (YAML 1.1): str, int, float, bool, None, or other
    (timestamps, bytes). `text` is the scalar's string value before typing; `style` is PyYAML's quote
    style ('' plain, "'" single, '"' double, '|' / '>' block)."""

    value: Any
    text: str
    tag: str
    style: str


@dataclass(frozen=True, slots=True, eq=False)
class Seq(Node):
    items: tuple[Node, ...]
    flow: bool = False


@dataclass(frozen=True, slots=True, eq=False)
class Map(Node):
    """A mapping. `pairs` keeps every pair in source order (duplicates included, for diagnostics); lookups
    see the last value of a key, as the trainer's loader does."""

    pairs: tuple[tuple[Node, Node], ...]
    flow: bool = False
    _index: dict[Any, tuple[Node, Node]] = field(default_factory=dict, repr=False, compare=False)

    def get(self, key: str) -> Node | None:
        hit = self._index.get(key)
        return hit[1] if hit else None

    def key_node(self, key: str) -> Node | None:
        hit = self._index.get(key)
        return hit[0] if hit else None

    def items(self) -> list[tuple[str, Node, Node]]:
        """(key, key node, value node) for every distinct hashable key, last value winning, source order."""
        out = []
        for k, (kn, vn) in self._index.items():
            if isinstance(k, str):
                out.append((k, kn, vn))
        out.sort(key=lambda t: (t[1].range.start.line, t[1].range.start.character))
        return out

    def __contains__(self, key: object) -> bool:
        return key in self._index


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


def end_position(text: str) -> Position:
    """The position just past the last character of `text`."""
    line = text.count("\n")
    last_nl = text.rfind("\n")
    return Position(line, len(text) - last_nl - 1)


def clamp(text: str, pos: Position) -> Position:
    """The nearest position inside `text` (a mark past the end of a line or of the text is pulled back)."""
    lines = text.split("\n")
    if pos.line >= len(lines):
        return end_position(text)
    line = lines[max(pos.line, 0)].rstrip("\r")
    return Position(max(pos.line, 0), max(0, min(pos.character, len(line))))


def _pos_of_index(text: str, index: int) -> Position:
    index = max(0, min(index, len(text)))
    line = text.count("\n", 0, index)
    start = text.rfind("\n", 0, index) + 1
    return Position(line, index - start)


class _Refused(Exception):
    def __init__(self, diag: Diagnostic) -> None:
        super().__init__(diag.message)
        self.diag = diag


def _mark_pos(mark: Any) -> Position:
    return Position(int(mark.line), int(mark.column))


def _node_range(node: yaml.Node) -> Range:
    return Range(_mark_pos(node.start_mark), _mark_pos(node.end_mark))


def decode(data: bytes, *, path: str | None = None) -> tuple[str | None, tuple[Diagnostic, ...]]:
    """Bytes -> text. Binary content (NUL bytes) and invalid UTF-8 become HP004 at the offending byte's
    line and column; a UTF-8 BOM is dropped (editors hide it; positions then match the editor's)."""
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
    """Read a file from disk as UTF-8 text, refusing (HP004/HP005) what cannot be analysed."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(max_bytes + 1)
    except IsADirectoryError:
        return None, (Diagnostic("HP004", f"{path} is a directory, not a YAML file"),)
    except FileNotFoundError:
        return None, (Diagnostic("HP004", f"config file not found: {path}"),)
    except OSError as exc:
        return None, (Diagnostic("HP004", f"cannot read {path}: {exc.strerror or exc}"),)
    if len(data) > max_bytes:
        return None, (_too_large(None, max_bytes),)
    return decode(data, path=path)


def _too_large(size: int | None, max_bytes: int) -> Diagnostic:
    limit = f"{max_bytes / 1e6:.1f} MB"
    what = f"{size / 1e6:.1f} MB > {limit}" if size is not None else f"over {limit}"
    return Diagnostic("HP005", f"file too large to analyse: {what} (raise the size limit, hpLsp.maxFileSizeKb)")


def _syntax_diag(exc: yaml.YAMLError, text: str) -> Diagnostic:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    context = getattr(exc, "context", None)
    pos = clamp(text, _mark_pos(mark) if mark is not None else end_position(text))
    ctx_mark = getattr(exc, "context_mark", None)
    if ctx_mark is not None and pos >= clamp(text, end_position(text)):
        # An unclosed bracket or quote is reported at the end of the text; point at where it was opened.
        pos = clamp(text, _mark_pos(ctx_mark))
    end = clamp(text, Position(pos.line, pos.character + 1))
    lines = text.split("\n")
    at_tab = pos.line < len(lines) and pos.character < len(lines[pos.line]) and lines[pos.line][pos.character] == "\t"
    if "maximum nesting depth" in str(problem):
        return Diagnostic("HP005", "nesting too deep to analyse (more than 1000 levels)", Range(pos, end))
    msg = str(problem)
    if "tab" in msg or at_tab:
        msg = "tab character: YAML indentation must use spaces, not tabs"
    elif context and context not in msg:
        msg = f"{msg} ({context})"
    return Diagnostic("HP001", f"YAML syntax error: {msg}", Range(pos, end))


class _Builder:
    """Turns composed PyYAML nodes into our tree, sharing aliased nodes and typing scalars."""

    def __init__(self, text: str, max_nodes: int, max_depth: int) -> None:
        self.text = text
        self.max_nodes = max_nodes
        self.max_depth = max_depth
        self.memo: dict[int, Node] = {}
        self.sizes: dict[int, int] = {}
        self.diags: list[Diagnostic] = []
        self.constructor = yaml.SafeLoader("")  # only its scalar constructors are used (never python tags)

    # -- bounds ------------------------------------------------------------------------------------------
    def expanded_size(self, root: yaml.Node) -> int:
        """Nodes the document has once every alias is expanded; memoised per shared node (a DAG walk), so the
        cost is the number of distinct nodes even for a billion-laughs document."""
        sizes = self.sizes
        stack: list[tuple[yaml.Node, bool]] = [(root, False)]
        while stack:
            node, done = stack.pop()
            nid = id(node)
            if nid in sizes:
                continue
            children: list[yaml.Node] = []
            if isinstance(node, yaml.SequenceNode):
                children = list(node.value)
            elif isinstance(node, yaml.MappingNode):
                for k, v in node.value:
                    children.append(k)
                    children.append(v)
            if done or not children:
                total = 1
                for c in children:
                    total += sizes.get(id(c), 1)
                    if total > self.max_nodes * 10:
                        break
                sizes[nid] = min(total, self.max_nodes * 10)
                continue
            stack.append((node, True))
            stack.extend((c, False) for c in children if id(c) not in sizes)
        return sizes[id(root)]

    # -- building ----------------------------------------------------------------------------------------
    def build(self, node: yaml.Node, depth: int = 0) -> Node:
        cached = self.memo.get(id(node))
        if cached is not None:
            return cached
        if depth > self.max_depth:
            rng = _node_range(node)
            raise _Refused(Diagnostic(
                "HP005", f"nesting too deep to analyse (more than {self.max_depth} levels)",
                Range(rng.start, rng.start)))
        self._check_tag(node)
        out: Node
        if isinstance(node, yaml.ScalarNode):
            out = self._scalar(node)
        elif isinstance(node, yaml.SequenceNode):
            items = tuple(self.build(c, depth + 1) for c in node.value)
            out = Seq(self._collection_range(node, items), items, bool(node.flow_style))
        elif isinstance(node, yaml.MappingNode):
            out = self._mapping(node, depth)
        else:  # pragma: no cover - compose yields only the three kinds
            out = Scalar(_node_range(node), None, "", "", "")
        self.memo[id(node)] = out
        return out

    def _collection_range(self, node: yaml.Node, children: tuple[Node, ...]) -> Range:
        rng = _node_range(node)
        if getattr(node, "flow_style", False) or not children:
            return rng
        # A block collection's end mark runs to the next token (often the next line); stop at the last child.
        return Range(rng.start, max(c.range.end for c in children))

    def _check_tag(self, node: yaml.Node) -> None:
        tag = node.tag or ""
        if tag.startswith("tag:yaml.org,2002:") and tag in _CORE_TAGS:
            return
        if isinstance(node, yaml.ScalarNode) and tag == "!":  # non-specific tag of a quoted scalar
            return
        shown = tag.replace("tag:yaml.org,2002:", "!!")
        rng = _node_range(node)
        self.diags.append(Diagnostic(
            "HP007",
            f"unsupported YAML tag {shown}: tags are never executed here; the trainer's safe loader refuses "
            "it too. Remove the tag",
            Range(rng.start, Position(rng.start.line, rng.start.character + len(shown)))
            if rng.start.line == rng.end.line else Range(rng.start, rng.start),
            data={"tag": shown},
        ))

    def _scalar(self, node: yaml.ScalarNode) -> Scalar:
        tag = node.tag or ""
        value: Any = node.value
        if tag in _CORE_TAGS:
            try:
                value = self.constructor.construct_object(node, deep=False)
            except (ValueError, OverflowError, yaml.YAMLError, TypeError):
                value = node.value  # e.g. a 10^5-digit int or a bad timestamp: keep the text
        if isinstance(value, float) and math.isnan(value):
            value = float("nan")
        return Scalar(_node_range(node), value, str(node.value), tag, node.style or "")

    def _mapping(self, node: yaml.MappingNode, depth: int) -> Map:
        pairs: list[tuple[Node, Node]] = []
        index: dict[Any, tuple[Node, Node]] = {}
        merged: dict[Any, tuple[Node, Node]] = {}
        for k, v in node.value:
            kn = self.build(k, depth + 1)
            vn = self.build(v, depth + 1)
            pairs.append((kn, vn))
            if k.tag == _MERGE_TAG or (isinstance(kn, Scalar) and kn.text == "<<" and kn.style == ""):
                for src in (vn.items if isinstance(vn, Seq) else (vn,)):
                    if isinstance(src, Map):
                        for key, pair in src._index.items():
                            merged.setdefault(key, pair)
                continue
            key = kn.value if isinstance(kn, Scalar) else None
            try:
                hash(key)
            except TypeError:
                key = None
            if key is None and not (isinstance(kn, Scalar) and kn.tag.endswith(":null")):
                continue  # complex keys: kept in pairs, not addressable
            if key in index:
                first = index[key][0]
                self.diags.append(Diagnostic(
                    "HP003",
                    f"duplicate key '{key}' (first defined at line {first.range.start.line + 1}); the later value "
                    "wins in the trainer: remove one",
                    kn.range,
                    data={"first": first.range.to_json(), "key": str(key)},
                ))
                self.diags.append(Diagnostic(
                    "HP003",
                    f"key '{key}' is defined again at line {kn.range.start.line + 1}; this value is ignored",
                    first.range,
                    severity=Severity.INFORMATION,
                    data={"second": kn.range.to_json(), "key": str(key)},
                ))
            index[key] = (kn, vn)
        for key, pair in merged.items():
            index.setdefault(key, pair)
        children = tuple(x for pair in pairs for x in pair)
        return Map(self._collection_range(node, children), tuple(pairs), bool(node.flow_style), index)


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
    try:
        composed = yaml.compose(body, Loader=_LOADER)
    except yaml.YAMLError as exc:
        return Document(text, None, (_syntax_diag(exc, text),), path)
    except RecursionError:
        return Document(text, None, (Diagnostic("HP005", "nesting too deep to analyse"),), path)
    except (ValueError, UnicodeError) as exc:  # libyaml reader errors on odd code points
        return Document(text, None, (Diagnostic("HP001", f"YAML syntax error: {exc}"),), path)
    if composed is None:
        return Document(text, None, (), path)
    builder = _Builder(text, max_nodes, max_depth)
    total = builder.expanded_size(composed)
    if total > max_nodes:
        return Document(text, None, (Diagnostic(
            "HP006",
            f"alias expansion too large: over {max_nodes:,} nodes once aliases are expanded (a 'billion laughs' "
            "document?); refusing to analyse",
            _first_alias_range(text),
        ),), path)
    try:
        root = builder.build(composed)
    except _Refused as exc:
        return Document(text, None, (*builder.diags, exc.diag), path)
    except RecursionError:
        return Document(text, None, (Diagnostic("HP005", "nesting too deep to analyse"),), path)
    return Document(text, root, tuple(builder.diags), path)


_ALIAS_RE = re.compile(r"(?<![\w'\"])\*[^\s,\[\]{}]+")


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


def get_value(root: Node | None, dotted: str) -> Any:
    """The typed scalar at a path, or None."""
    _, node = find(root, dotted)
    return node.value if isinstance(node, Scalar) else None


def to_python(node: Node | None, *, limit: int = 100_000) -> Any:
    """Plain Python data (dict/list/scalars) of a subtree, for small sections (run options); bounded."""
    budget = [limit]

    def conv(n: Node | None) -> Any:
        budget[0] -= 1
        if budget[0] < 0:
            raise ValueError("subtree too large")
        if n is None:
            return None
        if isinstance(n, Scalar):
            return n.value
        if isinstance(n, Seq):
            return [conv(c) for c in n.items]
        if isinstance(n, Map):
            return {k: conv(v) for k, _, v in n.items()}
        return None

    return conv(node)
