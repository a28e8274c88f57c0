"""The cluster: a search config's `cluster`, else a train.yaml's `context.device_num`, else overrides.

Resolution order ([HP] §2.3: a cluster comes from the search config; docs/formats.md §1: a train.yaml
may state `context.device_num`; docs/formats.md §4: editor settings fill "the cluster when no search config or context
states it"). Overrides with `explicit=True` (flags typed on the hp-plan command line) win over the files
field by field; editor settings (`explicit=False`) only fill gaps. Device type defaults to A2, as
HyperParallel's Machine does ([HP] §5.12), with an information diagnostic saying so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.catalog.devices import device_names, find_device, memory_variant
from engine.config.reader import Source, Val, did_you_mean
from engine.config.types import ClusterOverrides, Location
from engine.document import Map
from engine.positions import DOCUMENT_START
from engine.specs import ClusterSpec, DeviceSpec

DEFAULT_DEVICE = "A2"


@dataclass
class ClusterFacts:
    """A search config's `cluster` section as read (typed values with locations)."""

    anchor: Val | None = None  # the `cluster` key
    values: dict[str, Val] = field(default_factory=dict)


def read_cluster_section(src: Source, root: Map) -> ClusterFacts | None:
    if "cluster" not in root:
        return None
    facts = ClusterFacts()
    kn = root.key_node("cluster")
    if kn is not None:
        facts.anchor = Val(None, "cluster", src.location(kn, root.get("cluster")))
    sec = src.section(root, "cluster", "cluster")
    for key in ("num_nodes", "cards_per_node"):
        v = src.int_(sec, key, f"cluster.{key}")
        if v is not None:
            facts.values[key] = v
    for key in ("device_memory_gb", "intra_node_bandwidth_gb_s", "inter_node_bandwidth_gb_s"):
        v = src.number(sec, key, f"cluster.{key}", minimum=0.0, strict=True)
        if v is not None:
            facts.values[key] = v
    dt = src.str_(sec, "device_type", "cluster.device_type")
    if dt is not None:
        facts.values["device_type"] = dt
    return facts


def unknown_device_message(name: Any) -> tuple[str, dict[str, Any]]:
    known = device_names()
    near = did_you_mean(str(name).lower(), [n.lower() for n in known], 0.6)
    near_names = [n for n in known if n.lower() in near]
    data: dict[str, Any] = {"valid": known}
    if near_names:
        data["replace_value"] = near_names[0]
    hint = f" (did you mean {near_names[0]}?)" if near_names else ""
    return f"unknown device type '{name}'{hint}; known devices: {', '.join(known)}", data


@dataclass(frozen=True, slots=True)
class _ClusterReading:
    """What one cluster is read from (the file's cluster section or context.device_num, and the overrides of
    flags or settings) and where findings about it go: the steps of `build_cluster` share it."""

    report: Source
    section: ClusterFacts | None
    device_num: Val | None
    ov: ClusterOverrides

    @property
    def vals(self) -> Mapping[str, Val]:
        return self.section.values if self.section is not None else {}

    def emit(self, code: str, msg: str, v: Val | None, path: str, data: dict[str, Any] | None = None) -> None:
        report, section = self.report, self.section
        if v is not None:
            sink = report if v.loc.file == report.path else Source(report.doc, v.loc.file, primary=False)
            sink.diag(code, msg, v.loc.value, v.path, data=data)
            if sink is not report:
                report.diags.extend(sink.diags)
        else:
            anchor = section.anchor.loc.key if section is not None and section.anchor is not None else DOCUMENT_START
            report.diag(code, msg, anchor, path, data=data)

    def pick(self, file_val: Val | None, ov_value: Any) -> tuple[Any, Val | None]:
        """A typed flag wins over the file; a setting only fills what the file leaves unsaid."""
        if self.ov.explicit and ov_value is not None:
            return ov_value, None
        if file_val is not None:
            return file_val.value, file_val
        return ov_value, None


def build_cluster(
    report: Source,
    section: ClusterFacts | None,
    device_num: Val | None,
    overrides: ClusterOverrides | None,
) -> tuple[ClusterSpec | None, dict[str, Location]]:
    """The cluster the files and overrides state, or None (with HP301/HP302 said) when it cannot be priced; and
    the location of every cluster fact, for hovers and edits."""
    rd = _ClusterReading(report, section, device_num, overrides or ClusterOverrides())
    locs: dict[str, Location] = {f"cluster.{k}": v.loc for k, v in rd.vals.items()}
    if section is not None and section.anchor is not None:
        locs["cluster"] = section.anchor.loc
    if device_num is not None:
        locs["context.device_num"] = device_num.loc
    device, device_ok = _stated_device(rd)
    world, nodes = _stated_size(rd)
    if world is None and nodes is None:
        report.diag(
            "HP302",
            "no cluster stated, so the strategy cannot be priced: create a search config with a cluster section "
            "(train_yaml: this file), set context.device_num, or pass --devices / --device-type "
            "(editor: hpLsp.cluster.*)",
            DOCUMENT_START, "cluster",
        )
        return None, locs
    if not device_ok:
        return None, locs
    device = device or _default_device(rd)
    nodes, cards = _node_shape(rd, device, world, nodes)
    mem, device = _memory_and_part(rd, device)
    intra = rd.vals.get("intra_node_bandwidth_gb_s")
    inter = rd.vals.get("inter_node_bandwidth_gb_s")
    spec = ClusterSpec(
        device=device,
        num_nodes=nodes,
        cards_per_node=cards,
        memory_gib=float(mem) if mem else device.memory_gib,
        intra_node_gb_s=float(intra.value) if intra is not None else device.intra_node_gb_s,
        inter_node_gb_s=float(inter.value) if inter is not None else device.inter_node_gb_s,
    )
    return spec, locs


