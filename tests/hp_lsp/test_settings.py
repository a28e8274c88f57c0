"""Settings: every source and shape, merged key by key, invalid values reported and replaced by defaults."""

from __future__ import annotations

from engine.config.types import ClusterOverrides
from hp_lsp.settings import Settings, SettingsSources, parse, section_of


def test_section_shapes() -> None:
    nested = {"hpLsp": {"cluster": {"numNodes": 8, "cardsPerNode": 8}, "searchOnSave": False}}
    assert section_of(nested) == {"cluster.numNodes": 8, "cluster.cardsPerNode": 8, "searchOnSave": False}
    assert section_of({"cluster.deviceType": "H100"}) == {"cluster.deviceType": "H100"}
    assert section_of(None) == {} and section_of([1]) == {} and section_of({"hpLsp": 3}) == {}


def test_parse_types_and_defaults() -> None:
    p = parse({"cluster.numNodes": 4, "cluster.cardsPerNode": 8.0, "cluster.deviceType": " H100 ",
               "memoryLimitGb": 70, "maxFileSizeKb": 64})
    assert p.errors == ()
    assert p.settings == Settings(num_nodes=4, cards_per_node=8, device_type="H100", memory_limit_gb=70.0,
                                  max_file_size_kb=64)
    assert Settings().search_on_save is True and Settings().max_file_size_kb == 1024


def test_invalid_values_fall_back_and_are_reported() -> None:
    p = parse({"cluster.numNodes": -1, "searchOnSave": "yes", "maxFileSizeKb": True, "trace.server": "loud"})
    assert p.settings == Settings()
    assert len(p.errors) == 4 and all("ignored" in e for e in p.errors)


def test_a_group_that_is_not_an_object_is_reported() -> None:
    """`"cluster": "x"` had been ignored without a word; a null group still resets it."""
    for bad in ("x", 8, [1, 2]):
        p = parse(section_of({"hpLsp": {"cluster": bad}}))
        assert p.settings == Settings() and len(p.errors) == 1 and "hpLsp.cluster" in p.errors[0], p.errors
        assert "numNodes" in p.errors[0]
    assert parse(section_of({"hpLsp": {"cluster": None}})).errors == ()


def test_later_sources_win_key_by_key() -> None:
    s = SettingsSources(initialization={"cluster.numNodes": 2, "cluster.cardsPerNode": 8},
                        configuration={"cluster.numNodes": 4},
                        did_change={"searchOnSave": False})
    merged = s.merged().settings
    assert (merged.num_nodes, merged.cards_per_node, merged.search_on_save) == (4, 8, False)


def test_overrides() -> None:
    assert Settings().overrides() is None
    o = Settings(num_nodes=2, cards_per_node=8, device_type="H100", device_memory_gb=80, memory_limit_gb=70).overrides()
    assert o == ClusterOverrides(devices=16, num_nodes=2, cards_per_node=8, device_type="H100", memory_gb=80,
                                 memory_source="setting hpLsp.cluster.deviceMemoryGb", memory_limit_gb=70,
                                 memory_limit_source="setting hpLsp.memoryLimitGb")


def test_memory_sizes_are_finite_and_positive() -> None:
    """JSON's 1e400 reads as infinity and a 400-digit integer overflows a float: both are refused, named in
    the message, and the default stays (a budget of Infinity made showPlan write JSON no editor parses)."""
    p = parse({"memoryLimitGb": float("inf"), "cluster.deviceMemoryGb": 10**400})
    assert p.settings == Settings()
    limit, device = sorted(p.errors, key=lambda e: "memoryLimitGb" not in e)
    assert "memoryLimitGb" in limit and "not a finite number" in limit and "default" in limit
    assert "deviceMemoryGb" in device and len(device) < 160  # the 400 digits are not echoed whole


def test_explicit_null_in_a_later_source_resets_to_the_default() -> None:
    init = {"cluster.numNodes": 2, "cluster.cardsPerNode": 8, "memoryLimitGb": 40, "searchOnSave": False}
    s = SettingsSources(initialization=init)
    assert s.merged().settings.memory_limit_gb == 40.0
    s.did_change = {"memoryLimitGb": None, "searchOnSave": None}
    merged = s.merged().settings
    assert merged.memory_limit_gb is None and merged.search_on_save is True and merged.num_nodes == 2
    # A null group resets every key under it; workspace/configuration's nulls count the same way.
    s.did_change = {}
    s.configuration = section_of({"cluster": None})
    merged = s.merged().settings
    assert (merged.num_nodes, merged.cards_per_node, merged.memory_limit_gb) == (None, None, 40.0)
    assert merged.overrides() == ClusterOverrides(memory_limit_gb=40.0,
                                                  memory_limit_source="setting hpLsp.memoryLimitGb")
    # A key a later source leaves out keeps the earlier value (only null resets).
    s.configuration = {"cluster.numNodes": 4}
    assert s.merged().settings.cards_per_node == 8 and s.merged().errors == ()
