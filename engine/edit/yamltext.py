"""Surgical and structural changes to YAML text, computed from composed nodes' marks (PyYAML, safe).

Why not a round-trip dump (ruamel): a dump re-indents mixed-indent files, moves or drops comments around
deleted keys, forgets `---`, rewrites floats and, without care, quotes. Here every change is a splice of
the original text: a scalar's token is replaced in place keeping its style (a string's quotes, a boolean's
spelling; numbers are written bare, since a quoted number is a string to the reader); a missing key
becomes one new line at the natural place in its mapping, with the indentation of its siblings (or the
parent's step, guessed from the file) and the file's own line breaks; a mapping written in flow style gets
the key in flow style. Nothing else moves, so untouched bytes stay byte-identical by construction.

An end-of-line comment after a changed value keeps its column when the blanks before it allow. When it
states the old value (names it as a word) it is marked with that value (`pp_interleave_num: 1  # was 5: 80
layers / (4 stages x 5 chunks)`): left as it was it would lie about the new one. The user's words are kept;
a comment that does not name the old value (`# within a node`) is left alone; a later change back to the
marked value removes the mark (docs/editing.md).

Each operation works on the current text and returns splices against it; callers apply one change at a
time and re-compose (see engine.edit.core), which keeps every operation simple and exact.
"""

from __future__ import annotations

import io
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from engine.document import alias_tokens
from engine.edit.text import LineIndex, Splice, line_break

Path = tuple[str, ...]
# libyaml's loader when PyYAML has it (about ten times faster; its marks are the same code-point offsets).
_BASE_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_BASE_LOADER):  # type: ignore[misc,valid-type]
    """The safe loader with merge keys read as engine.document reads them, whatever PyYAML is installed: within a
    merge list the earlier mapping wins (the YAML merge-key rule, PyYAML up to 6.0.3; 6.0.4 keeps the later, and
    HP012 says where that matters), of two `<<` keys the later, and the mapping's own keys win over both. Why:
    the writer decides what to change from these values; read otherwise than the check read them, it left a
    merged value as it was and reported a change it never made."""

    def flatten_mapping(self, node: yaml.MappingNode) -> None:
        merge: list[tuple[yaml.Node, yaml.Node]] = []
        own: list[tuple[yaml.Node, yaml.Node]] = []
        for key_node, value_node in node.value:
            if key_node.tag != "tag:yaml.org,2002:merge":
                if key_node.tag == "tag:yaml.org,2002:value":
                    key_node.tag = "tag:yaml.org,2002:str"
                own.append((key_node, value_node))
                continue
            sources = value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
            if not all(isinstance(src, yaml.MappingNode) for src in sources):
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping", node.start_mark, "expected a mapping or list of mappings for "
                    f"merging, but found {value_node.id}", value_node.start_mark)
            for src in reversed(sources):  # later pairs win in the dict: the earliest mapping of the list last
                self.flatten_mapping(src)
                merge.extend(src.value)
        node.value = merge + own


_LOADER: Any = _Loader
Order = Mapping[Path, Sequence[str]]


class FlowMap(dict):
    """A mapping value that is always written in flow style (`layers: {"0-9": full}`), never as a nested
    block, unlike the sections created on the way to a key."""


class Word(str):
    """A string written plain even where YAML 1.1 reads it as another type: `mode: off`, the spelling the
    trainer documents (its readers map the boolean false back to off)."""


class EditError(Exception):
    """A change that cannot be made faithfully; its message is the refusal reason shown to the user."""


@dataclass(frozen=True, slots=True)
class Doc:
    """A composed document: the text, its root node (None when empty), the constructed data and lines."""

    text: str
    root: yaml.Node | None
    data: Any
    lines: LineIndex
    eol: str

    @staticmethod
    def parse(text: str) -> Doc:
        # Two passes: constructing flattens merge keys (`<<: *base`) into the composed nodes, which would
        # then point at the anchor's text.
        try:
            root = yaml.compose(text, Loader=_LOADER)
            data = yaml.load(text, Loader=_LOADER) if root is not None else None
        except yaml.MarkedYAMLError as e:
            mark = e.problem_mark or e.context_mark
            where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
            raise EditError(f"the file is not valid YAML{where}: {e.problem or e.context}") from None
        except yaml.YAMLError as e:
            raise EditError(f"the file is not valid YAML: {e}") from None
        return Doc(text, root, data, LineIndex.of(text), line_break(text))


