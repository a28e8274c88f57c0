"""The accelerator catalog, from ../shared/reference/HARDWARE.md §1 (figures) and §3.1 (achieved matmul).

Conventions (FORMATS.md): bandwidths are GB/s (1e9 B/s) per device, one direction; memory is the vendor's
label used as the GiB budget (HyperParallel and FORMATS write `device_memory_gb: 80` for an 80 GB card, and
users budget below it with `memory_limit_gb`). "Intra-node" is the scale-up domain (NVLink/HCCS/UB),
"inter-node" the per-device scale-out NIC rate.
"""

from __future__ import annotations

from engine.specs import DeviceSpec

# name, peak dense BF16/FP16 TFLOP/s, memory, HBM TB/s, intra GB/s, inter GB/s, cards/node, aliases, note
DEVICES: tuple[DeviceSpec, ...] = (
    DeviceSpec("V100", 125.0, 32.0, 0.9, 150.0, 6.25, 8, ("v100-32g", "v100-sxm2"),
               "FP16 tensor peak (no BF16); NVLink2 6x25; IB EDR ~4 NICs per 8 GPUs [U]"),
    DeviceSpec("A100-40G", 312.0, 40.0, 1.555, 300.0, 25.0, 8, ("a100-40gb", "a100_40g"),
               "NVLink3 300; HDR 200 Gb/s per GPU"),
    DeviceSpec("A100", 312.0, 80.0, 2.039, 300.0, 25.0, 8, ("a100-80g", "a100-80gb", "a100-sxm"),
               "DGX A100 / Selene: NVLink3 300, 8 x HDR 200 Gb/s per node"),
    DeviceSpec("H100", 989.0, 80.0, 3.35, 450.0, 50.0, 8, ("h100-sxm", "h100-80g", "h100-sxm5"),
               "NVLink4 450; DGX H100 8 x NDR 400 Gb/s"),
    DeviceSpec("H800", 989.0, 80.0, 3.35, 160.0, 50.0, 8, ("h800-sxm",),
               "NVLink 160 usable per DeepSeek-V3 report section 3.2.2; IB 50; compute as H100 [U]"),
    DeviceSpec("H200", 989.0, 141.0, 4.8, 450.0, 50.0, 8, ("h200-sxm",), "NVLink4 450; NDR 400 Gb/s"),
    DeviceSpec("B200", 2250.0, 180.0, 8.0, 900.0, 50.0, 8, ("b200-sxm",), "NVLink5 900; 8 x 400 Gb/s"),
    DeviceSpec("B300", 2250.0, 288.0, 8.0, 900.0, 100.0, 8, ("b300-sxm",), "NVLink5 900; 8 x 800 Gb/s"),
    DeviceSpec("GB200", 2500.0, 186.0, 8.0, 900.0, 50.0, 72, ("gb200-nvl72",),
               "per GPU; the NVL72 rack is one 72-GPU NVLink domain; scale-out 400 Gb/s [U]"),
    DeviceSpec("MI300X", 1307.0, 192.0, 5.3, 64.0, 50.0, 8, ("mi300",),
               "Infinity Fabric full mesh: 64 GB/s to any one peer (448 aggregate); 400 Gb/s NIC [U]"),
    DeviceSpec("A2", 313.0, 64.0, 1.6, 50.0, 10.0, 8, ("ascend", "ascend910", "ascend910b", "910b"),
               "Ascend 910B; peak ~313 TF [U]; bandwidth levels 50 / 10 GB/s as HyperParallel models them"),
    DeviceSpec("A3", 376.0, 64.0, 1.6, 200.0, 25.0, 16, ("ascend910c", "ascend910_93", "910c"),
               "Ascend 910C die; 16 dies per node; HyperParallel levels 200 / 25 GB/s; peak per die [U]"),
)

# Best-shape single-device BF16 matmul efficiency (MAMF / peak), HARDWARE.md §3.1 [C]. Entries marked
# assumed have no measurement there: H800 shares the H100 die; V100 and Ascend figures are assumptions.
MATMUL_EFFICIENCY: dict[str, float] = {
    "A100": 0.869, "A100-40G": 0.869, "H100": 0.803, "H800": 0.803, "H200": 0.803, "B200": 0.776,
    "B300": 0.786, "GB200": 0.729, "MI300X": 0.514,
    "V100": 0.75,  # assumed
    "A2": 0.60, "A3": 0.60,  # assumed: HyperParallel quotes sustained ~half of peak for offload pricing
}

_BY_NAME: dict[str, DeviceSpec] = {}
for _d in DEVICES:
    for _n in (_d.name, *_d.aliases):
        _BY_NAME[_n.lower()] = _d


def find_device(name: str | int) -> DeviceSpec | None:
    """Case- and space-insensitive lookup by name or alias; HyperParallel's ints 2 -> A2 and 3 -> A3."""
    if isinstance(name, bool):
        return None
    if isinstance(name, int):
        name = {2: "A2", 3: "A3"}.get(name, str(name))
    return _BY_NAME.get(str(name).strip().lower().replace(" ", "").replace("_sxm", "-sxm"))


def device_names() -> list[str]:
    return [d.name for d in DEVICES]


def matmul_efficiency(name: str) -> float:
    return MATMUL_EFFICIENCY.get(name, 0.7)
