"""The accelerator catalog, from [HW] §1 (figures), §3.1 (achieved matmul) and §4
(the second pass that corrects the Ascend rows and adds the H100 variants published runs use).

Conventions (docs/formats.md): bandwidths are GB/s (1e9 B/s) per device, one direction; memory is the vendor's
label used as the GiB budget (HyperParallel and docs/formats.md write `device_memory_gb: 80` for an 80 GB card, and
users budget below it with `memory_limit_gb`). "Intra-node" is the scale-up domain (NVLink/HCCS/UB),
"inter-node" the per-device scale-out NIC rate. Every row names its sources (`source`) and the fields that
are [U] unconfirmed (`unconfirmed`), which the hover on `device_type` shows.

Source keys: MLE-ACC / MLE-NET (stas00/ml-engineering accelerator and network READMEs), NAR21, DSV3, HP-HW
(HyperParallel's hardware.py), MS-FLOPS (MindSpeed-LLM `get_device_flops`: 354 TF for any 910B), MS-CHIP
(Huawei MindStudio `platform_config.h` core counts and SoC map), ASC-BENCH (public Ascend NPU benchmark
READMEs: 910B2C matmul 322.5 TF; 8-card HCCS all-gather 149 GB/s and all-reduce 72 GB/s, both the buffer size
over the time, i.e. algorithm bandwidth: bus bandwidth 130 / 126 GB/s), TT (torchtitan benchmark notes).

Host link (`host_link_gb_s`, offload only, [HP] §8.6): the device's link to host memory, GB/s one direction.
PCIe x16 per direction: Gen4 31.5, Gen5 63 GB/s (the PCIe base specifications' 16 / 32 GT/s × 16
lanes × 128/130) [U: no measured copy rate here, the link's nominal rate]; Calculon's A100-80GB system file states
host memory at 32 GB/s ([HW] §3 table, [C]). HyperParallel's own figures (HP-HW) are GiB/s: A2 16.0 (placeholder),
A3 6.92 (measured, the slowest die of a 2-node job), V100 12.0 ([HW] §2, [C]); here × 2^30 / 1e9. GB200's Grace
link is NVLink-C2C, 900 GB/s both directions, 450 one way [U].
"""

from __future__ import annotations

from engine.specs import DeviceSpec

_ASCEND_SRC = ("[HW] §4: MS-FLOPS 354 TF; MS-CHIP cores and SoC map; ASC-BENCH matmul 0.91 of peak, "
               "HCCS all-gather 149 GB/s algbw = 130 GB/s busbw of ~196 (0.665), element-wise torch.exp 642 GB/s vs an A800's 884; "
               "RoCE 200GE per NPU")
_A2_U = ("intra_node_gb_s", "inter_node_gb_s")
# The 1.6 TB/s HBM figure is [U]; the streaming rate priced is derived from a measurement instead [D]: the same
# element-wise benchmark ran a 910B at 642 GB/s and an A800 (the A100's 2.039 TB/s HBM) at 884 GB/s, so a 910B
# streams like a 2.039 × 642 / 884 = 1.48 TB/s part under the cost model's HBM_EFFICIENCY.
_A2_HBM_TB_S = 2.039 * 642.0 / 884.0
# HCCS collective efficiency (DeviceSpec.coll_eff_intra: measured bus bandwidth / intra_node_gb_s) [C of the
# measurement, D of the conversion]. ASC-BENCH's bench_collective.py divides the all-gather's OUTPUT size (and the
# all-reduce's buffer size) by the time: that is algorithm bandwidth, not bus bandwidth. On n = 8 cards the bus
# bandwidth is 149 × (n-1)/n = 130.4 GB/s for the all-gather (72 × 2(n-1)/n = 126 GB/s for the all-reduce):
# 130.4 / 196 = 0.665 of the mesh. The same conversion checks the full-mesh share: 2 cards 38 × 1/2 = 19.0 GB/s
# busbw (AR 18 × 1 = 18) against one link's 196/7 × 0.665 = 18.6; 4 cards 64 × 3/4 = 48 (AR 45) against 55.9.
HCCS_COLL_EFF = 149.0 * 7.0 / 8.0 / 196.0
_GIB_GB = 2.0 ** 30 / 1e9  # HyperParallel's host links are GiB/s; the catalog's bandwidths GB/s
_PCIE4, _PCIE5 = 31.5, 63.0  # x16, one direction, nominal [U] (module docstring)