# ---------------------------------------------------------------------------------------------- lookups


def find_pair(mapping: yaml.MappingNode, key: str) -> tuple[yaml.Node, yaml.Node] | None:
    """The last pair whose key is the plain string `key` (PyYAML keeps the last of duplicate keys)."""
    found = None
    for k, v in mapping.value:
        if isinstance(k, yaml.ScalarNode) and k.tag == "tag:yaml.org,2002:str" and k.value == key:
            found = (k, v)
    return found


def is_alias_value(key: yaml.Node, value: yaml.Node) -> bool:
    """An alias (`*x`) composes to the anchored node, whose marks lie before its key: editing there would
    change every user of the anchor."""
    return value.start_mark.index < key.end_mark.index


def lookup(doc: Doc, path: Path) -> tuple[yaml.Node, yaml.Node] | None:
    node = doc.root
    pair = None
    for k in path:
        if not isinstance(node, yaml.MappingNode):
            return None
        pair = find_pair(node, k)
        if pair is None:
            return None
        node = pair[1]
    return pair


def content_end(doc: Doc, node: yaml.Node) -> int:
    """Offset just past the node's last meaningful character: trailing blank lines and comments that the
    marks of block nodes run over are left out."""
    if isinstance(node, yaml.ScalarNode):
        end = node.end_mark.index
        header = re.split(r"[\r\n]", doc.text[node.start_mark.index : node.end_mark.index], maxsplit=1)[0]
        if node.style in ("|", ">") and "+" not in header:  # `|+` keeps its trailing blank lines
            while end > node.start_mark.index and doc.text[end - 1] in " \t\r\n":
                end -= 1
        return end
    if isinstance(node, yaml.MappingNode | yaml.SequenceNode):
        if node.flow_style or not node.value:
            return node.end_mark.index
        kids = len(node.value) * (2 if isinstance(node, yaml.MappingNode) else 1)
        # a last child written as an alias (`- *one`, `pp_size: *one`) is the anchor's node, earlier in the file:
        # the collection ends at the alias's token (engine.document.alias_tokens), not at the anchor
        token = alias_tokens(doc.text, node).get(kids - 1) if "*" in doc.text else None
        if token is not None:
            return token[1]
        last = node.value[-1]
        return content_end(doc, last[1] if isinstance(last, tuple) else last)
    return node.end_mark.index


def last_line(doc: Doc, key: yaml.Node, value: yaml.Node) -> int:
    """The last line a mapping entry occupies."""
    end = content_end(doc, value)
    if end <= key.end_mark.index:  # an empty value, or an alias pointing back
        return doc.lines.line_of(key.end_mark.index)
    return doc.lines.line_of(end - 1)


def is_null(node: yaml.Node) -> bool:
    return isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:null"


def indent_unit(doc: Doc) -> int:
    """The file's usual indentation step: the most common child-minus-parent column of nested block
    mappings (2 when the file nests nothing)."""
    steps: Counter[int] = Counter()
    seen: set[int] = set()  # aliases share nodes: visit each once (an alias bomb stays linear)

    def walk(node: yaml.Node, col: int | None) -> None:
        if id(node) in seen:
            return
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode) and not node.flow_style and node.value:
            here = node.value[0][0].start_mark.column  # not the node's mark: it starts at an `&anchor`
            if col is not None and here > col:
                steps[here - col] += 1
            for k, v in node.value:
                if not is_alias_value(k, v):
                    walk(v, k.start_mark.column)
        elif isinstance(node, yaml.SequenceNode) and not node.flow_style:
            for item in node.value:
                walk(item, None)

    if doc.root is not None:
        walk(doc.root, None)
    return steps.most_common(1)[0][0] if steps else 2


# ---------------------------------------------------------------------------------------------- rendering
# Which scalars may stand plain, how a number or a quoted string is spelled: PyYAML's emitter decides
# (through yaml.safe_dump), so a token is what PyYAML itself would write and what its reader reads back as
# the same value and type (YAML 1.1: `off`, `10`, `1e-05`, `2024-01-01`, `~` are not strings when plain).
# What stays here is style preservation: an old token's quotes, a boolean's spelling family and case,
# `~`, layer-range keys always quoted, and a trainer word (`Word`) written plain.

