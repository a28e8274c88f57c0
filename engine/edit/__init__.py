"""Round-trip edits of YAML configs: the strategy writer behind `hp-plan apply` and the language server's
quick fixes. Pure functions: text in, code-point TextEdits out (see engine.edit.core.EditResult)."""

from engine.edit.core import EditResult
from engine.edit.quickfix import new_search_config_text, rename_key, set_value, widen_list
from engine.edit.strategy import strategy_edits
from engine.edit.text import apply_edits

__all__ = [
    "EditResult",
    "apply_edits",
    "new_search_config_text",
    "rename_key",
    "set_value",
    "strategy_edits",
    "widen_list",
]
