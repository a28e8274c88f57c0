"""Code actions that create a search config next to a train.yaml whose cluster is unknown (HP302, or a
diagnostic whose data asks for one): where the file goes, what it holds (the settings' cluster, else a
placeholder to edit), and how it reaches the disk: a CreateFile edit where the client applies one (VS Code),
else the `hpLsp.createSearchConfig` command, for which the server writes the file itself (Neovim 0.7).
The code actions that edit an existing file are in code_actions.py."""

from __future__ import annotations

import os
from typing import Any

from lsprotocol import types
from pygls.uris import from_fs_path

from engine.edit import new_search_config_text
from hp_lsp.client import ClientFeatures
from hp_lsp.session import DocState
from hp_lsp.settings import Settings

CREATE_SEARCH_CONFIG_COMMAND = "hpLsp.createSearchConfig"
# Diagnostics saying the cluster is unknown: offer to create a search config next to the file.
NO_CLUSTER_KEY = "create_search_config"
NO_CLUSTER_CODES = frozenset({"HP302"})


def wants_search_config(code: str | None, data: dict[str, Any] | None) -> bool:
    return code in NO_CLUSTER_CODES or bool(data and data.get(NO_CLUSTER_KEY))


def refusal(state: DocState) -> str | None:
    """Why `hpLsp.createSearchConfig` writes nothing for this document, or None: it creates a search config only
    for a train.yaml on disk whose published diagnostics ask for one (the quick fix's own condition). Run on a
    search config, on a train.yaml a search config already gives its cluster, on a buffer of no file or on a
    device path, it had written `search-<stem>.yaml` (and another on every call), or a file in the server's
    folder or under `/`."""
    if not state.path:
        return "the document is not a file on disk"
    if not os.path.isfile(state.path):
        return f"{state.path} is not a regular file"
    if not any(wants_search_config(str(d.code) if d.code else None, d.data if isinstance(d.data, dict) else None)
               for d in state.published):
        return "the file does not need one: no diagnostic of it asks for a search config (its cluster is known)"
    return None


def search_config_path(train_path: str) -> str:
    """Where "create search config" writes: `search.yaml` next to the train.yaml (never overwriting)."""
    folder = os.path.dirname(train_path)
    stem = os.path.splitext(os.path.basename(train_path))[0]
    for name in ("search.yaml", f"search-{stem}.yaml"):
        candidate = os.path.join(folder, name)
        if not os.path.exists(candidate):
            return candidate
    return os.path.join(folder, f"search-{stem}-{os.getpid()}.yaml")


CREATE_TITLE = "Create a search config next to this file"


def new_search_config(settings: Settings, train_path: str) -> tuple[str, str]:
    """(path, text) of the search config to create beside `train_path`: the settings' cluster when there
    is one, else a placeholder node of eight H100s for the user to edit."""
    target = search_config_path(train_path)
    text = new_search_config_text(os.path.relpath(train_path, os.path.dirname(target)),
                                  settings.num_nodes or 1, settings.cards_per_node or 8,
                                  settings.device_type or "H100",
                                  settings.memory_limit_gb or settings.device_memory_gb)
    return target, text


def create_edit(target: str, text: str) -> types.WorkspaceEdit:
    """The WorkspaceEdit that creates the file `target` holding `text` (a client with CreateFile support)."""
    new_uri = from_fs_path(target) or target
    start = types.Position(line=0, character=0)
    return types.WorkspaceEdit(document_changes=[
        types.CreateFile(uri=new_uri, options=types.CreateFileOptions(ignore_if_exists=True)),
        types.TextDocumentEdit(text_document=types.OptionalVersionedTextDocumentIdentifier(uri=new_uri, version=None),
                               edits=[types.TextEdit(range=types.Range(start=start, end=start), new_text=text)]),
    ])


def create_search_config_action(features: ClientFeatures, settings: Settings, state: DocState,
                                diag: types.Diagnostic) -> types.CodeAction | types.Command:
    """A CodeAction whose edit creates the file, where the client can create files through an edit (VS
    Code); else (Neovim 0.7) a bare Command: the server writes the file itself when it runs."""
    assert state.path is not None
    if features.create_files:
        target, text = new_search_config(settings, state.path)
        return types.CodeAction(title=CREATE_TITLE, kind=types.CodeActionKind.QuickFix, diagnostics=[diag],
                                edit=create_edit(target, text))
    return types.Command(title=CREATE_TITLE, command=CREATE_SEARCH_CONFIG_COMMAND, arguments=[state.uri])


def write_new(target: str, text: str) -> str | None:
    """Write a new file (never overwriting one); the reason when it cannot be. For clients that cannot
    create files through an edit (Neovim 0.7)."""
    try:
        with open(target, "x", encoding="utf-8") as f:
            f.write(text)
    except OSError as exc:
        return str(exc)
    return None
