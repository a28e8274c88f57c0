"""Round-trip edits of YAML configs: the strategy writer behind `hp-plan apply` and the language server's
quick fixes. Pure functions, text in and edits out; nothing raises (see engine.edit.core.EditResult).

Modules: `text` (lines as LSP counts them, offsets <-> positions, the line-then-token diff), `yamltext`
(splices computed from composed PyYAML marks: token replacement, key insertion at its natural place,
removal, the collateral-change guard), `core` (one change at a time, then minimal edits), `strategy`
(Strategy -> train.yaml keys, both schemas, read-back), `quickfix` (set_value, rename_key, widen_list,
new_search_config_text). Ranges are code points; the server converts to UTF-16.
"""

from engine.edit.core import EditResult
from engine.edit.quickfix import new_search_config_text, rename_key, set_value, widen_list
from engine.edit.strategy import plan_edits, strategy_edits
from engine.edit.text import apply_edits

__all__ = [
    "EditResult",
    "apply_edits",
    "new_search_config_text",
    "plan_edits",
    "rename_key",
    "set_value",
    "strategy_edits",
    "widen_list",
]
