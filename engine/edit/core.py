"""The change pipeline every edit goes through: apply one change at a time to the text (re-composing in
between, so each change sees exact marks), then turn the final text into minimal edits against the
original by a line diff refined to tokens. The result says what changed, or why nothing could be."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from engine.edit.text import apply_splices, diff_splices, to_text_edits
from engine.edit.yamltext import Doc, EditError, Order, Path, remove_path, set_path, untouched_equal
from engine.positions import Position, Range, TextEdit

BOM = "\ufeff"
F = TypeVar("F", bound=Callable[..., "EditResult"])

MISSING: Any = type("Missing", (), {"__repr__": lambda self: "<missing>"})()


@dataclass(frozen=True, slots=True)
class EditResult:
    """Edits (code-point ranges, non-overlapping, against the original text), the text they produce and the
    dotted paths changed; or `error`, the reason nothing may be written (then `edits` is empty and
    `new_text` is the original). Iterating yields the edits."""

    edits: tuple[TextEdit, ...]
    new_text: str
    changed: tuple[str, ...] = ()
    error: str | None = None
    # (dotted path, value before or None when absent, value after or None when removed), for messages
    values: tuple[tuple[str, Any, Any], ...] = ()

    @property
    def ok(self) -> bool:
        return self.error is None

    def __iter__(self) -> Iterator[TextEdit]:
        return iter(self.edits)

    @staticmethod
    def refused(text: str, reason: str) -> EditResult:
        return EditResult((), text, (), reason)


@dataclass(frozen=True, slots=True)
class Change:
    """Make `path` hold `value` (or remove it when `remove`). `satisfied(current)` says whether the value
    already there (MISSING when absent) is good as it is, so equal values are never rewritten."""

    path: Path
    value: Any = None
    remove: bool = False
    satisfied: Callable[[Any], bool] | None = field(default=None)

    @property
    def dotted(self) -> str:
        return ".".join(self.path)


def value_at(data: Any, path: Sequence[str]) -> Any:
    for k in path:
        if not isinstance(data, dict) or k not in data:
            return MISSING
        data = data[k]
    return data


Applied = tuple[str, Any, Any]


def apply_changes(doc: Doc, changes: Iterable[Change], order: Order | None = None) -> tuple[Doc, list[Applied]]:
    """Apply the changes in order to a parsed document; returns the parsed new document (`doc` itself when
    nothing changed) and (dotted path, before, after) of each change made. Raises EditError when one cannot
    be made. Callers keep both documents, so neither text is parsed again for the guard or a read-back."""
    changed: list[Applied] = []
    for ch in changes:
        now = value_at(doc.data, ch.path)
        if ch.remove:
            if now is MISSING:
                continue
            splices = remove_path(doc, ch.path)
        else:
            if ch.satisfied is not None and ch.satisfied(now):
                continue
            if ch.satisfied is None and now is not MISSING and _same(now, ch.value):
                continue
            splices = set_path(doc, ch.path, ch.value, order)
        if not splices:
            continue
        doc = Doc.parse(apply_splices(doc.text, splices))
        changed.append((ch.dotted, None if now is MISSING else now, None if ch.remove else ch.value))
    return doc, changed


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def finish(text: str, new_text: str, changed: Sequence[str | Applied]) -> EditResult:
    """Minimal edits from `text` to `new_text`, checked to reproduce it exactly."""
    splices = diff_splices(text, new_text)
    if apply_splices(text, splices) != new_text:  # a bug in the diff, never the user's fault
        return EditResult.refused(text, "internal error: the computed edits do not reproduce the new text")
    values = tuple(c for c in changed if isinstance(c, tuple))
    paths = tuple(c if isinstance(c, str) else c[0] for c in changed)
    return EditResult(tuple(to_text_edits(text, splices)), new_text, paths, None, values)


def guard(old: Doc, new: Doc, written: Iterable[Path]) -> None:
    """Raise EditError when `new` differs from `old` anywhere but the `written` paths."""
    bad = untouched_equal(old, new, set(written))
    if bad:
        raise EditError(collateral_refusal(old.text, bad))


def collateral_refusal(text: str, changed: str) -> str:
    """Why an edit that would change `changed` too is refused. In a file with anchors, the likely cause is the
    file's own: a written key shares its value with `changed` through an alias (`*name`) or merge key (`<<`), so
    the fix is to give it its own value; otherwise it is this project's bug."""
    if shares_values(text):
        return (f"refused: the edit would also change {changed}, which shares its value with a written key through "
                "a YAML alias (*anchor) or merge key (<<): give the key its own value, then apply again")
    return f"refused: the edit would also change {changed} (please report this file)"


def shares_values(text: str) -> bool:
    """Whether the file may share a value between keys (an anchor and an alias or merge key)."""
    return "&" in text and ("*" in text or "<<" in text)


def shared_value_hint(text: str) -> str:
    """What to add to a refusal where the edited file read back a strategy key otherwise than written: in a file
    that shares values, a key the edit did not mean to move follows an anchored value it changed (a
    `micro_batch_size: &one 1` that `pp_size: *one` names)."""
    if not shares_values(text):
        return ""
    return ("; a key of the plan shares its value with an edited one through a YAML alias (*anchor) or merge key "
            "(<<): give it its own value, then apply again")


def edit(text: str, changes: Iterable[Change], order: Order | None = None) -> EditResult:
    """Run `changes` on `text`, checked to leave everything else as it was; never raises."""
    changes = list(changes)
    try:
        doc = Doc.parse(text)
        new, changed = apply_changes(doc, changes, order)
        guard(doc, new, (c.path for c in changes))
    except EditError as e:
        return EditResult.refused(text, str(e))
    return finish(text, new.text, changed)


def _after_bom(e: TextEdit) -> TextEdit:
    def shift(p: Position) -> Position:
        return Position(p.line, p.character + 1) if p.line == 0 else p

    return TextEdit(Range(shift(e.range.start), shift(e.range.end)), e.new_text)


def keeps_bom(fn: F) -> F:
    """An edit function that accepts a text starting with a UTF-8 BOM (U+FEFF): YAML readers skip it, the
    marks here would not, so the edit is computed on the text after it, the BOM is kept in `new_text`,
    and edits on the first line move one character right to stay against the original text."""

    @functools.wraps(fn)
    def inner(text: str, *args: Any, **kwargs: Any) -> EditResult:
        if not text.startswith(BOM):
            return fn(text, *args, **kwargs)
        res = fn(text[1:], *args, **kwargs)
        return EditResult(tuple(_after_bom(e) for e in res.edits), BOM + res.new_text, res.changed, res.error,
                          res.values)

    return inner  # type: ignore[return-value]
