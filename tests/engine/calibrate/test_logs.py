"""Log excerpts in the docs/formats.md §8 line formats (written for these tests), read to a steady state."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.calibrate import logs
from engine.calibrate.logs import LogError, parse_log, read_log

TORCHTITAN = [
    "[rank0]:[titan] 2025-01-10 10:00:00,000 - root - INFO - Training starts at step 1",
    "\x1b[31mstep:  1  \x1b[32mloss: 12.2500  \x1b[33mmemory: 70.10GiB(73.78%)  \x1b[34mtps: 812  "
    "\x1b[36mtflops: 47.30  \x1b[35mmfu: 4.78%\x1b[39m",
    *[f"step: {i:2d}  loss:  7.94{i:02d}  memory: 82.40GiB(86.73%)  tps: 5,7{60 + i % 5}  tflops: 335.48  "
      "mfu: 33.92%" for i in range(2, 21)],
]

MEGATRON = [
    " iteration        1/    5000 | consumed samples:          128 | elapsed time per iteration (ms): 9120.4 | "
    "learning rate: 1.500000E-07 | global batch size:   128 | lm loss: 1.103E+01 |",
    "[Rank 0] (after 10 iterations) memory (MB) | allocated: 30112.5 | max allocated: 61234.2 | "
    "reserved: 80000.0 | max reserved: 84377.0",
    *[f" iteration       {i * 10}/    5000 | consumed samples: {i * 1280} | elapsed time per iteration (ms): "
      f"{2843.2 + (i % 3) * 4:.1f} | learning rate: 3.0E-05 | global batch size:   128 | lm loss: 7.1E+00 |"
      for i in range(1, 12)],
]


def test_torchtitan_excerpt_drops_warmup_and_reads_max_reserved() -> None:
    r = parse_log(TORCHTITAN)
    assert r.format == "torchtitan" and r.steady.kind == "tokens_per_s_per_device"
    assert r.steady.warmup == 2  # 10% of 20 step lines: the 812 tps step 1 is gone
    assert 5760 <= r.steady.value <= 5764
    assert r.peak_memory_gib == pytest.approx(82.40)


def test_megatron_excerpt_reads_ms_and_max_reserved_mb() -> None:
    r = parse_log(MEGATRON)
    assert r.format == "megatron" and r.steady.kind == "step_time_s"
    assert r.steady.value == pytest.approx(2.8472, abs=0.004)  # 9.12 s iteration 1 dropped as warm-up
    assert r.peak_memory_gib == pytest.approx(84377.0 / 1024)


def test_checkpoint_step_is_an_outlier_not_the_mean() -> None:
    lines = ["step_time_s", "3.0", "1.00", "1.01", "0.99", "1.00", "9.5", "1.01", "1.00", "0.99", "1.00"]
    r = parse_log(lines)
    assert r.format == "csv" and r.steady.outliers == 1
    assert r.steady.value == pytest.approx(1.0, abs=0.01)


def test_csv_in_milliseconds_with_peak() -> None:
    r = parse_log(["step,step_time_ms,peak_memory_gib", "1,5000,70", "2,2500,71.5", "3,2500,71", "4,2510,71"])
    assert r.steady.value == pytest.approx(2.503, abs=0.01)
    assert r.peak_memory_gib == 71.5


@pytest.mark.parametrize("lines, code", [
    ([], "HP802"),
    (["", "   "], "HP802"),
    (["epoch 1 batch 3 loss 2.1", "all good"], "HP802"),
    (["step_time_s", "1.0", "2.0", "1.0", "2.0", "1.0", "2.0", "1.0", "2.1"], "HP804"),
    (["step_time_s", "1.0", "abc"], "HP803"),
    (["step_time_s", "1.0", "2.0\r1.0"], "HP803"),  # csv.Error inside the reader was an internal error
    (["step_time_s\r,x", "1.0"], "HP802"),  # a header csv cannot split is no header
])
def test_bad_logs_are_refused(lines: list[str], code: str) -> None:
    with pytest.raises(LogError) as exc:
        parse_log(lines)
    assert exc.value.code == code


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_is_never_opened(tmp_path: Path) -> None:
    fifo = tmp_path / "train.log"
    os.mkfifo(fifo)
    with pytest.raises(LogError) as exc:
        read_log(str(fifo))  # would block forever if it were opened for reading
    assert exc.value.code == "HP801"


HYPERPARALLEL = [
    "[INFO] building model",
    *[f"Training:  {i}%|{'#' * (i // 10)}| {i}/100 [00:{i:02d}<03:00,  2.3{i % 4}s/step, loss={7 - i / 50:.3f}, "
      f"grad_norm=1.2, lr=3e-05, tokens/s={45000 + (i % 3) * 10:.3f}, step_time={(9.9 if i == 1 else 2.34 + (i % 3) * 0.01):.3f}s]"
      for i in range(1, 31)],
]


def test_hyperparallel_trainer_tqdm_lines_read_step_time_and_drop_warmup() -> None:
    r = parse_log(HYPERPARALLEL)
    assert r.format == "hyperparallel" and r.steady.kind == "step_time_s"
    assert r.steady.warmup == 3  # 10% of 30 step lines: the 9.9 s first step is gone
    assert 2.34 <= r.steady.value <= 2.36
    assert r.peak_memory_gib is None  # the line carries no memory figure


def test_hyperparallel_log_through_calibrate(tmp_path: Path) -> None:
    from tests.support.cli import hp_plan_script
    from tests.support.configs import stated_config

    stated_config(tmp_path, "a.yaml")
    (tmp_path / "train.log").write_text("\r\n".join(HYPERPARALLEL) + "\n")
    (tmp_path / "runs.yaml").write_text("runs:\n  - config: a.yaml\n    log: train.log\n")
    r = hp_plan_script("calibrate", str(tmp_path / "runs.yaml"), "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    run = json.loads(r.stdout)["runs"][0]
    assert run["log"]["format"] == "hyperparallel" and run["log"]["warmup_dropped"] == 3
    assert 2.34 <= run["measured_step_s"] <= 2.36


def test_numbers_are_read_in_every_form_the_stacks_print() -> None:
    """An exponent is read whole (`2.8432e3` ms was read as 2.8 ms, `5.76e3` tps as 5.76), and a NaN, an infinity,
    a negative value or one past any run is refused at its line (HP803) rather than skipped or read by its leading
    digit (`1e308` as 1)."""
    exp = [line.replace("(ms): 2843.2", "(ms): 2.8432e3").replace("(ms): 2847.2", "(ms): 2.8472E+03")
           .replace("(ms): 2851.2", "(ms): 2.8512e3") for line in MEGATRON]
    assert parse_log(exp).steady.value == pytest.approx(2.8472, abs=0.004)
    tt = [line.replace("tps: 5,7", "tps: 5.7").replace("  tflops", "e3  tflops") if "step: " in line and
          "step:  1 " not in line else line for line in TORCHTITAN]
    assert 5760 <= parse_log(tt).steady.value <= 5764
    for bad in ("nan", "-2843.2", "inf", "1e308"):
        lines = [*MEGATRON[:4], MEGATRON[4].replace("(ms): 2843.2", f"(ms): {bad}"), *MEGATRON[5:]]
        assert lines != MEGATRON
        with pytest.raises(LogError) as exc:
            parse_log(lines)
        assert exc.value.code == "HP803" and exc.value.line == 4, bad
    with pytest.raises(LogError) as exc:
        parse_log([*HYPERPARALLEL[:9], re.sub(r"step_time=[0-9.]+s", "step_time=nans", HYPERPARALLEL[9]),
                   *HYPERPARALLEL[10:]])
    assert exc.value.code == "HP803"


def test_a_redirected_tqdm_log_and_an_excel_csv_read_as_written(tmp_path: Path) -> None:
    """tqdm's refreshes separated by a bare carriage return (one newline at the end, as a redirected progress bar
    writes them) are lines of their own (30 steps, not 1); a CSV saved with a UTF-8 byte-order mark reads its header."""
    tqdm = tmp_path / "train.log"
    tqdm.write_bytes(("\r".join(HYPERPARALLEL) + "\n").encode())
    r = read_log(str(tqdm))
    assert r.format == "hyperparallel" and r.steady.warmup == 3 and 2.34 <= r.steady.value <= 2.36
    bom = tmp_path / "steps.csv"
    bom.write_bytes("\ufeffstep_time_s,peak_memory_gib\r\n".encode() + b"".join(
        f"{1.0 + (i % 2) * 0.01},70\r\n".encode() for i in range(12)))
    assert read_log(str(bom)).format == "csv"


def test_a_csv_cell_holding_a_line_break_is_one_row(tmp_path: Path) -> None:
    """A quoted cell holding a line break (a spreadsheet's note column) goes on over the next line: the row read as
    two, and the second half was "step time 'line two\"' is not a number". A quote left open for good is refused
    at the row it began, not read to the end of the file."""
    steps = [f"{1.0 + 0.01 * (i % 2)},ok" for i in range(12)]
    csv_file = tmp_path / "steps.csv"
    csv_file.write_bytes(("\n".join(["step_time_s,note", *steps[:6], '1.01,"line one\rline two"', *steps[6:]])
                          + "\n").encode())
    r = read_log(str(csv_file))
    assert r.format == "csv" and r.steady.used + r.steady.warmup + r.steady.outliers == 13
    quoted = ["step_time_s,note", *steps[:6], '1.01,"a ""quoted"" word', 'and more"', *steps[6:]]
    assert parse_log(quoted).steady.used + parse_log(quoted).steady.warmup == 13
    runaway = ["step_time_s,note", *steps[:6], '1.01,"never closed', *(["x" * 60_000] * 3)]
    with pytest.raises(LogError) as exc:
        parse_log(runaway)
    assert exc.value.code == "HP803" and exc.value.line == 7 and "quoted" in str(exc.value)


def test_a_csv_is_numbered_by_its_rows_and_its_mistakes_said_at_them() -> None:
    """A row spanning two lines (a quoted line break) is one row: row numbers are the spreadsheet's (the header row
    1), not line offsets. A quote never closed, two columns of one name, step_time_s and step_time_ms that
    disagree, and a CSV saved with semicolons are said as what they are (they read as "no rows", the first
    column or the seconds silently, and "no step lines in a known format")."""
    good = [f"{1.0 + 0.01 * (i % 2)},ok" for i in range(12)]
    broken = ["step_time_s,note", *good[:3], '1.0,"two\nlines"', *good[3:8], "abc,x", *good[8:]]
    lines = "\n".join(broken).split("\n")
    with pytest.raises(LogError) as exc:
        parse_log(lines)
    assert "CSV row 11: step time 'abc'" in str(exc.value) and exc.value.line == lines.index("abc,x")
    cases = {
        "never closed": ["step_time_s,note", *good[:5], '1.0,"open', *good[5:]],
        "2 'step_time_s' columns": ["step_time_s,step_time_s", *good],
        "disagree": ["step_time_s,step_time_ms", "1.0,1000", "1.0,5000", *[f"1.0,{1000 + i}" for i in range(9)]],
        "semicolons": ["step_time_s;note", *[g.replace(",", ";") for g in good]],
    }
    for said, rows in cases.items():
        with pytest.raises(LogError) as exc:
            parse_log(rows)
        assert said in str(exc.value), (said, str(exc.value))
    agree = ["step_time_s,step_time_ms", *[f"{1 + 0.001 * i},{1000 + i}" for i in range(12)]]
    assert parse_log(agree).steady.value == pytest.approx(1.0055, abs=0.001)


@pytest.mark.parametrize("line, value", [
    ("{pad},2.457", 2.457),  # a CSV step-time cell past 64 K characters: read as 2.0 when the line was cut there
    ("{pad} iteration 7/ 5000 | elapsed time per iteration (ms): 2457.0 |", 2.457),  # read as 24 ms
    ("{pad} step: 7  tps: 6667", 6667.0),  # read as 66 tokens/s
])
def test_a_line_past_64_k_characters_is_read_whole(tmp_path: Path, line: str, value: float) -> None:
    pad = "y" * (64 * 1024 - 3)  # the step figure straddles the old cut
    header = "note,step_time_s\n" if line.endswith(",2.457") else ""
    log = tmp_path / "train.log"
    log.write_text(header + "\n".join(line.format(pad=pad) for _ in range(12)) + "\n")
    r = read_log(str(log))
    assert r.steady.value == pytest.approx(value) and r.notes == ()


def test_a_line_past_the_limit_is_skipped_whole_and_said(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A line over MAX_LINE_BYTES is never read in part (a number cut at the limit is another number): it is
    skipped and said at its line (HP814), the CSV's rows keep their numbers, and a first line too long to read
    (a CSV header) is named when nothing else reads the log."""
    monkeypatch.setattr(logs, "MAX_LINE_BYTES", 100)
    log = tmp_path / "steps.csv"
    rows = [f"n,{1.0 + 0.01 * (i % 2)}" for i in range(12)]
    log.write_text("\n".join(["note,step_time_s", *rows[:4], "x" * 150 + ",9.0", *rows[4:], "x" * 300]) + "\n")
    r = read_log(str(log))
    assert r.steady.used + r.steady.warmup + r.steady.outliers == 12 and r.steady.value < 1.02  # 9.0 never read
    (note,) = r.notes
    assert note.code == "HP814" and note.line == 5 and "1 more such line from line 15" in note.message
    assert "a line of 154 bytes is over the 100 bytes" in note.message  # "x" * 150 + ",9.0"
    log.write_text("\n".join(["note" + "x" * 150 + ",step_time_s", *rows]) + "\n")
    with pytest.raises(LogError) as exc:
        read_log(str(log))
    assert exc.value.code == "HP802" and exc.value.line == 0 and "CSV header" in str(exc.value)