def _ascend(name: str, tflops: float, aliases: tuple[str, ...], notes: str) -> DeviceSpec:
    """An Atlas 800T A2 910B variant: 8 NPUs per node over a full HCCS mesh, 200GE RoCE each; host link
    HyperParallel's A2 figure, 16.0 GiB/s, which it calls a placeholder (HP-HW) [U]."""
    return DeviceSpec(name, tflops, 64.0, _A2_HBM_TB_S, 196.0, 25.0, 8, aliases, notes, source=_ASCEND_SRC,
                      unconfirmed=(*_A2_U, "host_link_gb_s"), matmul_efficiency=0.91, full_mesh=True,
                      coll_eff_intra=HCCS_COLL_EFF, generation="ascend", host_link_gb_s=16.0 * _GIB_GB)


# The 500 W H100 96 GB (HBM2e) part runs the 700 W SXM5 die under a lower power cap: its GEMMs sustain less
# than the SXM5's measured best-shape rate (MLE-ACC 794.5 TF), by how much no measurement here says [U].
# torchtitan states only that its real peak lies between the H100 NVL's 835 TF and the SXM's 989 TF; their
# midpoint, 0.92 of 989 [D], is what the row priced before any run on the part was fitted, and what
# benchmarks/accuracy.py prices torchtitan with when its own runs are left out.
H100_96G_CLOCK_MIDPOINT = (835.0 + 989.0) / 2 / 989.0
# FITTED (the two torchtitan runs of [CAL] §10 on this part, llama31-8b-8xh100-96g-torchtitan-compile and
# llama31-70b-256xh100-96g-torchtitan-fsdp32tp8; benchmarks/accuracy.py --fit, grid 0.60-1.00 in 0.01, smallest
# worst |e|): the share of the SXM5's tensor-core rate the part sustains, its GEMMs' and its attention kernel's
# alike (the power cap slows both; DeviceSpec.clock_fraction; 0.75 while it scaled the GEMMs only, which left
# the attention of a long-context run at full clock, docs/cost-model.md §8.1).
# A framework's GEMMs are priced as one
# fraction of the device's measured matmul rate on every device (engine.cost.constants.GEMM_FRACTION_OF_MAMF),
# so what torchtitan's runs on this part lose beyond that fraction is the part's: the same fraction prices
# torchtitan's Llama 3 8B on 64 A100 (a part whose matmul rate MLE-ACC measured, no power-cap question) at
# -1.9 % with nothing fitted on it. docs/cost-model.md §8.1 gives the fit and its leave-one-out.
H100_96G_SUSTAINED_SHARE = 0.79

