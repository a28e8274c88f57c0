"""End to end: Show plan on a global batch typed 2**30 (`hpLsp.showPlan` runs in the server process: it grew the
server from 117 MB to 1.9 GB in 4 s) answers quickly with a bounded timeline and says how it drew it (HP750),
over a real LSP connection."""

from __future__ import annotations

import time
from typing import Any

import pytest
from lsprotocol import types

from tests.support.lsp_e2e import ROOT, Ctx, open_doc, wait_until

PLAN = ROOT / "examples" / "explain" / "1f1b.yaml"


pytestmark = pytest.mark.lsp(profiles=["visual-studio-code"])


async def test_show_plan_on_a_2_30_batch_is_bounded(ctx: Ctx) -> None:
    client, root = ctx.client, ctx.root
    path = root / "train.yaml"
    path.write_text(PLAN.read_text().replace("global_batch_size: 16", "global_batch_size: 1073741824")
                    .replace("  micro_batch_num: 8\n", ""))
    uri = open_doc(client, path)
    await wait_until(lambda: uri in client.diagnostics, what="the document's check")
    t0 = time.monotonic()
    res: Any = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command="hpLsp.showPlan", arguments=[uri, "stated"]))
    assert time.monotonic() - t0 < 30
    assert isinstance(res, dict) and "error" not in res, res
    assert res["strategy"]["micro_batch_num"] == 536870912
    assert len(res["timeline"]) < 50_000 and len(res["svg"]) < 20_000_000
    assert any(d["code"] == "HP750" and "boxes per stage and chunk" in d["message"] for d in res["diagnostics"])
