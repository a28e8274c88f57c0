"""Session: generations drop stale checks, search generations drop superseded searches, stale results stay."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from hp_lsp.session import Session


def _analysis() -> Any:
    """What record_analysis reads of a check's analysis: no config, no cluster source, no files read."""
    return SimpleNamespace(config=None, cluster_source=None, files=())


class FakeAnalysis:
    def __init__(self, config: Any, files: tuple[str, ...] = (), cluster_source: str | None = None) -> None:
        self.config = config
        self.files = files
        self.cluster_source = cluster_source


def test_stale_check_is_dropped() -> None:
    s = Session()
    st = s.open("file:///a.yaml", "/a.yaml", 1)
    gen = st.generation
    s.change("file:///a.yaml", 2)
    assert not s.record_analysis("file:///a.yaml", gen, FakeAnalysis(object()))  # type: ignore[arg-type]
    assert s.record_analysis("file:///a.yaml", st.generation, FakeAnalysis(object()))  # type: ignore[arg-type]


def test_half_typed_yaml_keeps_last_good() -> None:
    s = Session()
    st = s.open("u", "/a.yaml", 1)
    good = FakeAnalysis(object())
    s.record_analysis("u", st.generation, good)  # type: ignore[arg-type]
    s.change("u", 2)
    broken = FakeAnalysis(None)
    s.record_analysis("u", st.generation, broken)  # type: ignore[arg-type]
    assert st.analysis is broken and st.good is good


def test_superseded_search_is_dropped_and_edits_mark_stale() -> None:
    s = Session()
    st = s.open("u", "/a.yaml", 1)
    g1 = s.begin_search("u")
    g2 = s.begin_search("u")
    assert g1 is not None and g2 is not None
    assert not s.record_search("u", g1, 1, "old")  # type: ignore[arg-type]
    assert st.searching
    assert s.record_search("u", g2, 1, "new")  # type: ignore[arg-type]
    assert st.search == "new" and not st.searching and not st.search_stale
    s.change("u", 2)
    assert st.search_stale and st.search == "new"
    g3 = s.begin_search("u")
    assert g3 is not None
    assert s.record_search("u", g3, 2, None)  # failed search: the previous result stays
    assert st.search == "new"


def test_dependencies_follow_the_last_analysis() -> None:
    s = Session()
    a = s.open("file:///s.yaml", "/w/search.yaml", 1)
    s.open("file:///t.yaml", "/w/train.yaml", 1)
    s.record_analysis("file:///s.yaml", a.generation,
                      FakeAnalysis(object(), ("/w/search.yaml", "/w/train.yaml")))  # type: ignore[arg-type]
    assert s.dependents("/w/train.yaml") == ["file:///s.yaml"]
    assert s.dependents("/w/search.yaml", exclude="file:///s.yaml") == []
    s.close("file:///s.yaml")
    assert s.dependents("/w/train.yaml") == []


def test_settings_layers() -> None:
    s = Session()
    changed, errors = s.update_settings(initialization={"cluster.numNodes": 2})
    assert changed and errors == () and s.settings.num_nodes == 2
    changed, _ = s.update_settings(did_change={"cluster.numNodes": 2})
    assert not changed
    changed, errors = s.update_settings(did_change={"cluster.numNodes": "x"})
    assert not changed and errors and s.settings.num_nodes == 2  # invalid in a later layer: the earlier one holds


def test_a_search_waits_for_the_last_check_in_flight() -> None:
    """Settings that arrive after a document opened check it again while its first check runs; the search asked
    for meanwhile must start when the second lands (on the settings' analysis), not when the first does."""
    s = Session()
    st = s.open("u", "/a.yaml", 1)
    s.begin_check("u")  # opened: checked on the defaults
    s.defer_search("u")
    s.begin_check("u")  # the settings arrived: checked again
    gen = st.generation
    assert s.record_analysis("u", gen, _analysis())
    assert not s.end_check("u", gen)  # the first lands: the search still waits
    assert st.checks_in_flight == 1 and st.search_pending
    assert s.record_analysis("u", gen, _analysis())
    assert s.end_check("u", gen)  # the second lands: now the search runs
    assert st.checks_in_flight == 0 and not st.search_pending
    # a check of an older text landing counts down too, but releases nothing
    s.begin_check("u")
    old = st.generation
    s.change("u", 2)
    s.defer_search("u")
    s.begin_check("u")
    assert not s.record_analysis("u", old, _analysis())
    assert not s.end_check("u", old) and st.checks_in_flight == 1
    assert s.record_analysis("u", st.generation, _analysis())
    assert s.end_check("u", st.generation)


