"""Alpha-beta collective times over the two-level hierarchy (NVLink inside a node, one NIC per device
across nodes), vectorised over candidates.

Group placement (Megatron's rank order): tp innermost, then cp, ep, dp, pp. A group of size n whose
members are `stride` ranks apart has g = clamp(cards_per_node // stride, 1, n) members per node and spans
k = ceil(n / g) nodes. Hierarchical collectives (HARDWARE.md §3.2 rules): a reduce-scatter or all-gather of
S bytes moves (g−1)/g·S over NVLink and (k−1)/k·S/g over each device's NIC, all NICs of a node working in
parallel; an all-reduce is a reduce-scatter plus an all-gather (twice that).
"""

from __future__ import annotations

import numpy as np

from engine.cost import constants as K


class Links:
    """Effective link rates (B/s) and per-step latencies of one cluster."""

    def __init__(self, cards_per_node: int, intra_gb_s: float, inter_gb_s: float) -> None:
        self.cpn = max(int(cards_per_node), 1)
        self.bi = max(intra_gb_s, 1e-9) * K.GB * K.COLL_EFF_INTRA
        self.be = max(inter_gb_s, 1e-9) * K.GB * K.COLL_EFF_INTER
        self.p2p_intra = max(intra_gb_s, 1e-9) * K.GB * K.P2P_EFF
        self.p2p_inter = max(inter_gb_s, 1e-9) * K.GB * K.P2P_EFF

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
        a = (g - 1) / g / self.bi + (k - 1) / k / (g * self.be)
        lat = (g - 1) * K.LAT_INTRA_S + (k - 1) * K.LAT_INTER_S
        one = n <= 1
        return np.where(one, 0.0, a), np.where(one, 0.0, lat)

    def gather(self, size: np.ndarray, n: np.ndarray, stride: np.ndarray) -> np.ndarray:
        """All-gather (output S bytes) or reduce-scatter (input S bytes) time, seconds."""
        g, k = self.split(n, stride)
        t = (g - 1) / g * size / self.bi + (k - 1) / k * size / (g * self.be)
        lat = (g - 1) * K.LAT_INTRA_S + (k - 1) * K.LAT_INTER_S
        return np.where(n > 1, t + lat, 0.0)

    def gather_flat_coef(self, n: np.ndarray, stride: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(seconds per byte, latency) per group, 0 for groups of one, of an all-gather / reduce-scatter as a
        flat ring whose every byte crosses each rank's own NIC once the group spans nodes: what ZeRO-3 / FSDP
        parameter traffic achieved in NAR21 Table 2 (FITTED there, constants.FSDP_FLAT_RING); within one node
        it is the NVLink ring."""
        g, k = self.split(n, stride)
        nn = np.maximum(n, 1).astype(np.float64)
        a = np.where(k > 1, (nn - 1) / nn / self.be, (g - 1) / g / self.bi)
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
        t = np.maximum(size * (g - 1) / nn / self.bi, size * (nn - g) / nn / self.be)
        lat = (g - 1) * K.LAT_INTRA_S + (k - 1) * K.LAT_INTER_S
        return np.where(n > 1, t + lat, 0.0)

    def p2p(self, size: np.ndarray, cross_node: np.ndarray) -> np.ndarray:
        """One point-to-point transfer of S bytes."""
        bw = np.where(cross_node, self.p2p_inter, self.p2p_intra)
        lat = np.where(cross_node, K.LAT_INTER_S, K.LAT_INTRA_S)
        return size / bw + lat
