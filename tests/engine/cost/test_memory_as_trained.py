"""Issue 11 item 6: memory as trained: no dropout masks at dropout 0 (as the files state it)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from engine.check import check_file
from engine.cost import estimate
from engine.cost.memory import attention_dropout, dropout
from engine.specs import RunOptions, Strategy
from tests.engine.cost.shapes import GPT2, h100

SEARCH = """\
model:
  num_hidden_layers: 12
  hidden_size: 768
  intermediate_size: 3072
  num_attention_heads: 12
  vocab_size: 50257
  max_position_embeddings: 1024
  hidden_act: gelu
  {extra}
cluster: {{num_nodes: 1, cards_per_node: 1, device_type: H100}}
parallelism: {{dp: 1, tp: 1, pp: 1, cp: 1, ep: 1, micro_batch_size: 8, micro_batch_num: 1}}
constraint: {{global_batch_size: 8}}
recompute: none
"""


def test_stated_dropout_zero_drops_the_masks() -> None:
    assert dropout(GPT2) and attention_dropout(GPT2)  # GPT recipe default: dropout 0.1
    no = replace(GPT2, hidden_dropout=0.0, attention_dropout=0.0)
    assert not dropout(no) and not attention_dropout(no)
    s = Strategy(micro_batch_size=8)
    with_masks = estimate(GPT2, h100(1, 1), RunOptions(), s, 80.0).memory_breakdown_gib["activations"]
    without = estimate(no, h100(1, 1), RunOptions(), s, 80.0).memory_breakdown_gib["activations"]
    assert without < with_masks


def test_dropout_read_from_the_files(tmp_path: Path) -> None:
    peaks = {}
    for extra in ("", "hidden_dropout: 0.0", "resid_pdrop: 0.0"):
        f = tmp_path / "search.yaml"
        f.write_text(SEARCH.format(extra=extra))
        cfg = check_file(str(f)).config
        assert cfg is not None and cfg.model is not None
        peaks[extra] = cfg.model.hidden_dropout
    assert peaks == {"": None, "hidden_dropout: 0.0": 0.0, "resid_pdrop: 0.0": 0.0}
