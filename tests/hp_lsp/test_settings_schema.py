"""The `hpLsp` settings are written in three places that must agree: the server's reader
(`hp_lsp.settings._FIELDS`, the one source of truth), the VS Code extension's contribution
(`editors/vscode/package.json`, what the Settings UI offers) and the extension's own validation table
(`editors/vscode/src/settings.ts`, `SERVER_KEYS`). A setting added to one and not the others is either
offered and ignored, or read and never offered; this test fails on either."""

from __future__ import annotations

import json
import re
from pathlib import Path

from hp_lsp.settings import _FIELDS, _MOST

ROOT = Path(__file__).resolve().parents[2]
VSCODE = ROOT / "editors" / "vscode"
# Settings only the client reads: which Python to start, and the client library's protocol trace.
CLIENT_ONLY = {"interpreter", "trace.server"}
# The server's kinds -> (package.json JSON-schema type, settings.ts kind).
KINDS = {"posint": ("integer", "posint"), "posfloat": ("number", "posnumber"), "str": ("string", "string"),
         "bool": ("boolean", "boolean")}


def contributed() -> dict[str, dict]:
    manifest = json.loads((VSCODE / "package.json").read_text(encoding="utf-8"))
    sections = manifest["contributes"]["configuration"]
    sections = sections if isinstance(sections, list) else [sections]
    return {name.removeprefix("hpLsp."): spec for s in sections for name, spec in s["properties"].items()}


def ts_server_keys() -> dict[str, str]:
    source = (VSCODE / "src" / "settings.ts").read_text(encoding="utf-8")
    table = source[source.index("SERVER_KEYS"):]
    table = table[:table.index("];")]
    return dict(re.findall(r"\[\s*'([^']+)'\s*,\s*'([^']+)'\s*\]", table))


def server_keys() -> dict[str, str]:
    return {name: kind for name, (_, kind) in _FIELDS.items() if name not in CLIENT_ONLY}


def json_type(spec: dict) -> str:
    types = spec["type"] if isinstance(spec["type"], list) else [spec["type"]]
    return next(t for t in types if t != "null")


def test_every_server_setting_is_contributed_with_its_type() -> None:
    offered = {k: v for k, v in contributed().items() if k not in CLIENT_ONLY}
    assert set(offered) == set(server_keys())
    for name, kind in server_keys().items():
        assert json_type(offered[name]) == KINDS[kind][0], name
        if kind == "posint":
            assert offered[name].get("minimum") == 1, name
            assert offered[name].get("maximum") == _MOST.get(name), name  # the Settings UI refuses what we do


def test_the_extensions_validation_table_matches_the_server() -> None:
    assert ts_server_keys() == {name: KINDS[kind][1] for name, kind in server_keys().items()}


def test_client_only_settings_are_contributed_and_documented() -> None:
    docs = (ROOT / "docs" / "settings.md").read_text(encoding="utf-8")
    for name in CLIENT_ONLY | set(server_keys()):
        assert f"hpLsp.{name}" in docs or f"`{name}`" in docs, name
    assert set(contributed()) >= CLIENT_ONLY