# name, peak dense BF16/FP16 TFLOP/s, memory, HBM TB/s, intra GB/s, inter GB/s, cards/node, aliases, note
DEVICES: tuple[DeviceSpec, ...] = (
    DeviceSpec("V100", 125.0, 32.0, 0.9, 150.0, 6.25, 8, ("v100-32g", "v100-sxm2"),
               "FP16 tensor peak (no BF16); NVLink2 6x25; IB EDR ~4 NICs per 8 GPUs [U]",
               source="[HW] §1: datasheet [V]; NVLink MLE-NET", unconfirmed=("inter_node_gb_s",
                                                                                   "matmul_efficiency"),
               matmul_efficiency=0.75, generation="volta",
               host_link_gb_s=12.0 * _GIB_GB),
    DeviceSpec("A100-40G", 312.0, 40.0, 1.555, 300.0, 25.0, 8, ("a100-40gb", "a100_40g"),
               "NVLink3 300; HDR 200 Gb/s per GPU", source="[HW] §1, §3.1: MLE-ACC, MLE-NET",
               matmul_efficiency=0.869, generation="ampere", unconfirmed=("host_link_gb_s",),
               host_link_gb_s=_PCIE4),
    DeviceSpec("A100", 312.0, 80.0, 2.039, 300.0, 25.0, 8, ("a100-80g", "a100-80gb", "a100-sxm"),
               "DGX A100 / Selene: NVLink3 300, 8 x HDR 200 Gb/s per node",
               source="[HW] §1, §3.1: MLE-ACC, MLE-NET, NAR21", matmul_efficiency=0.869,
               generation="ampere",
               host_link_gb_s=32.0),
    DeviceSpec("H100", 989.0, 80.0, 3.35, 450.0, 50.0, 8, ("h100-sxm", "h100-80g", "h100-sxm5"),
               "SXM5 80 GB, 700 W; NVLink4 450; DGX H100 8 x NDR 400 Gb/s",
               source="[HW] §1, §3.1: MLE-ACC, MLE-NET", matmul_efficiency=0.803, fp8_tflops=1979.0,
               fp8_matmul_efficiency=0.709, generation="hopper", unconfirmed=("host_link_gb_s",),
               host_link_gb_s=_PCIE5),
    DeviceSpec("H100-96G", 989.0, 96.0, 2.4, 450.0, 50.0, 8, ("h100-96gb", "h100-hbm2e", "grand-teton-h100"),
               "H100 96 GB HBM2e, 500 W (Meta Grand Teton, torchtitan's benchmark machines): 989 TF at full "
               "clocks, sustained lower under the 500 W cap (torchtitan: the real peak lies between the NVL and "
               f"SXM parts); its GEMMs and attention priced at {H100_96G_SUSTAINED_SHARE:g} of the 700 W part's "
               "rates, fitted on the two torchtitan runs on it; MFU stays against 989",
               source="[HW] §4: TT; HBM figures [U]; matmul rate the H100 SXM5's (same die), §3.1 MLE-ACC; "
                      "sustained share FITTED ([CAL] §10)",
               unconfirmed=("host_link_gb_s", "memory_gib", "hbm_tb_s", "clock_fraction"),
               matmul_efficiency=0.803, fp8_tflops=1979.0, fp8_matmul_efficiency=0.709,
               clock_fraction=H100_96G_SUSTAINED_SHARE, generation="hopper",
               host_link_gb_s=_PCIE5),
    DeviceSpec("H100-NVL", 835.0, 94.0, 3.9, 300.0, 50.0, 8, ("h100nvl", "h100-nvl-94g"),
               "PCIe card, 350-400 W, 94 GB HBM3; NVLink bridges pair the cards (scale-up between pairs only, "
               "the rest over PCIe/NIC) [U]",
               source="[HW] §4: datasheet [V]", unconfirmed=("host_link_gb_s", "intra_node_gb_s", "inter_node_gb_s",
                                                                    "matmul_efficiency"),
               matmul_efficiency=0.803, fp8_tflops=1670.0, fp8_matmul_efficiency=0.709, generation="hopper",
               host_link_gb_s=_PCIE5),
    DeviceSpec("H20", 148.0, 96.0, 4.0, 450.0, 50.0, 8, ("h20-sxm",),
               "export part: 148 TF BF16, 96 GB at 4.0 TB/s, NVLink 900 GB/s bidirectional",
               source="[HW] §4: datasheet [V]", unconfirmed=("host_link_gb_s", "inter_node_gb_s", "matmul_efficiency",
                                                                    "fp8_tflops"),
               matmul_efficiency=0.803, fp8_tflops=296.0, fp8_matmul_efficiency=0.709, generation="hopper",
               host_link_gb_s=_PCIE5),
    DeviceSpec("H800", 989.0, 80.0, 3.35, 160.0, 50.0, 8, ("h800-sxm",),
               "NVLink 160 usable per DeepSeek-V3 report section 3.2.2; IB 50; compute as H100 [U]",
               source="[HW] §1: DSV3 §3.2.2; matmul rate the H100 SXM5's (same die), §3.1 MLE-ACC",
               unconfirmed=("host_link_gb_s", "peak_tflops", "memory_gib", "hbm_tb_s"),
               matmul_efficiency=0.803, fp8_tflops=1979.0, fp8_matmul_efficiency=0.709, generation="hopper",
               host_link_gb_s=_PCIE5),
    DeviceSpec("H200", 989.0, 141.0, 4.8, 450.0, 50.0, 8, ("h200-sxm",), "NVLink4 450; NDR 400 Gb/s",
               source="[HW] §1, §3.1: MLE-ACC", matmul_efficiency=0.803, fp8_tflops=1979.0,
               fp8_matmul_efficiency=0.734, generation="hopper", unconfirmed=("host_link_gb_s",),
               host_link_gb_s=_PCIE5),
    DeviceSpec("B200", 2250.0, 180.0, 8.0, 900.0, 50.0, 8, ("b200-sxm",), "NVLink5 900; 8 x 400 Gb/s",
               source="[HW] §1, §3.1: MLE-ACC, MLE-NET", matmul_efficiency=0.776, fp8_tflops=4500.0,
               fp8_matmul_efficiency=0.763, generation="blackwell", unconfirmed=("host_link_gb_s",),
               host_link_gb_s=_PCIE5),
    DeviceSpec("B300", 2250.0, 288.0, 8.0, 900.0, 100.0, 8, ("b300-sxm",), "NVLink5 900; 8 x 800 Gb/s",
               source="[HW] §1, §3.1: MLE-ACC, MLE-NET", matmul_efficiency=0.786, fp8_tflops=4500.0,
               fp8_matmul_efficiency=0.745, generation="blackwell", unconfirmed=("host_link_gb_s",),
               host_link_gb_s=_PCIE5),
    DeviceSpec("GB200", 2500.0, 186.0, 8.0, 900.0, 50.0, 72, ("gb200-nvl72",),
               "per GPU; the NVL72 rack is one 72-GPU NVLink domain; scale-out 400 Gb/s [U]",
               source="[HW] §1, §3.1: MLE-ACC", unconfirmed=("host_link_gb_s", "inter_node_gb_s"),
               matmul_efficiency=0.729, fp8_tflops=5000.0, fp8_matmul_efficiency=0.723, generation="blackwell",
               host_link_gb_s=450.0),
    # GB300 (Blackwell Ultra in the NVL72 rack): the peaks are [HW] §1's (MLE-ACC, [C]); no best-shape matmul has
    # been measured on it, so its rates are GB200's measured shares (same rack, same peak) [U], a stand-in the error
    # band widens for (matmul_rate_measured); 279 GB HBM3e at 8 TB/s (BW-ULTRA [U]), scale-out one
    # ConnectX-8 800 Gb/s = 100 GB/s per GPU as on the DGX B300 [U]. Its doubled exponential rate (BW-ULTRA) is not
    # priced: no measured attention rate on the part says what it buys.
    DeviceSpec("GB300", 2500.0, 279.0, 8.0, 900.0, 100.0, 72, ("gb300-nvl72",),
               "per GPU; Blackwell Ultra, the NVL72 rack one 72-GPU NVLink domain; matmul rates GB200's [U]",
               source="[HW] §1: MLE-ACC (GB300 2500 / 5000 TF); §3.1 GB200's MAMF shares; BW-ULTRA (HBM)",
               unconfirmed=("memory_gib", "hbm_tb_s", "host_link_gb_s", "inter_node_gb_s", "matmul_efficiency",
                            "fp8_matmul_efficiency"),
               matmul_efficiency=0.729, fp8_tflops=5000.0, fp8_matmul_efficiency=0.723, generation="blackwell",
               host_link_gb_s=450.0),
    DeviceSpec("MI300X", 1307.0, 192.0, 5.3, 448.0, 50.0, 8, ("mi300",),
               "Infinity Fabric full mesh: 448 GB/s aggregate, 64 to any one peer; 400 Gb/s NIC [U]",
               source="[HW] §1, §3.1: MLE-ACC, MLE-NET (2-GPU all-reduce 47.7 vs 312.9 GB/s on 8)",
               unconfirmed=("host_link_gb_s", "inter_node_gb_s"), matmul_efficiency=0.514, fp8_tflops=2610.0,
               full_mesh=True, coll_eff_intra=0.70, generation="cdna3", host_link_gb_s=_PCIE5),
    _ascend("A2", 354.0, ("ascend", "ascend910", "ascend910b", "910b", "910b1", "910b2", "910b2c",
                          "ascend910b1", "ascend910b2", "ascend910b2c"),
            "Ascend 910B (B1/B2, 24 AI cores): 354 TF BF16, no FP8; 8 NPUs per node on a full HCCS mesh "
            "(~196 GB/s per NPU one direction; a group of g < 8 gets (g-1)/7 of it), RoCE 200GE per NPU"),
    _ascend("910B3", 295.0, ("ascend910b3", "910b4", "ascend910b4"),
            "Ascend 910B3/B4 (20 AI cores): 20 x 4096 FP16 MAC x 2 x 1.8 GHz = 295 TF [D]; otherwise as A2"),
    DeviceSpec("A3", 354.0, 64.0, 1.6, 196.0, 50.0, 16, ("ascend910c", "ascend910_93", "910c"),
               "Ascend 910C die (a 910B1/B2-class die, ~354 TF; 2 dies per package, 16 dies per node); "
               "UB 196 GB/s per NPU, RDMA 400 Gb/s per NPU",
               source="[HW] §4: MS-CHIP SoC map (A3 die = 910B1 class), MS-FLOPS; matmul rate the 910B2C's "
                      "(ASC-BENCH, a die of the same class); §1 UB and RDMA",
               unconfirmed=("hbm_tb_s", "intra_node_gb_s", "inter_node_gb_s"), matmul_efficiency=0.91,
               coll_eff_intra=HCCS_COLL_EFF, generation="ascend",
               host_link_gb_s=6.92 * _GIB_GB),
)

