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
    folder or under `/`. Asks nothing of the disk (it runs on the event loop): `prepare` and `write_beside` check
    that the path is a regular file, off the loop."""
    if not state.path:
        return "the document is not a file on disk"
    if not any(wants_search_config(str(d.code) if d.code else None, d.data if isinstance(d.data, dict) else None)
               for d in state.published):
        return "the file does not need one: no diagnostic of it asks for a search config (its cluster is known)"
    return None


def _names(train_path: str) -> tuple[str, ...]:
    """The names "create search config" may write, in order: `search.yaml` next to the train.yaml, then
    `search-<stem>.yaml`, then one with the server's process id."""
    folder = os.path.dirname(train_path)
    stem = os.path.splitext(os.path.basename(train_path))[0]
    return tuple(os.path.join(folder, name) for name in ("search.yaml", f"search-{stem}.yaml",
                                                           f"search-{stem}-{os.getpid()}.yaml"))


def search_config_path(train_path: str) -> str:
    """Where "create search config" writes: the first of `_names` that does not exist (never overwriting)."""
    names = _names(train_path)
    return next((n for n in names[:-1] if not os.path.exists(n)), names[-1])


CREATE_TITLE = "Create a search config next to this file"


def new_search_config(settings: Settings, train_path: str) -> tuple[str, str]:
    """(path, text) of the search config to create beside `train_path` (search_config_path, _text)."""
    return search_config_path(train_path), _text(settings, train_path)


def _text(settings: Settings, train_path: str) -> str:
    """The search config every name of `_names` would hold (all beside the train.yaml, so all name it alike): the
    settings' cluster when there is one, else a placeholder node of eight H100s for the user to edit."""
    return new_search_config_text(os.path.basename(train_path), settings.num_nodes or 1, settings.cards_per_node or 8,
                                  settings.device_type or "H100", settings.memory_limit_gb or settings.device_memory_gb)


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


def _not_a_file(train_path: str) -> str | None:
    return None if os.path.isfile(train_path) else f"{train_path} is not a regular file"


def prepare(settings: Settings, train_path: str) -> tuple[str, str] | str:
    """Off the loop: (path, text) of the search config a CreateFile edit is to make beside `train_path`, or why
    there is none (the train.yaml is not a regular file)."""
    return _not_a_file(train_path) or new_search_config(settings, train_path)


def write_beside(settings: Settings, train_path: str) -> tuple[str | None, str | None]:
    """Off the loop, in one step, for clients that cannot create files through an edit (Neovim 0.7): check that
    `train_path` is a regular file, then create the first free name of `_names` (never overwriting one: a name
    taken, however recently, moves on to the next). (path, None), or (None, the reason)."""
    why = _not_a_file(train_path)
    if why is not None:
        return None, why
    text, names = _text(settings, train_path), _names(train_path)
    for name in names:  # the exclusive create is the test of a name: no stat before it
        try:
            with open(name, "x", encoding="utf-8") as f:
                f.write(text)
        except FileExistsError:
            continue
        except OSError as exc:
            return None, str(exc)
        return name, None
    return None, f"{names[-1]} exists already"