def test_the_format_with_the_most_step_lines_reads_the_log() -> None:
    """One stray line another format reads (a `Training args: … step_time=0.5s` banner) decided how a log of 12
    Megatron iterations was read: one 0.5 s step, the iterations and the peak ignored. The most step lines win
    (ties: the order of the formats), and the lines left out are said at the first (HP814)."""
    r = parse_log(["Training args: profile step_time=0.5s budget", *MEGATRON])
    assert r.format == "megatron" and r.steady.value == pytest.approx(2.8472, abs=0.004)
    assert r.peak_memory_gib == pytest.approx(84377.0 / 1024)
    (note,) = r.notes
    assert note.code == "HP814" and note.line == 0 and "HyperParallel" in note.message and "(12)" in note.message
    stray = parse_log([*HYPERPARALLEL, MEGATRON[0]])
    assert stray.format == "hyperparallel" and stray.notes[0].line == len(HYPERPARALLEL)
    assert parse_log(["Training: step_time=2.5s", TORCHTITAN[2]]).format == "hyperparallel"  # a tie: the order


def test_blank_lines_keep_the_line_numbers_and_the_count(tmp_path: Path) -> None:
    """Blank lines (bare `\\r`, `\\r\\n`, white space) never reach a format, yet every line keeps its number: an
    impossible value after them is said at its own line."""
    log = tmp_path / "train.log"
    body = "\r" * 5000 + "  \n\t\r\n" + "".join(f"step: {i}  tps: 6667\n" for i in range(1, 8))  # lines 0-5008
    log.write_bytes((body + "step: 8  tps: 0\n").encode())
    with pytest.raises(LogError) as exc:
        read_log(str(log))
    assert exc.value.code == "HP803" and exc.value.line == 5009
    log.write_bytes(body.encode() + b"\n\n")
    assert read_log(str(log)).lines == 5011