def _stated_device(rd: _ClusterReading) -> tuple[DeviceSpec | None, bool]:
    """The device the files or overrides name (None when none is named), and False when the name is unknown
    (HP301 said at it)."""
    dt_name, dt_val = rd.pick(rd.vals.get("device_type"), rd.ov.device_type)
    if dt_name is None:
        return None, True
    device = find_device(str(dt_name))
    if device is None:
        msg, data = unknown_device_message(dt_name)
        if dt_val is None:
            msg = msg.replace("unknown device type", "unknown device type (from --device-type / settings)", 1)
        rd.emit("HP301", msg, dt_val, "cluster.device_type", data)
        return None, False
    return device, True


def _stated_size(rd: _ClusterReading) -> tuple[int | None, int | None]:
    """(world size, node count) as stated, either may be None: typed flags first, then the cluster section,
    then context.device_num, then the settings."""
    ov, section = rd.ov, rd.section
    nodes_v = rd.vals.get("num_nodes")
    if ov.explicit and ov.devices:
        return ov.devices, None
    if ov.explicit and ov.num_nodes:
        return None, ov.num_nodes
    if section is not None:
        return None, int(nodes_v.value) if nodes_v is not None else (ov.num_nodes or 1)
    if rd.device_num is not None:
        return int(rd.device_num.value), None
    if ov.num_nodes:
        return None, ov.num_nodes
    if ov.devices:
        return ov.devices, None
    return None, None


def _default_device(rd: _ClusterReading) -> DeviceSpec:
    """HyperParallel's default device, with HP303 saying it was assumed."""
    device = find_device(DEFAULT_DEVICE)
    assert device is not None
    section, device_num, report = rd.section, rd.device_num, rd.report
    rng = section.anchor.loc.key if section is not None and section.anchor is not None else (
        device_num.loc.key if device_num is not None and device_num.loc.file == report.path else DOCUMENT_START)
    report.diag("HP303", f"device type not stated: assuming {DEFAULT_DEVICE} (HyperParallel's default, "
                f"{device.memory_gib:g} GB); set cluster.device_type or --device-type", rng, "cluster.device_type",
                data={"assumed": DEFAULT_DEVICE, "valid": device_names()})
    return device


def _node_shape(rd: _ClusterReading, device: DeviceSpec, world: int | None, nodes: int | None) -> tuple[int, int]:
    """(nodes, cards per node): a world size that is not whole nodes is priced as one node of that size (HP304)."""
    cards_pick, _ = rd.pick(rd.vals.get("cards_per_node"), rd.ov.cards_per_node)
    cards = int(cards_pick) if cards_pick else device.cards_per_node
    if world is not None:
        if world % cards == 0:
            nodes = world // cards
        elif world < cards:
            nodes, cards = 1, world
        else:
            src_v = rd.device_num if rd.device_num is not None and not rd.ov.explicit else None
            rd.emit("HP304", f"{world} devices are not a whole number of {cards}-device nodes; pricing one node of "
                    f"{world} devices. State cluster.num_nodes and cluster.cards_per_node instead", src_v,
                    "context.device_num")
            nodes, cards = 1, world
    assert nodes is not None
    return nodes, cards


def _memory_and_part(rd: _ClusterReading, device: DeviceSpec) -> tuple[Any, DeviceSpec]:
    """The stated device memory (None: the device's own) and the part it names: an H100 stated with 94 or 96 GB
    is another part (HP305). A budget imposed on the file (ClusterOverrides.memory_is_budget) names none."""
    mem, mem_val = rd.pick(rd.vals.get("device_memory_gb"), rd.ov.memory_gb)
    names_part = mem and not (mem_val is None and rd.ov.memory_is_budget)
    variant = memory_variant(device, float(mem)) if names_part else None
    if variant is None:
        return mem, device
    rd.emit("HP305", f"{device.name} with {float(mem):g} GB is the {variant.name} part: priced with its figures "
            f"({variant.hbm_tb_s:g} TB/s HBM, {variant.peak_tflops * variant.clock_fraction:.0f} TF sustained); "
            f"write device_type: {variant.name} to say so", mem_val, "cluster.device_memory_gb",
            {"device": variant.name})
    return mem, variant
