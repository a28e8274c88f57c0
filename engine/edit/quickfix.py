"""Quick-fix builders for the language server, on the same round-trip machinery as `hp-plan apply`:
set a value, rename a key, widen a list of candidates, and the text of a new search config.

Each returns an EditResult (minimal code-point edits against the given text, the new text, or an error
reason); none raises. Paths are dotted (`accelerator.tp_size`) or tuples of keys.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import yaml

from engine.edit.core import Change, EditResult, edit, finish, guard, keeps_bom
from engine.edit.strategy import AUTOMODELS_ORDER, LEGACY_ORDER
from engine.edit.text import Splice, apply_splices
from engine.edit.yamltext import (
    Doc,
    EditError,
    Order,
    Path,
    content_end,
    find_pair,
    is_alias_value,
    last_line,
    lookup,
    render_key,
    render_scalar,
    render_str,
)

SEARCH_ORDER: Order = {
    (): ("train_yaml", "model", "cluster", "parallelism", "constraint", "recompute", "selective_policy",
         "pp_config"),
    ("cluster",): ("num_nodes", "cards_per_node", "device_type", "device_memory_gb",
                   "intra_node_bandwidth_gb_s", "inter_node_bandwidth_gb_s"),
    ("parallelism",): ("dp", "fsdp", "tp", "pp", "cp", "ep", "etp", "vpp", "micro_batch_size",
                       "micro_batch_num", "sequence_parallel"),
    ("constraint",): ("global_batch_size", "memory_limit_gb"),
    ("pp_config",): ("pipeline_schedule", "pp_interleave_num"),
}


def _merged_order() -> Order:
    out: dict[Path, tuple[str, ...]] = {}
    for table in (SEARCH_ORDER, AUTOMODELS_ORDER, LEGACY_ORDER):
        for parent, names in table.items():
            have = out.get(parent, ())
            out[parent] = have + tuple(n for n in names if n not in have)
    return out


ORDER: Order = _merged_order()


def _path(dotted: str | Sequence[str]) -> Path:
    return tuple(dotted.split(".")) if isinstance(dotted, str) else tuple(dotted)


@keeps_bom
def set_value(text: str, dotted_path: str | Sequence[str], value: Any) -> EditResult:
    """Make `dotted_path` hold `value` (int, float, bool, str, None, list or dict; lists and dicts are
    written in flow style): the token is replaced keeping its quotes, or the key (and any missing parent
    mapping) is added at its natural place."""
    path = _path(dotted_path)
    if not path or not all(path):
        return EditResult.refused(text, f"not a key path: {dotted_path!r}")
    return edit(text, [Change(path, value)], ORDER)


@keeps_bom
def rename_key(text: str, dotted_path: str | Sequence[str], new_key: str) -> EditResult:
    """Rename the last key of `dotted_path` (a misspelt `tp_sise` -> `tp_size`), keeping its quotes, its
    value and its comments."""
    path = _path(dotted_path)
    try:
        doc = Doc.parse(text)
        parent = doc.root if len(path) == 1 else (lookup(doc, path[:-1]) or (None, None))[1]
        if not isinstance(parent, yaml.MappingNode):
            raise EditError(f"`{'.'.join(path[:-1]) or 'the document'}` is not a mapping")
        pair = find_pair(parent, path[-1])
        if pair is None:
            raise EditError(f"no key `{'.'.join(path)}`")
        if find_pair(parent, new_key) is not None:
            raise EditError(f"`{new_key}` is already set here: renaming would make a duplicate key")
        key = pair[0]
        style = key.style if isinstance(key, yaml.ScalarNode) and key.style in ("'", '"') else None
        token = render_str(new_key, style) if style else render_key(new_key)
        new_text = apply_splices(text, [Splice(key.start_mark.index, key.end_mark.index, token)])
        guard(doc, Doc.parse(new_text), [path, (*path[:-1], new_key)])
    except EditError as e:
        return EditResult.refused(text, str(e))
    return finish(text, new_text, [".".join(path)])


def _numeric(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _widen_once(doc: Doc, path: Path, value: Any) -> list[Splice]:
    pair = lookup(doc, path)
    if pair is None:
        return []
    key, node = pair
    if is_alias_value(key, node):
        raise EditError(f"`{'.'.join(path)}` is an alias (*anchor): widen the anchored list")
    current = doc.data
    for k in path:
        current = current[k]
    if isinstance(node, yaml.ScalarNode):
        if isinstance(current, str) and current.strip().lower() == "auto":
            raise EditError(f"`{'.'.join(path)}` is auto: every value is already searched")
        if current == value:
            return []
        items = [current, value] if current is not None else [value]
        start, end = node.start_mark.index, content_end(doc, node)
        token = "[" + ", ".join(render_scalar(v) for v in items) + "]"
        return [Splice(start, end, (" " if start == end else "") + token)]
    if not isinstance(node, yaml.SequenceNode):
        raise EditError(f"`{'.'.join(path)}` is not a list")
    if value in current:
        return []
    items = node.value
    if any(not isinstance(i, yaml.ScalarNode) for i in items):
        raise EditError(f"`{'.'.join(path)}` holds nested values: widen it by hand")
    # keep an ascending numeric list ascending; anything else gets the value appended
    at = len(items)
    if _numeric(value) and all(_numeric(v) for v in current) and list(current) == sorted(current):
        at = next((i for i, v in enumerate(current) if v > value), len(items))
    token = render_scalar(value)
    text, lines = doc.text, doc.lines
    if node.flow_style:
        if not items:
            close = node.end_mark.index - 1
            return [Splice(close, close, token)]
        if at < len(items):
            pos = items[at].start_mark.index
            return [Splice(pos, pos, token + ", ")]
        pos = content_end(doc, items[-1])
        return [Splice(pos, pos, ", " + token)]
    ref = items[min(at, len(items) - 1)]
    line = lines.line_of(ref.start_mark.index)
    prefix = text[lines.line_start(line) : ref.start_mark.index]
    if prefix.strip() not in ("-",):
        raise EditError(f"`{'.'.join(path)}` is laid out in a way this fix does not edit")
    if at < len(items):
        pos = lines.line_start(line)
        return [Splice(pos, pos, prefix + token + doc.eol)]
    pos = lines.line_content_end(last_line(doc, ref, ref))
    return [Splice(pos, pos, doc.eol + prefix + token)]


@keeps_bom
def widen_list(text: str, dotted_path: str | Sequence[str], add_values: Iterable[Any]) -> EditResult:
    """Add values to the list at `dotted_path` in its own style (flow `[1, 2]` or block `- 1` lines), in
    ascending position when the list is ascending and numeric; a scalar becomes a flow list of itself and
    the values; an absent key becomes a flow list. Values already present are skipped."""
    path = _path(dotted_path)
    values = list(add_values)
    try:
        old = doc = Doc.parse(text)
        if lookup(doc, path) is None:
            return edit(text, [Change(path, values)], ORDER)
        for v in values:
            splices = _widen_once(doc, path, v)
            if splices:
                doc = Doc.parse(apply_splices(doc.text, splices))
        guard(old, doc, [path])
    except EditError as e:
        return EditResult.refused(text, str(e))
    return finish(text, doc.text, [".".join(path)] if doc.text != text else [])


def new_search_config_text(
    train_yaml_relpath: str,
    num_nodes: int,
    cards_per_node: int,
    device_type: str,
    memory_gb: float | None = None,
) -> str:
    """A commented search config (docs/formats.md §2) that reads its model, batch and fixed degrees from the
    train.yaml beside it and searches every dimension; what the quick fix "create a search config" writes."""
    if memory_gb:
        gb = int(memory_gb) if float(memory_gb).is_integer() else float(memory_gb)
        constraint = (
            "constraint:\n"
            "  # global_batch_size: 1024      # default: the train.yaml's training.global_batch_size\n"
            f"  memory_limit_gb: {render_scalar(gb)}   # budget = min(this, device memory)\n"
        )
    else:
        constraint = (
            "# constraint:\n"
            "#   global_batch_size: 1024      # default: the train.yaml's training.global_batch_size\n"
            "#   memory_limit_gb: 76          # budget = min(this, device memory)\n"
        )
    return (
        "# Strategy search for the train.yaml below (hp-plan search / apply, and the hp-lsp editor features).\n"
        "# Each parallelism entry: an int fixes it, a list gives its candidates, auto searches its own bounds.\n"
        f"train_yaml: {render_str(train_yaml_relpath)}   # model, batch and fixed degrees are read from it\n"
        "cluster:\n"
        f"  num_nodes: {int(num_nodes)}\n"
        f"  cards_per_node: {int(cards_per_node)}\n"
        f"  device_type: {render_str(device_type)}\n"
        "  # device_memory_gb: 80         # optional: the catalog's value\n"
        "parallelism:\n"
        "  dp: auto                       # derived so that dp*tp*pp*cp = the device count\n"
        "  fsdp: auto                     # FSDP shard degree (dp_shard)\n"
        "  tp: auto\n"
        "  pp: auto\n"
        "  cp: auto\n"
        "  ep: auto\n"
        "  vpp: auto                      # virtual pipeline chunks per stage\n"
        "  micro_batch_size: auto\n"
        "  micro_batch_num: auto          # derived from the batch rule\n"
        "  sequence_parallel: auto\n"
        "  # etp is never searched: it is read from the train.yaml\n"
        f"{constraint}"
        "recompute: auto                  # none | selective | full | auto | per_layer\n"
    )