_BOOL_WORDS = {
    "true": ("true", "false"),
    "false": ("true", "false"),
    "yes": ("yes", "no"),
    "no": ("yes", "no"),
    "on": ("on", "off"),
    "off": ("on", "off"),
}
_NO_WRAP = 2**30  # the emitter folds scalars longer than its width; a token is always one line
_LINE_BREAKS = frozenset("\r\n\x85\u2028\u2029")  # what YAML reads as a line break inside a scalar
_ANALYZER = yaml.emitter.Emitter(io.StringIO(), allow_unicode=True)  # analyze_scalar only: no state
_RESOLVER = yaml.resolver.Resolver()  # the implicit types of the safe loader and dumper (YAML 1.1)


def _emitted(value: str | int | float | bool | None, style: str | None = None) -> str:
    """PyYAML's token for `value` as an item of a flow sequence, the strictest place a token goes (no plain
    `,[]{}` either, so it is safe in block values, flow mappings and lists alike). `style` is the emitter's
    default_style: None lets it choose plain where the value reads back as itself (else single quotes);
    `'` asks for single quotes where it can write them, else it writes double; `"` double quotes. (An edit
    writes a few tokens, so nothing is cached; a cache would also take -0.0 for 0.0.)"""
    text = yaml.safe_dump([value], default_flow_style=True, default_style=style, width=_NO_WRAP,
                          allow_unicode=True)
    return text.rstrip("\n")[1:-1]


def render_str(value: str, style: str | None = None) -> str:
    """A string token: in the old token's quote style, plain when PyYAML would write it plain (it reads back
    as the same string), else double-quoted (so `off` stays the string "off" and `10` the string "10")."""
    value = str(value)
    if style == "'":
        token = _emitted(value, "'")
        if not _LINE_BREAKS.intersection(token):  # a folded single-quoted scalar is not one token line
            return token
    elif style != '"':
        token = _emitted(value)
        if token[:1] not in ("'", '"'):
            return token
    return _emitted(value, '"')


def render_scalar(value: Any, old: yaml.Node | None = None) -> str:
    """The token for a new scalar value, keeping the old token's style where that keeps the type: a string's
    quotes, the spelling family and case of a boolean (`yes`/`no`, `True`/`False`), `~` for null. Numbers and
    booleans are never quoted: `"4"` is the string the reader refuses (HP103), not the degree 4."""
    style = old.style if isinstance(old, yaml.ScalarNode) and old.style in ("'", '"') else None
    old_text = old.value if isinstance(old, yaml.ScalarNode) else ""
    if value is None:
        return "~" if old_text == "~" else _emitted(None)
    if isinstance(value, bool):
        word = old_text.lower() if isinstance(old, yaml.ScalarNode) and old.tag.endswith(":bool") else "true"
        pair = _BOOL_WORDS.get(word, ("true", "false"))
        token = pair[0] if value else pair[1]
        if old_text.isupper() and len(old_text) > 1:
            return token.upper()
        if old_text[:1].isupper():
            return token.capitalize()
        return token
    if isinstance(value, int):
        return _emitted(int(value))
    if isinstance(value, float):
        return _emitted(float(value))
    if isinstance(value, Word) and not style and _plain_word(value):
        return str(value)
    if isinstance(value, str):
        return render_str(value, style)
    if isinstance(value, Mapping):
        return render_flow(value)
    if isinstance(value, list | tuple):
        return render_flow(value)
    raise EditError(f"cannot write a value of type {type(value).__name__}")


def _plain_word(word: str) -> bool:
    """A trainer word may stand plain when the emitter's analysis allows its characters plain in a flow
    collection and the safe reader constructs what it resolves to (`off` is read as false, which the
    trainer's reader maps back; `=` and `<<` resolve to tags it cannot construct)."""
    tag = _RESOLVER.resolve(yaml.ScalarNode, word, (True, False))
    return _ANALYZER.analyze_scalar(str(word)).allow_flow_plain and tag in yaml.SafeLoader.yaml_constructors


def render_key(key: str) -> str:
    """A mapping key; keys starting with a digit (layer ranges `"0-9"`, `"10"`) are always double-quoted."""
    return render_str(key, '"' if key[:1].isdigit() else None)


def render_flow(value: Any) -> str:
    """A flow-style rendering: `{"0-9": full}`, `[1, 2, 4]`; keys that PyYAML would not read back as the
    same string, and layer ranges (`"0-9"`, `"10"`), are double-quoted."""
    if isinstance(value, Mapping):
        items = []
        for k, v in value.items():
            items.append(f"{render_key(str(k))}: {render_flow(v)}")
        return "{" + ", ".join(items) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(render_flow(v) for v in value) + "]"
    return render_scalar(value)