@pytest.mark.parametrize("block", [1, 2, 3, 7, 1 << 20])
def test_the_stream_splits_as_whole_lines_do_whatever_the_block(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 block: int) -> None:
    """The streamed lines are those bytes.splitlines gives the whole file (`\\r\\n` across a block boundary one
    break, a UTF-8 character across one decoded whole), numbered among all lines, blank ones left out, one over
    the limit a LongLine."""
    monkeypatch.setattr(logs, "MAX_LINE_BYTES", 12)
    monkeypatch.setattr(logs.LogLines, "BLOCK", block)
    data = "\ufeffa\r\n\r\nb\xe9 \r\r\n  \n\tc\n" + "d" * 20 + "\n" + " " * 20 + "\re\r"
    path = tmp_path / "t.log"
    path.write_bytes(data.encode())
    fd, _ = logs._open_log(str(path), logs.MAX_LOG_BYTES)
    stream = logs.stream_lines(fd, str(path))
    got = [(i, t) for i, t in stream]
    assert got == [(0, "a"), (2, "b\xe9 "), (5, "\tc"), (6, logs.LongLine(20)), (8, "e")]
    assert stream.count == len(data.encode().splitlines()) == 9


_WHOLE = ["step: 3  tps: 6000", "Training: step_time=2.5s]", " iteration 5/ 9 | elapsed time per iteration (ms): 2500.0",
          "[Rank 0] max reserved: 81920.0", "max reserved: 92160.0", "step: 4  memory: 90.5GiB  tps: 5000",
          "step_time_s", "1.5"]
