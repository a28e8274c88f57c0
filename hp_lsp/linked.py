"""The text "apply" edits when it is not the document itself: the train.yaml a search config links.

The open buffer wins (the editor's view); else the file is read from disk through the one bounded reader
(engine.files: regular files only, size checked before reading), on a worker thread, never on the event
loop. A file that cannot be read is a reason ("not applied: … is a directory"), never an exception.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.document import decode
from engine.files import ReadFailure, read_bounded


@dataclass(frozen=True, slots=True)
class LinkedText:
    """A linked file's text (code points, BOM dropped as editors do), or why there is none."""

    path: str
    text: str | None
    reason: str | None = None


def read_linked(path: str, max_bytes: int) -> LinkedText:
    """Read the train.yaml at `path` for an edit; call from a worker thread."""
    got = read_bounded(path, max_bytes)
    if isinstance(got, ReadFailure):
        return LinkedText(path, None, got.reason)
    text, diags = decode(got.data, path=path)
    if text is None:
        return LinkedText(path, None, f"{path}: {diags[0].message}" if diags else f"{path} cannot be decoded")
    return LinkedText(path, text)