def render_block_entry(key: str, value: Any, indent: str, unit: int, flow_children: bool) -> list[str]:
    """Lines (without breaks) of a block mapping entry; nested mappings in block style unless the file
    writes its sections in flow style."""
    if isinstance(value, Mapping) and value and not flow_children and not isinstance(value, FlowMap):
        lines = [f"{indent}{render_key(key)}:"]
        for k, v in value.items():
            lines.extend(render_block_entry(k, v, indent + " " * unit, unit, flow_children))
        return lines
    return [f"{indent}{render_key(key)}: {render_scalar(value)}"]


def nest(path: Path, value: Any) -> Any:
    for k in reversed(path):
        value = {k: value}
    return value


# ---------------------------------------------------------------------------------------------- changes


def _entry_order(order: Order, parent: Path, key: str) -> tuple[Sequence[str], int]:
    names = order.get(parent, ())
    return names, (list(names).index(key) if key in names else -1)


def _neighbours(mapping: yaml.MappingNode, order: Order, parent: Path, key: str) -> tuple[Any, Any]:
    """The existing entries right before and after where `key` belongs in `order[parent]` (None each when
    there is none, or when the key has no place in the order)."""
    names, rank = _entry_order(order, parent, key)
    before = after = None
    if rank >= 0:
        for k, v in mapping.value:
            if not isinstance(k, yaml.ScalarNode) or k.value not in names:
                continue
            r = list(names).index(k.value)
            if r < rank:
                before = (k, v)
            elif r > rank and after is None:
                after = (k, v)
    return before, after


def _flow_children(doc: Doc, mapping: yaml.MappingNode | None) -> bool:
    """Whether this mapping's existing sub-mappings are mostly flow (`accelerator: {tp_size: 1}` recipes):
    a new section is then written the same way."""
    if mapping is None:
        return False
    subs = [v for _, v in mapping.value if isinstance(v, yaml.MappingNode)]
    return bool(subs) and sum(1 for v in subs if v.flow_style) * 2 > len(subs)


def insert_entry(
    doc: Doc, mapping: yaml.MappingNode | None, parent: Path, key: str, value: Any, order: Order
) -> list[Splice]:
    """Add `key: value` to `mapping` (None = an empty document): after the nearest existing key that comes
    before it in `order[parent]`, else before the nearest that comes after it, else at the end."""
    text, lines, eol = doc.text, doc.lines, doc.eol
    unit = indent_unit(doc)
    if mapping is None:
        body = eol.join(render_block_entry(key, value, "", unit, False))
        if text and not text.endswith(("\n", "\r")):
            return [Splice(len(text), len(text), eol + body + eol)]
        return [Splice(len(text), len(text), body + eol)]
    before, after = _neighbours(mapping, order, parent, key)
    if mapping.flow_style:
        entry = f"{render_key(key)}: {render_scalar(value)}"
        if not mapping.value:
            close = mapping.end_mark.index - 1
            return [Splice(close, close, entry)]
        if before is None and after is not None:
            pos = after[0].start_mark.index
            return [Splice(pos, pos, entry + ", ")]
        pos = content_end(doc, (before or mapping.value[-1])[1])
        return [Splice(pos, pos, ", " + entry)]
    if not mapping.value:
        raise EditError("cannot add a key to an empty block mapping")
    col = mapping.value[0][0].start_mark.column
    first_line_start = lines.line_start(lines.line_of(mapping.value[0][0].start_mark.index))
    indent_text = text[first_line_start : first_line_start + col]
    if indent_text.strip():
        # `- key: v` or `--- key: v`: the first key shares its line with an indicator; use plain spaces.
        indent_text = " " * col
    body_lines = render_block_entry(key, value, indent_text, unit, _flow_children(doc, mapping))
    if before is None and after is not None:
        line = lines.line_of(after[0].start_mark.index)
        if text[lines.line_start(line) : after[0].start_mark.index].strip():
            raise EditError(f"cannot insert `{key}` before a key that shares its line")
        # keep the comment block right above the following key attached to it (not a file's header)
        while line > 0 and not (mapping is doc.root and after[0] is mapping.value[0][0]):
            prev = text[lines.line_start(line - 1) : lines.line_content_end(line - 1)]
            if not prev.lstrip().startswith("#") or len(prev) - len(prev.lstrip()) < col:
                break
            line -= 1
        pos = lines.line_start(line)
        tail = eol if col == 0 and line > 0 and not text[lines.line_start(line - 1) : lines.line_content_end(
            line - 1)].strip() else ""  # top-level sections separated by blank lines: keep the rhythm
        return [Splice(pos, pos, "".join(b + eol for b in body_lines) + tail)]
    anchor = before or mapping.value[-1]
    end_line = last_line(doc, anchor[0], anchor[1])
    # comment lines indented deeper than the new key still belong to the entry above it
    while end_line + 1 < lines.line_count:
        nxt = text[lines.line_start(end_line + 1) : lines.line_content_end(end_line + 1)]
        if not nxt.lstrip().startswith("#") or len(nxt) - len(nxt.lstrip()) <= col:
            break
        end_line += 1
    pos = lines.line_content_end(end_line)
    prefix = eol
    if col == 0 and _blank_after(doc, end_line):
        prefix = eol + eol  # top-level sections separated by blank lines: keep the rhythm
    return [Splice(pos, pos, prefix + eol.join(body_lines))]