_PIECES = [*_WHOLE, *_WHOLE, "x" * 80, " " * 80, "x", "junk", "ste", "p: 3  tps: 6000", "Train", "ing: step_time=2.5s]", "iter",
           "ation 5/ 9 | elapsed time per iteration (ms): 2500.0", "max rese", "rved: 1024.0", "  ", "\r", "é"]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(st.tuples(st.sampled_from(_PIECES), st.sampled_from(["\n", "\n", "\r\n", "\r", ""])), min_size=4,
                      max_size=60),
       block=st.sampled_from([1, 7, 64, 256]), longest=st.sampled_from([64, 1 << 20]))
def test_the_sieve_reads_what_every_line_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               lines: list[tuple[str, str]], block: int, longest: int) -> None:
    """Dropping the lines without any format's words (the Sieve, once no CSV header is read) changes no reading:
    any log, cut into blocks anywhere (a word split across two), with lines too long to read, reads to the same
    result, error or line as when every line reaches every format."""
    text = "".join(piece + end for piece, end in lines)
    path = tmp_path / "t.log"
    path.write_bytes(text.encode())

    def reading() -> object:
        logs._CACHE.clear()
        try:
            r = read_log(str(path))
        except LogError as exc:
            return (exc.code, str(exc), exc.line)
        return (r.format, r.steady, r.peak_memory_gib, r.lines, r.notes)

    with monkeypatch.context() as patch:  # the fixture outlives one example: undo each example's patches
        patch.setattr(logs.LogLines, "BLOCK", block)
        patch.setattr(logs, "MAX_LINE_BYTES", longest)  # 64: a line inside a block may be too long to read
        sieved = reading()
        patch.setattr(logs._Csv, "needs_every_line", property(lambda self: True))  # no sieve
        assert sieved == reading()


