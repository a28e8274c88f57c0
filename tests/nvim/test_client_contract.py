"""The editor clients name the server's settings and commands exactly as hp_lsp does.

The clients are TypeScript and Lua, so nothing type-checks these names across the boundary: a renamed
setting or command in hp_lsp would leave the VS Code settings UI or a Neovim command silently dead.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from hp_lsp import settings
from hp_lsp.features.code_actions import APPLY_COMMAND
from hp_lsp.features.plan import SAVE_TRACE_COMMAND

REPO = Path(__file__).resolve().parents[2]
VSCODE = REPO / "editors" / "vscode"
NEOVIM_PLUGIN = REPO / "editors" / "neovim" / "lua" / "hp_lsp" / "init.lua"


def _server_setting_names() -> set[str]:
    fields = settings._FIELDS  # the server's table of dotted setting names (private, read on purpose)
    return {f"{settings.SECTION}.{name}" for name in fields}


def test_vscode_contributes_exactly_the_server_settings_plus_interpreter() -> None:
    manifest = json.loads((VSCODE / "package.json").read_text())
    contributed = set(manifest["contributes"]["configuration"]["properties"])
    assert contributed == _server_setting_names() | {"hpLsp.interpreter"}


def test_vscode_sends_the_server_settings_it_reads() -> None:
    # SERVER_KEYS in settings.ts: what goes into initializationOptions / didChangeConfiguration.
    source = (VSCODE / "src" / "settings.ts").read_text()
    block = source[source.index("SERVER_KEYS") : source.index("];", source.index("SERVER_KEYS"))]
    sent = {f"hpLsp.{name}" for name in re.findall(r"\['([\w.]+)',", block)}
    # trace.server is the client's own (the language client traces the protocol itself).
    assert sent == _server_setting_names() - {"hpLsp.trace.server"}


def test_clients_call_the_server_apply_command() -> None:
    controller = (VSCODE / "src" / "controller.ts").read_text()
    assert f"applyOptimalStrategy: '{APPLY_COMMAND}'" in controller
    assert f"apply_optimal_strategy = '{APPLY_COMMAND}'" in NEOVIM_PLUGIN.read_text()


def test_clients_call_the_server_save_trace_command() -> None:
    plan_view = (VSCODE / "src" / "planView.ts").read_text()
    assert f"SAVE_TRACE = '{SAVE_TRACE_COMMAND}'" in plan_view
    assert f"save_plan_trace = '{SAVE_TRACE_COMMAND}'" in NEOVIM_PLUGIN.read_text()
