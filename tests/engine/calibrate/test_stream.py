"""The trace stream (engine.calibrate.stream): events decoded a window at a time, in time linear in the text (a
value read on by doubling, a decoding error refused where it is, blanks skipped by a search), one event bounded,
and a byte order mark or a gzip file named .json read as what it is. No timings here: the costs are counted in
decodes and characters read; benchmarks/hostile_numbers.py (group `trace`) times them."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path
from typing import Any

import pytest

from engine.calibrate import stream
from engine.calibrate.profiler_trace import read_trace
from engine.calibrate.stream import TraceError, open_trace, stream_trace


def _kernel(ts: float, name: str = "sm90_xmma_gemm_bf16", **extra: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": 1.0, **extra}


def _events(text: str) -> list[Any]:
    """Every event `stream_trace` hands on, in order."""
    got: list[Any] = []
    stream_trace(io.StringIO(text), got.extend)
    return got


class _Counting(io.StringIO):
    """A text stream that counts the characters read from it."""

    read_chars = 0

    def read(self, size: int | None = -1) -> str:
        text = super().read(size)
        self.read_chars += len(text)
        return text


def _step_trace(names: list[str]) -> str:
    """A trace of one host step holding a kernel of each name (1 µs each, 10 µs apart)."""
    events = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 0.0,
               "dur": 10.0 * len(names)}] + [_kernel(10.0 * i, n) for i, n in enumerate(names)]
    return json.dumps({"traceEvents": events})


@pytest.fixture
def decodes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The length of text each decode of the stream was handed, in order (its decoder swapped for a counting one)."""
    calls: list[int] = []

    class Counting(json.JSONDecoder):
        def raw_decode(self, s: str, idx: int = 0) -> tuple[Any, int]:
            calls.append(len(s) - idx)
            return super().raw_decode(s, idx)

    monkeypatch.setattr(stream, "_DECODER", Counting())
    return calls


@pytest.mark.parametrize("chunk", [7, 64, 1 << 20])
def test_events_are_handed_on_in_order_whatever_the_window(monkeypatch: pytest.MonkeyPatch, chunk: int) -> None:
    """Names holding `},` and args holding nested objects (a cut there does not fall between events: that window
    is decoded one by one), non-object values, blanks: the events come out as json.loads reads them."""
    events: list[Any] = [_kernel(float(i), name="x},{\"y" if i % 3 else "k", args={"a": {"b": i}, "c": [i]})
                         for i in range(300)]
    events[5:5] = [7, "s", [1, {"z": 2}], None]
    text = json.dumps({"otherData": {"k": [1, 2]}, "traceEvents": events}, indent=1)
    monkeypatch.setattr(stream, "CHUNK_CHARS", chunk)
    assert _events(text) == events


def test_a_window_of_events_with_nested_objects_is_decoded_by_one_call(decodes: list[int]) -> None:
    """Args holding objects put a `},` inside every event: the window is still cut between events (a `}` then
    `,` and `{`) and decoded in one call, not event by event."""
    events = [_kernel(float(i), args={"grid": {"x": i}, "block": {"x": 128}, "n": i}) for i in range(3000)]
    assert _events(json.dumps({"traceEvents": events})) == events
    assert len(decodes) <= 4  # the key, the window's events, the last event


def test_after_a_window_that_could_not_be_cut_the_next_ones_are_decoded_whole(
        monkeypatch: pytest.MonkeyPatch, decodes: list[int]) -> None:
    """Names holding `},{` in the first windows (a cut there falls inside a string): those windows are decoded
    one event at a time, and the 2,000 plain events after them a window at a time again."""
    monkeypatch.setattr(stream, "CHUNK_CHARS", 1 << 12)
    events = [_kernel(float(i), name='a},{"b' * 100) for i in range(10)] + [_kernel(float(i)) for i in range(2000)]
    assert _events(json.dumps({"traceEvents": events})) == events
    assert len(decodes) < 200  # ~60 windows, each tried once; one by one was over 2,000


def test_a_value_spanning_many_windows_is_decoded_a_few_times_not_once_a_window(
        monkeypatch: pytest.MonkeyPatch, decodes: list[int]) -> None:
    """A 1 MiB event read through 1 KiB windows: what is pending doubles before each retry, so ~11 decodes (the
    text decoded about twice over), where one per window was 1,024 (quadratic: a 64 MiB string took minutes)."""
    monkeypatch.setattr(stream, "CHUNK_CHARS", 1 << 10)
    big = _kernel(1.0, name="a" * (1 << 20))
    assert _events(json.dumps({"traceEvents": [big]})) == [big]
    assert len(decodes) <= 14 and sum(decodes) < 3 * (1 << 20)