def test_junk_lines_are_dropped_unread_yet_counted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A log of junk lines is read by C code alone once the sieve is set: no format sees a line without its
    words, and the lines after the junk keep their numbers."""
    monkeypatch.setattr(logs.LogLines, "BLOCK", 4096)
    fed: list[int] = []
    feed = logs._Torchtitan.feed
    monkeypatch.setattr(logs._Torchtitan, "feed", lambda self, i, line: (fed.append(i), feed(self, i, line))[1])
    log = tmp_path / "train.log"
    body = "x\n" * 100_000 + "".join(f"step: {i}  tps: 6667\n" for i in range(1, 8))
    log.write_bytes((body + "step: 8  tps: 0\n").encode())
    with pytest.raises(LogError) as exc:
        read_log(str(log))
    assert exc.value.code == "HP803" and exc.value.line == 100_007
    assert len(fed) < 2_100  # the first block's lines before the sieve, then the step lines only


def test_a_line_too_long_to_read_is_said_though_it_holds_no_format_s_words(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The sieve drops a junk line unread, never a line too long to read: that one is said (HP814) at its line,
    also where a block holds it whole (a block longer than the longest line read)."""
    monkeypatch.setattr(logs.LogLines, "BLOCK", 4096)
    monkeypatch.setattr(logs, "MAX_LINE_BYTES", 100)
    log = tmp_path / "train.log"
    log.write_text("junk\n" * 1000 + "x" * 200 + "\n" + "".join(f"step: {i}  tps: 6000\n" for i in range(8)))
    assert [(n.code, n.line) for n in read_log(str(log)).notes] == [("HP814", 1000)]