def _blank_after(doc: Doc, line: int) -> bool:
    lines = doc.lines
    if line + 1 >= lines.line_count:
        return False
    nxt = doc.text[lines.line_start(line + 1) : lines.line_content_end(line + 1)]
    return not nxt.strip() and lines.line_content_end(line + 1) < len(doc.text)


_GAP = re.compile(r"[ ]+(?=#)")
_COMMENT = re.compile(r"[ \t]+#[ \t]*")  # blanks, the hash and blanks up to the comment's first word
_MARK = re.compile(r"was (.+?): ")  # the mark mark_comment writes, at the start of a comment's words


def mark_comment(doc: Doc, end: int, old: str, new: str) -> list[Splice]:
    """Splices marking the end-of-line comment after a value (ending at `end`) that changes from the token
    `old` to `new`, when the comment states the old value: `# 4 x 5 chunks` -> `# was 5: 4 x 5 chunks`. A
    comment already marked keeps its mark (its words are about that older value) unless `new` is that value
    again, when the mark goes. No comment, or one that does not name the old value: nothing."""
    head = _COMMENT.match(doc.text, end)
    if head is None:
        return []
    words = head.end()
    line_end = doc.text.find("\n", words)
    body = doc.text[words:len(doc.text) if line_end < 0 else line_end].rstrip("\r")
    if not body.strip():
        return []
    marked = _MARK.match(body)
    if marked is None:
        bare = old.strip("'\"")
        if bare and re.search(rf"(?<![\w.]){re.escape(bare)}(?![\w.])", body):
            return [Splice(words, words, f"was {old}: ")]
        return []
    if marked.group(1) == new:
        return [Splice(words, words + marked.end(), "")]
    return []


_PROPERTY = re.compile(r"[&!][^\s,\[\]{}]*[ \t]+")


def past_properties(text: str, start: int, end: int) -> int:
    """The offset of a scalar's own text past its node properties (an `&anchor`, a `!tag`, in either order), which
    PyYAML's marks include: a rewrite keeps them, so `*anchor` elsewhere still resolves."""
    while start < end and (m := _PROPERTY.match(text, start, end)) is not None:
        start = m.end()
    return start


def keep_comment_column(text: str, start: int, end: int, token: str) -> Splice:
    """The splice writing `token` over text[start:end], where an end-of-line comment follows: it keeps its column
    (aligned comments stay aligned) as far as the blanks before it allow, one blank at least."""
    gap = _GAP.match(text, end)
    if gap is None or len(token) == end - start:
        return Splice(start, end, token)
    pad = max(1, len(gap.group(0)) - (len(token) - (end - start)))
    return Splice(start, end + len(gap.group(0)), token + " " * pad)


