"""Alpha-beta collective times over the two-level hierarchy (NVLink inside a node, one NIC per device
across nodes), vectorised over candidates.

Group placement (Megatron's rank order): tp innermost, then cp, ep, dp, pp. A group of size n whose
members are `stride` ranks apart has g = clamp(cards_per_node // stride, 1, n) members per node and spans
k = ceil(n / g) nodes. Hierarchical collectives ([HW] §3.2 rules): a reduce-scatter or all-gather of
S bytes moves (g−1)/g·S over NVLink and (k−1)/k·S/g over each device's NIC, all NICs of a node working in
parallel; an all-reduce is a reduce-scatter plus an all-gather (twice that).
"""

from __future__ import annotations

import numpy as np

from engine.cost import constants as K


class Links:
    """Effective link rates (B/s) and per-step latencies of one cluster.

    On a full-mesh scale-up fabric (Ascend HCCS, MI300X Infinity Fabric; [HW] §3.2 and §4) a device's
    intra-node rate is the sum of its cards_per_node − 1 peer links, so a group with g members per node
    uses only g − 1 of them: (g − 1)/(cards_per_node − 1) of the rate (910B all-gather 149 / 64 / 38 GB/s
    output bytes over time on 8 / 4 / 2 cards, i.e. 130 / 48 / 19 GB/s bus bandwidth: the share, one link at
    2 cards; MI300X 2-GPU all-reduce 47.7 vs 312.9 on 8). A point-to-point
    transfer then uses one link. `coll_eff_intra` is the device's measured collective efficiency (0: the
    NVLink ring default, constants.COLL_EFF_INTRA)."""

    def __init__(self, cards_per_node: int, intra_gb_s: float, inter_gb_s: float, *, full_mesh: bool = False,
                 coll_eff_intra: float = 0.0) -> None:
        self.cpn = max(int(cards_per_node), 1)
        self.bi = max(intra_gb_s, 1e-9) * K.GB * (coll_eff_intra or K.COLL_EFF_INTRA)
        self.be = max(inter_gb_s, 1e-9) * K.GB * K.COLL_EFF_INTER
        # DeepEP's RDMA kernels are not NCCL collectives: they reach their own measured share of the NIC.
        self.deepep_rdma = max(inter_gb_s, 1e-9) * K.GB * K.DEEPEP_RDMA_SHARE
        self.full_mesh = full_mesh and self.cpn > 2
        link_share = 1.0 / (self.cpn - 1) if self.full_mesh else 1.0
        self.p2p_intra = max(intra_gb_s, 1e-9) * K.GB * K.P2P_EFF * link_share
        self.p2p_inter = max(inter_gb_s, 1e-9) * K.GB * K.P2P_EFF

    def _bi(self, g: np.ndarray) -> np.ndarray | float:
        """Intra-node collective rate of groups with g members per node (full mesh: their links' share)."""
        if not self.full_mesh:
            return self.bi
        return self.bi * np.maximum(g - 1, 1) / (self.cpn - 1)

    def split(self, n: np.ndarray, stride: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(members per node g, nodes spanned k) of groups of size n with the given stride."""
        per = np.maximum(self.cpn // np.maximum(stride, 1), 1)
        g = np.minimum(per, np.maximum(n, 1)).astype(np.float64)
        k = np.ceil(np.maximum(n, 1) / g)
        return g, k

    def gather_coef(self, n: np.ndarray, stride: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(seconds per byte, latency) of an all-gather / reduce-scatter per group, 0 for groups of one: the
        collective is linear in its size, so a table prices many sizes per row by one multiply-add."""
        g, k = self.split(n, stride)
        a = (g - 1) / g / self._bi(g) + (k - 1) / k / (g * self.be)
        lat = (g - 1) * K.LAT_INTRA_S + (k - 1) * K.LAT_INTER_S
        one = n <= 1
        return np.where(one, 0.0, a), np.where(one, 0.0, lat)

    def gather(self, size: np.ndarray, n: np.ndarray, stride: np.ndarray) -> np.ndarray:
        """All-gather (output S bytes) or reduce-scatter (input S bytes) time, seconds."""
        g, k = self.split(n, stride)
        t = (g - 1) / g * size / self._bi(g) + (k - 1) / k * size / (g * self.be)
        lat = (g - 1) * K.LAT_INTRA_S + (k - 1) * K.LAT_INTER_S
        return np.where(n > 1, t + lat, 0.0)

    def gather_flat_coef(self, n: np.ndarray, stride: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(seconds per byte, latency) per group, 0 for groups of one, of an all-gather / reduce-scatter as a
        flat ring whose every byte crosses each rank's own NIC once the group spans nodes: what DeepSpeed's ZeRO-3
        parameter traffic achieved in NAR21 Table 2 (FITTED there, Framework.fsdp_flat_ring; other stacks get
        gather_coef); within one node it is the NVLink ring."""
        g, k = self.split(n, stride)
        nn = np.maximum(n, 1).astype(np.float64)
        a = np.where(k > 1, (nn - 1) / nn / self.be, (g - 1) / g / self._bi(g))
        lat = (g - 1) * K.LAT_INTRA_S + (k - 1) * K.LAT_INTER_S
        one = n <= 1
        return np.where(one, 0.0, a), np.where(one, 0.0, lat)

    def allreduce(self, size: np.ndarray, n: np.ndarray, stride: np.ndarray) -> np.ndarray:
        return 2.0 * self.gather(size, n, stride)

    def alltoall(self, size: np.ndarray, n: np.ndarray, stride: np.ndarray) -> np.ndarray:
        """All-to-all where each rank holds S bytes and keeps 1/n of them: intra-node and NIC parts run
        concurrently, so the slower one counts."""
        g, k = self.split(n, stride)
        nn = np.maximum(n, 1).astype(np.float64)
        t = np.maximum(size * (g - 1) / nn / self._bi(g), size * (nn - g) / nn / self.be)
        lat = (g - 1) * K.LAT_INTRA_S + (k - 1) * K.LAT_INTER_S
        return np.where(n > 1, t + lat, 0.0)

    def p2p(self, size: np.ndarray, cross_node: np.ndarray) -> np.ndarray:
        """One point-to-point transfer of S bytes."""
        bw = np.where(cross_node, self.p2p_inter, self.p2p_intra)
        lat = np.where(cross_node, K.LAT_INTER_S, K.LAT_INTRA_S)
        return size / bw + lat
