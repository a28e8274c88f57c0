"""Ascend profiler folders (engine.calibrate.ascend) that are not what they seem: a task table that is a FIFO or a
link to a device, a step id of inf, a cell over the csv module's field limit. Each is a positioned finding at the
RUNS entry, never a hang, a memory blow-up or an internal error."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from engine.calibrate.ascend import read_ascend
from engine.calibrate.stream import TraceError

HEADER = "Step Id,Device_id,Name,Type,Accelerator Core,Start Time(us),Duration(us),Wait Time(us)"


def _table(tmp_path: Path) -> Path:
    folder = tmp_path / "prof" / "ASCEND_PROFILER_OUTPUT"
    folder.mkdir(parents=True)
    return folder / "kernel_details.csv"


@pytest.mark.parametrize("kind", ["fifo", "dev_zero"])
def test_a_task_table_that_is_no_regular_file_is_refused_unread(tmp_path: Path, kind: str) -> None:
    """A FIFO had blocked the read forever; a link to /dev/zero had grown the memory without bound (8 GB in
    60 s): both are refused before any byte is read."""
    table = _table(tmp_path)
    if kind == "fifo":
        os.mkfifo(table)
    else:
        table.symlink_to("/dev/zero")
    with pytest.raises(TraceError, match="not a regular file") as got:
        read_ascend(str(tmp_path / "prof"))
    assert got.value.code == "HP801"


def test_a_step_id_of_inf_is_a_finding_at_its_line(tmp_path: Path) -> None:
    _table(tmp_path).write_text(f"{HEADER}\n0,0,MatMulV2_1,MatMulV2,AI_CORE,1,1,0\ninf,0,MatMulV2_1,MatMulV2,"
                                "AI_CORE,1,1,0\n")
    with pytest.raises(TraceError, match=r"line 3: .* Step Id 'inf' is not a number") as got:
        read_ascend(str(tmp_path / "prof"))
    assert got.value.code == "HP820"


def test_a_cell_over_the_csv_field_limit_is_a_finding(tmp_path: Path) -> None:
    _table(tmp_path).write_text(f"{HEADER}\n0,0,{'x' * 200_000},MatMulV2,AI_CORE,1,1,0\n")
    with pytest.raises(TraceError, match="not a CSV task table it can read") as got:
        read_ascend(str(tmp_path / "prof"))
    assert got.value.code == "HP820"