def replace_value(doc: Doc, key: yaml.Node, node: yaml.Node, value: Any) -> list[Splice]:
    """Write `value` in place of the value `node` of the entry whose key is `key`."""
    if is_alias_value(key, node):
        raise EditError(f"`{key.value}` is an alias (*anchor): change the anchored value instead")
    text = doc.text
    start, end = node.start_mark.index, content_end(doc, node)
    if (isinstance(value, Mapping) and value and isinstance(node, yaml.MappingNode) and not node.flow_style
            and node.value and node.value[0][0].start_mark.line > key.start_mark.line):
        # keep a block mapping in block style: first entry where the old one started, the rest below it
        start = node.value[0][0].start_mark.index  # (past any `&anchor` or tag)
        col = node.value[0][0].start_mark.column
        ls = doc.lines.line_start(doc.lines.line_of(start))
        indent = text[ls:start] if not text[ls:start].strip() else " " * col
        body: list[str] = []
        for k, v in value.items():
            body.extend(render_block_entry(k, v, indent, indent_unit(doc), True))
        return [Splice(start, end, doc.eol.join(body)[len(indent) :])]
    if isinstance(node, yaml.ScalarNode):
        start = past_properties(text, start, end)  # `&anchor` and `!tag` stay: aliases of it keep working
        if node.style in ("|", ">"):
            return [Splice(start, end, render_scalar(value))]
        token = render_scalar(value, node)
        if start == end:  # `key:` with nothing after it
            return [keep_comment_column(text, start, end, " " + token)]
        marks = mark_comment(doc, end, text[start:end], token)
        return [keep_comment_column(text, start, end, token), *marks]
    if getattr(node, "flow_style", False):
        token = render_scalar(value)
        return [keep_comment_column(text, start, end, token), *mark_comment(doc, end, text[start:end], token)]
    # a block collection replaced by a scalar or flow value: it goes right after the colon
    colon = text.index(":", key.end_mark.index)
    return [Splice(colon + 1, end, " " + render_scalar(value))]


def fill_null(doc: Doc, key: yaml.Node, node: yaml.Node, path: Path, value: Any) -> list[Splice]:
    """`section:` (or `section: ~`) gains its first nested entry, in block style under the key."""
    lines = doc.lines
    line = lines.line_of(key.start_mark.index)
    col = key.start_mark.column
    indent = " " * (col + indent_unit(doc))
    body = render_block_entry(path[0], nest(path[1:], value), indent, indent_unit(doc), False)
    splices = []
    if node.end_mark.index > node.start_mark.index:  # an explicit `~` / `null`
        cut = node.start_mark.index
        while cut > key.end_mark.index and doc.text[cut - 1] in " \t":
            cut -= 1
        cut = max(cut, doc.text.index(":", key.end_mark.index) + 1)
        splices.append(Splice(cut, node.end_mark.index, ""))
    pos = lines.line_content_end(line)
    splices.append(Splice(pos, pos, doc.eol + doc.eol.join(body)))
    return splices


def set_path(doc: Doc, path: Path, value: Any, order: Order | None = None) -> list[Splice]:
    """Splices that make `path` hold `value`, creating missing mappings on the way."""
    order = order or {}
    node = doc.root
    if node is None:
        return insert_entry(doc, None, (), path[0], nest(path[1:], value), order)
    for i, k in enumerate(path):
        if not isinstance(node, yaml.MappingNode):
            where = ".".join(path[:i]) or "the document"
            raise EditError(f"{where} is not a mapping, so `{'.'.join(path)}` cannot be written")
        pair = find_pair(node, k)
        if pair is None:
            return insert_entry(doc, node, path[:i], k, nest(path[i + 1 :], value), order)
        key, val = pair
        if i == len(path) - 1:
            return replace_value(doc, key, val, value)
        if is_alias_value(key, val):
            raise EditError(f"`{'.'.join(path[: i + 1])}` is an alias (*anchor): edit the anchored mapping")
        if is_null(val):
            if node.flow_style:  # `{accelerator: ~}`: the section is written in flow style in its place
                return replace_value(doc, key, val, nest(path[i + 1 :], value))
            return fill_null(doc, key, val, path[i + 1 :], value)
        node = val
    raise AssertionError("unreachable")


