"""Each diagnostic's codeDescription link lands on an anchor docs/diagnostics.md really has."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlsplit

from pygls.uris import to_fs_path

from engine.diagnostics import CODES
from hp_lsp.features.diagnostics import code_href

DOCS = Path(__file__).resolve().parents[2] / "docs" / "diagnostics.md"


def test_every_code_href_lands_on_an_anchor() -> None:
    anchors = set(re.findall(r'<a id="([^"]+)"></a>', DOCS.read_text()))
    assert anchors, "docs/diagnostics.md has no anchors: run `python docs/gen_diagnostics.py`"
    for code in CODES:
        href = code_href(code)
        assert href is not None, code
        parts = urlsplit(href)
        assert Path(to_fs_path(href.split("#")[0]) or "").resolve() == DOCS.resolve()
        assert parts.fragment in anchors, (code, href)
    assert code_href("HP999") is None or "HP999" in CODES
