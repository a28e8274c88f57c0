"""Regenerate docs/diagnostics.md from engine.diagnostics.CODES: `python docs/gen_diagnostics.py`.

tests/engine/test_diagnostics_doc.py fails when the committed file differs from what this prints, so a new
code cannot ship undocumented.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.diagnostics import CODES

FAMILIES = [
    ("HP0", "Reading (HP0xx)", "The file itself: YAML syntax, structure, encoding and hostile input. HP001, HP002 and "
     "HP004-HP006 stop the analysis; duplicate keys (HP003) and tags (HP007) are reported and it goes on."),
    ("HP1", "Types and keys (HP1xx)", "A value of the wrong type, out of range, or a key nobody reads. `data` "
     "carries `replace_key` (the key you probably meant) or `replace_value` (the value you probably meant)."),
    ("HP2", "Model facts (HP2xx)", "The model: catalog / config.json resolution (offline only) and facts that "
     "contradict each other."),
    ("HP3", "Cluster (HP3xx)", "The devices: catalog names, counts, where the cluster comes from."),
    ("HP4", "Cross-field rules (HP4xx)", "Degrees, batch and memory against the model and the cluster "
     "(HyperParallel's checker, plus the world-size and batch rules). Each lands on the value to change; "
     "`data.nearest_valid` and `data.valid` name values that work."),
    ("HP5", "Pricing (HP5xx)", "`hp-plan estimate`: pricing the strategy a file states."),
    ("HP6", "Search (HP6xx)", "`hp-plan search`: refusals and advice, positioned on the list or value at fault."),
    ("HP8", "Calibration (HP8xx)", "`hp-plan calibrate`, RUNS files and ratios files (docs/calibration.md): "
     "positioned on the run entry, the log or the `estimator.ratios_file` at fault."),
    ("HP9", "Internal (HP9xx)", "An engine failure, reported instead of a traceback. Please report it."),
]

HEADER = """# Diagnostic codes

Generated from `engine.diagnostics.CODES` by `python docs/gen_diagnostics.py`; do not edit by hand (a test
compares this file with the generator's output).

Every diagnostic has a stable code, a default severity, a message that says what to do, the dotted `path` of
the value (`accelerator.tp_size`), its `range` in the file where it was written (`file` is set when that is
not the file checked, e.g. the train.yaml a search config references), and `data` for quick fixes.
`hp-plan check` prints `path:line:col: severity CODE: message` with 1-based positions; `--json` and the
language server use 0-based lines and characters.

Some facts can be found by two stages (the checks HP4xx, the pricing HP5xx, the search HP6xx), e.g. too few
micro-batches (HP415 / HP506) or a stated plan over the budget (HP610 / HP520). `hp-plan estimate`,
`hp-plan search` and the language server then show each fact once, under one owner code (`engine/facts.py`,
the first code of each group there) at the strictest severity the stages gave it; a code that states several
facts (HP504, HP508, HP510) carries the key of the one it found, so rewording a message never changes the merge.
Each family's table in `engine/codes/` records the modules that raise each code (`RAISED_BY`).

## Severities

A severity says what the user must see, chosen for how editors show them (VS Code leaves `hint` out of the
Problems panel and the status-bar count and draws it as faint dots; eglot shows it as a note; ALE as a
warning):

- `error`: the trainer or the planner would refuse the file, or a value is impossible (a degree that does not
  divide, a batch that cannot be made). Fix it before training.
- `warning`: the file may run, but as written it is likely wrong or wasteful: the stated plan does not fit
  the memory budget (HP610), a key is unknown and ignored (HP102), a setting has no effect (HP510), a fact the
  prices need is missing (HP207).
- `information`: nothing is wrong, but there is something to act on or a fact the numbers rest on: a faster
  plan fits (HP611, with a quick fix), a default was assumed (HP303, HP521), the file is not analysed (HP008).
  Listed in the Problems panel and counted in the status bar.
- `hint` is not used: a finding worth showing is worth listing.
"""


def anchor(code: str) -> str:
    """The fragment of a code's row: the language server links `docs/diagnostics.md#<anchor>` from each
    diagnostic's codeDescription, so the two must agree (tests/hp_lsp/test_diagnostic_links.py)."""
    return code.lower()


def _row(c: object) -> str:
    code, severity, title = c.code, c.severity.value, c.title  # type: ignore[attr-defined]
    # An HTML anchor per row: markdown tables have no per-row ids, and a heading per code would bury the table.
    return f'| <a id="{anchor(code)}"></a>{code} | {severity} | {title} |'


def render() -> str:
    out = [HEADER]
    for prefix, title, intro in FAMILIES:
        rows = [c for c in CODES.values() if c.code.startswith(prefix)]
        if not rows:
            continue
        out.append(f"\n## {title}\n\n{intro}\n\n| code | severity | meaning |\n|---|---|---|")
        out.extend(_row(c) for c in sorted(rows, key=lambda c: c.code))
    others = [c for c in CODES.values() if not any(c.code.startswith(p) for p, _, _ in FAMILIES)]
    if others:
        out.append("\n## Other\n\n| code | severity | meaning |\n|---|---|---|")
        out.extend(_row(c) for c in sorted(others, key=lambda c: c.code))
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    target = Path(__file__).with_name("diagnostics.md")
    if "--check" in sys.argv:
        sys.exit(0 if target.read_text() == render() else 1)
    target.write_text(render())
    print(f"wrote {target}")