def remove_path(doc: Doc, path: Path) -> list[Splice]:
    """Splices deleting the entry at `path` (its key, value and the comments on those lines); a section
    left empty goes with it."""
    parent_node = doc.root if len(path) == 1 else (lookup(doc, path[:-1]) or (None, None))[1]
    if not isinstance(parent_node, yaml.MappingNode):
        return []
    if len(path) > 1 and len(parent_node.value) == 1 and find_pair(parent_node, path[-1]) is not None:
        return remove_path(doc, path[:-1])
    pair = find_pair(parent_node, path[-1])
    if pair is None:
        return []
    key, val = pair
    text, lines = doc.text, doc.lines
    if parent_node.flow_style:
        pairs = parent_node.value
        i = next(j for j, p in enumerate(pairs) if p[0] is key)
        if i + 1 < len(pairs):
            return [Splice(key.start_mark.index, pairs[i + 1][0].start_mark.index, "")]
        if i > 0:
            return [Splice(content_end(doc, pairs[i - 1][1]), content_end(doc, val), "")]
        return [Splice(key.start_mark.index, content_end(doc, val), "")]
    first = lines.line_of(key.start_mark.index)
    if text[lines.line_start(first) : key.start_mark.index].strip():
        raise EditError(f"cannot remove `{'.'.join(path)}`: its key shares a line with other content")
    last = last_line(doc, key, val)

    def blank(line: int) -> bool:
        return 0 <= line < lines.line_count and not text[lines.line_start(line) : lines.line_content_end(line)].strip()

    if key.start_mark.column == 0 and first > 0 and blank(first - 1) and (
            blank(last + 1) or last + 1 >= lines.line_count or lines.line_start(last + 1) == len(text)):
        first -= 1  # a top-level section between blank lines: one blank line goes with it
    if last + 1 < lines.line_count:
        return [Splice(lines.line_start(first), lines.line_start(last + 1), "")]
    start = lines.line_content_end(first - 1) if first > 0 else 0
    return [Splice(start, lines.line_content_end(last), "")]


# ---------------------------------------------------------------------------------------------- guard


def untouched_equal(old: Doc, new: Doc, written: set[Path]) -> str | None:
    """None when `new` holds the same YAML as `old` everywhere but the `written` paths (and the mappings
    created to hold them); else the first path that differs. Compares composed nodes (tag and value of
    every scalar), each pair of nodes once, so shared anchors stay linear. This catches any collateral
    change of an edit: a key captured by the wrong indentation, a kept-newline scalar cut short."""
    prefixes = {p[:i] for p in written for i in range(len(p))}
    seen: set[tuple[int, int]] = set()

    def created(b: yaml.Node, path: Path) -> str | None:
        """`b` is new at `path`: fine when it is a mapping holding only written paths."""
        if path in written:
            return None
        if path in prefixes and isinstance(b, yaml.MappingNode):
            kb = _keyed(b)
            if kb is None:
                return ".".join(path) or "the document"
            for k, v in kb.items():
                bad = created(v, (*path, k))
                if bad:
                    return bad
            return None
        return ".".join(path) or "the document"

    def same(a: yaml.Node | None, b: yaml.Node | None, path: Path) -> str | None:
        where = ".".join(path) or "the document"
        if path in written:
            return None
        if b is None or (is_null(b) and isinstance(a, yaml.MappingNode)):
            return created(a, path) if a is not None else where  # a section emptied by the edit
        if a is None or (is_null(a) and isinstance(b, yaml.MappingNode)):
            return created(b, path)
        if (id(a), id(b)) in seen:
            return None
        seen.add((id(a), id(b)))
        if type(a) is not type(b) or a.tag != b.tag:
            return where
        if isinstance(a, yaml.ScalarNode):
            return None if a.value == b.value else where
        if isinstance(a, yaml.SequenceNode):
            if len(a.value) != len(b.value):
                return where
            for i, (x, y) in enumerate(zip(a.value, b.value, strict=True)):
                bad = same(x, y, (*path, f"[{i}]"))
                if bad:
                    return bad
            return None
        if isinstance(a, yaml.MappingNode) and isinstance(b, yaml.MappingNode):
            ka, kb = _keyed(a), _keyed(b)
            if ka is None or kb is None:
                return None if [k.value for k, _ in a.value] == [k.value for k, _ in b.value] else where
            for k in dict.fromkeys([*ka, *kb]):
                bad = same(ka.get(k), kb.get(k), (*path, k))
                if bad:
                    return bad
        return None

    if new.root is None:
        return None if old.root is None else "the document"
    return same(old.root, new.root, ())


def _keyed(node: yaml.MappingNode) -> dict[str, yaml.Node] | None:
    """Value nodes by plain string key (the last of duplicates, as PyYAML keeps); None for other keys."""
    out: dict[str, yaml.Node] = {}
    for k, v in node.value:
        if not isinstance(k, yaml.ScalarNode):
            return None
        out[k.value] = v
    return out
