from engine.catalog.devices import device_names, find_device, matmul_efficiency


def test_aliases_resolve_case_insensitively():
    assert find_device("h100").name == "H100"
    assert find_device(" Ascend910B ").name == "A2"
    assert find_device("ascend910_93").name == "A3"
    assert find_device(3).name == "A3"
    assert find_device("TPUv5") is None
    assert find_device(True) is None


def test_every_device_has_an_efficiency_and_sane_figures():
    for name in device_names():
        d = find_device(name)
        assert d is not None and d.peak_tflops > 50 and d.memory_gib >= 16
        assert d.intra_node_gb_s > d.inter_node_gb_s > 0 or d.name == "MI300X"
        assert 0.4 < matmul_efficiency(name) < 0.95