def test_an_event_over_the_bound_is_refused_where_it_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    """One event of 2 MiB under a 1 MiB bound (16 MiB in use; a profiler's largest are hundreds of KB): HP820 at
    the event's first character, after reading about twice the bound, not the rest of the file."""
    monkeypatch.setattr(stream, "MAX_EVENT_CHARS", 1 << 20)
    head = '{"traceEvents": [{"ph": "X", "cat": "kernel", "ts": 1, "dur": 1, "pid": 0, "tid": 1}, '
    fh = _Counting(head + json.dumps(_kernel(2.0, name="a" * (2 << 20))) + "]}" + " " * (8 << 20))
    with pytest.raises(TraceError, match="an event over 1 MiB at character") as err:
        stream_trace(fh, lambda events: None)
    assert err.value.code == "HP820" and err.value.offset == len(head)
    assert fh.read_chars < 4 << 20


def test_an_event_whole_in_the_window_is_bounded_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """The window reads ahead: an event over the bound that arrives whole in it is refused all the same."""
    monkeypatch.setattr(stream, "MAX_EVENT_CHARS", 1 << 10)
    with pytest.raises(TraceError, match="an event over"):
        _events(json.dumps({"traceEvents": [_kernel(1.0, name="a" * 2000)]}))


def test_bad_json_is_refused_where_it_is_without_reading_on() -> None:
    """A decoding error inside the window is no value cut by its end: refused at its character at once (it was
    read on, decoded again at every chunk, to the end of the file: quadratic)."""
    head = '{"traceEvents": [{"ph": "X", "ts": 1,, "dur": 1}, '
    fh = _Counting(head + ", ".join([json.dumps(_kernel(1.0))] * 100_000) + "]}")
    with pytest.raises(TraceError, match="not a Chrome trace: Expecting property name") as err:
        stream_trace(fh, lambda events: None)
    assert err.value.offset == head.index(",,") + 1
    assert fh.read_chars <= 2 << 20  # the first window


@pytest.mark.parametrize("cut", ["1.5e", "tru", "-Infin", '"abc\\u00', '"x'])
def test_a_value_cut_by_the_end_of_the_text_is_said_cut_short(cut: str) -> None:
    with pytest.raises(TraceError, match="ends inside a value"):
        _events('{"traceEvents": [{"ph": "X", "ts": ' + cut)


def test_an_integer_of_more_digits_than_python_converts_is_refused_not_an_internal_error() -> None:
    with pytest.raises(TraceError, match="not a Chrome trace: Exceeds the limit"):
        _events('{"traceEvents": [{"ph": "X", "ts": ' + "9" * 5000 + "}]}")


def test_megabytes_of_blanks_between_events_are_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    """Blanks (all four of JSON's) between and inside the events, across many windows: skipped by a search (a
    Python step per blank took 17 s on 128 MiB)."""
    monkeypatch.setattr(stream, "CHUNK_CHARS", 1 << 12)
    blanks = " \t\r\n" * (1 << 18)
    text = '{"traceEvents":' + blanks + "[" + blanks + json.dumps(_kernel(1.0)) + blanks + "," + blanks + \
        json.dumps(_kernel(2.0)) + blanks + "]" + blanks + "}" + blanks
    assert [e["ts"] for e in _events(text)] == [1.0, 2.0]


@pytest.mark.parametrize("gz", [False, True])
def test_a_byte_order_mark_before_the_trace_is_skipped(tmp_path: Path, gz: bool) -> None:
    """As logs read one (it was "expected one of '{['... found '\\ufeff'")."""
    text = _step_trace(["sm90_xmma_gemm_bf16", "elementwise_kernel"])
    plain, marked = tmp_path / "plain.json", tmp_path / ("marked.json.gz" if gz else "marked.json")
    plain.write_text(text)
    data = "\ufeff".encode() + text.encode()
    marked.write_bytes(gzip.compress(data) if gz else data)
    assert read_trace(str(marked)).parts_s == read_trace(str(plain)).parts_s


def test_a_gzip_trace_named_json_is_read_as_gzip(tmp_path: Path) -> None:
    """A compressed trace saved as .json (it was "not a Chrome trace ... found '\\x1f'"): read by its magic
    bytes, and its trailer bounds it as a .json.gz's does."""
    text = _step_trace(["sm90_xmma_gemm_bf16", "ncclDevKernel_AllReduce_Sum_bf16_RING_LL"])
    (tmp_path / "t.json.gz").write_bytes(gzip.compress(text.encode()))
    (tmp_path / "t.json").write_bytes(gzip.compress(text.encode()))
    assert read_trace(str(tmp_path / "t.json")).parts_s == read_trace(str(tmp_path / "t.json.gz")).parts_s
    with pytest.raises(TraceError, match="over the 0 MiB limit"):
        open_trace(str(tmp_path / "t.json"), max_bytes=len(text) - 1)