# Used where a row states none (a device built outside the catalog): the median of [HW] §3.1.
DEFAULT_MATMUL_EFFICIENCY = 0.78

_BY_NAME: dict[str, DeviceSpec] = {}
for _d in DEVICES:
    for _n in (_d.name, *_d.aliases):
        _BY_NAME[_n.lower()] = _d


def matmul_rate_measured(device: DeviceSpec, fp8: bool = False) -> bool:
    """Whether the GEMM rate a plan on `device` is priced at is a measurement on that part ([HW] §3.1 MAMF, or
    the same die's), not a stand-in. A spec that states no `matmul_efficiency` is priced with its catalog row's
    (engine.cost.rows), and with the catalog's median where its name has none; a row marking the rate unconfirmed
    borrows another part's. With FP8 GEMMs the FP8 rate must be measured too: a row without one prices FP8 at
    its BF16 share. The error band widens for a stand-in (engine.cost.band, `unmeasured_device`)."""
    row = device if device.matmul_efficiency > 0 else find_device(device.name)
    if row is None or row.matmul_efficiency <= 0 or "matmul_efficiency" in row.unconfirmed:
        return False
    if not fp8:
        return True
    return row.fp8_matmul_efficiency > 0 and not {"fp8_matmul_efficiency", "fp8_tflops"} & set(row.unconfirmed)


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
    """Best-shape BF16 matmul efficiency of a catalog device ([HW] §3.1 and §4)."""
    d = find_device(name)
    return d.matmul_efficiency if d is not None and d.matmul_efficiency else DEFAULT_MATMUL_EFFICIENCY


def memory_variant(device: DeviceSpec, memory_gb: float | None) -> DeviceSpec | None:
    """The catalog's other part of the same die that a stated memory size identifies, or None: an `H100`
    stated with 96 GB is the 500 W H100 96 GB (HBM2e) part and with 94 GB the H100 NVL, whose figures differ
    from the 80 GB SXM5 row ([HW] §4)."""
    if memory_gb is None or device.name != "H100":
        return None
    for name, gb in (("H100-96G", 96.0), ("H100-NVL", 94.0)):
        if abs(float(memory_gb) - gb) < 0.5:
            return find_device(name)
    return None


def unconfirmed_note(device: DeviceSpec) -> str:
    """One line for the hover: which figures of the row are [U] and where the rest come from."""
    parts = []
    if device.unconfirmed:
        parts.append("[U] unconfirmed figures: " + ", ".join(device.unconfirmed))
    if device.source:
        parts.append("sources: " + device.source)
    return "; ".join(parts)