def test_a_search_waits_for_the_current_text_whatever_order_the_checks_land_in() -> None:
    """A RUNS file's check and a config's run on different threads, so an older text's check can land after the
    current one's: the search starts when the last lands, on the current text's analysis, and not before that
    analysis is recorded."""
    s = Session()
    st = s.open("u", "/a.yaml", 1)
    s.begin_check("u")  # version 1 (says `runs`: the calibration thread)
    v1 = st.generation
    s.change("u", 2)
    s.begin_check("u")  # version 2 (no `runs`: the check thread)
    v2 = st.generation
    s.defer_search("u")
    current = _analysis()
    assert s.record_analysis("u", v2, current)
    assert not s.end_check("u", v2)  # the current text's lands first: the older one still runs
    assert not s.record_analysis("u", v1, _analysis())
    assert s.end_check("u", v1)  # the older one lands last: the search runs, on the current analysis
    assert st.analysis is current
    s.change("u", 3)  # typed again: its check not begun yet (debounced)
    s.begin_check("u")
    s.defer_search("u")
    assert not s.record_analysis("u", v2, _analysis())
    assert not s.end_check("u", v2) and st.search_pending  # waits for version 3's own check


def test_a_check_or_search_from_before_a_close_never_counts_for_the_reopened_document() -> None:
    """Closing and reopening a document starts a new state; its generations keep rising (one session-wide count),
    so the old text's check is not recorded over the new one's nor counts down the new one's checks, and the old
    search's result is not kept."""
    s = Session()
    st = s.open("u", "/a.yaml", 1)
    s.begin_check("u")
    old = st.generation
    search = s.begin_search("u")
    s.close("u")
    new = s.open("u", "/a.yaml", 1)
    assert s.begin_search("u") != search  # the reopened document's own search
    s.begin_check("u")
    s.defer_search("u")
    assert new.generation != old
    assert not s.record_analysis("u", old, _analysis())
    assert not s.end_check("u", old) and new.checks_in_flight == 1 and new.search_pending
    assert search is not None and not s.record_search("u", search, 1, None) and new.searching
    assert s.record_analysis("u", new.generation, _analysis())
    assert s.end_check("u", new.generation)


def test_a_check_that_raised_drops_the_search_that_waited_for_it() -> None:
    """A save's check that raises records no analysis of that text, so the search it held back cannot run on it;
    it is dropped once every check of that text has landed, not left waiting to start on a later edit's check.
    Another check of the same text that records it keeps the search, whichever lands first; an older text's
    failure drops nothing: the current text's check still comes."""
    s = Session()
    st = s.open("u", "/a.yaml", 1)
    s.begin_check("u")
    s.defer_search("u")
    assert not s.end_check("u", st.generation)  # it raised: nothing recorded
    assert not st.search_pending and st.checks_in_flight == 0
    s.change("u", 2)
    s.begin_check("u")  # an edit's check lands cleanly: no search starts
    assert s.record_analysis("u", st.generation, _analysis())
    assert not s.end_check("u", st.generation)
    for failing_first in (True, False):  # two checks of one text (opened, then the settings arrived)
        s.change("u", 3 if failing_first else 4)
        s.begin_check("u")
        s.begin_check("u")
        s.defer_search("u")
        if failing_first:
            assert not s.end_check("u", st.generation) and st.search_pending
            assert s.record_analysis("u", st.generation, _analysis())
            assert s.end_check("u", st.generation)
        else:
            assert s.record_analysis("u", st.generation, _analysis())
            assert not s.end_check("u", st.generation)
            assert s.end_check("u", st.generation)  # the second raised: the first's analysis still searches
    s.begin_check("u")
    old = st.generation
    s.change("u", 5)
    s.begin_check("u")
    s.defer_search("u")
    assert not s.end_check("u", old) and st.search_pending
    assert s.record_analysis("u", st.generation, _analysis())
    assert s.end_check("u", st.generation)
