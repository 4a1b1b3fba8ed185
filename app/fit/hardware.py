"""The hardware facts the time model needs: one GPU's peaks and efficiencies, and the links.

GPU facts come from the catalog (app/data/gpus.yaml: datasheet peaks, memory bandwidth, and the
`performance` section with the matmul and attention efficiencies each architecture reaches in
published measurements). An offer whose GPU is not in the catalog keeps its own peak figures and
gets the most conservative efficiencies and no bandwidth (memory-bound terms then use
UNKNOWN_BANDWIDTH_GBPS).

Link bandwidths (GB/s, one direction, per GPU), what NCCL's ring collectives reach
(`busbw` in nccl-tests' doc/PERFORMANCE.md terms):

* NVLink / NVSwitch: datasheets quote the bidirectional total (H100: 900 GB/s), so one
  direction is half; NCCL reaches NCCL_LINK_EFFICIENCY (80%) of it. A declared NVLink without a
  known speed counts as DEFAULT_NVLINK_GBPS (300, the slowest NVLink generation in the catalog).
* PCIe x16: 15.75 / 31.5 / 63 GB/s per direction for generations 3 / 4 / 5. With peer-to-peer,
  NCCL reaches NCCL_LINK_EFFICIENCY of it; GeForce cards have no peer-to-peer, so every transfer
  is staged through host memory and reaches HOST_STAGED_EFFICIENCY (40%).
* Between nodes: the offer's network Gbit/s per node, shared by the node's GPUs; RDMA fabrics
  (InfiniBand, RoCE, EFA) reach NCCL_LINK_EFFICIENCY, TCP Ethernet ETHERNET_EFFICIENCY (50%).
  An unknown speed counts as DEFAULT_NETWORK_GBIT for its kind; an unknown network as 10 Gbit/s
  Ethernet. A ring spanning nodes runs at the slower of the node's fabric and the network.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from app.gpus.catalog import get_gpu, get_performance

GPUS_PER_NODE = 8

NCCL_LINK_EFFICIENCY = 0.8
HOST_STAGED_EFFICIENCY = 0.4
ETHERNET_EFFICIENCY = 0.5
DEFAULT_NVLINK_GBPS = 300.0
PCIE_GBPS_PER_DIRECTION = {3: 15.75, 4: 31.5, 5: 63.0, 6: 126.0}
RDMA_NETWORKS = frozenset({"infiniband", "roce", "efa"})
DEFAULT_NETWORK_GBIT = {"infiniband": 400.0, "roce": 200.0, "efa": 400.0, "ethernet": 25.0}
UNKNOWN_NETWORK_GBIT = 10.0
UNKNOWN_BANDWIDTH_GBPS = 500.0  # GPUs outside the catalog: a low GDDR6-class figure

# Offers whose GPU is not in the catalog: the lowest efficiencies of any catalogued family.
FALLBACK_MATMUL_EFFICIENCY = 0.5
FALLBACK_ATTENTION_EFFICIENCY = 0.3


@dataclass(frozen=True)
class GpuFacts:
    """One GPU model as the time model sees it (peaks are dense, FP32-accumulate TFLOPS)."""

    name: str
    bf16_tflops: float | None
    fp16_tflops: float | None
    memory_bandwidth_gbps: float
    nvlink_gbps: float | None
    matmul_efficiency: float
    attention_efficiency: float
    pcie_gen: int
    p2p: bool
    architecture: str
    source: str

    @property
    def tf32_capable(self) -> bool:
        """Ampere and newer NVIDIA parts run fp32 matmuls on tensor cores as TF32."""
        return self.architecture in ("ampere", "ada", "hopper", "blackwell")


def gpu_facts(slug: str | None) -> GpuFacts | None:
    """The catalog's facts for a GPU slug, or None when it is not in the catalog."""
    if not slug:
        return None
    spec = get_gpu(slug)
    perf = get_performance(slug)
    if spec is None or perf is None:
        return None
    return GpuFacts(
        name=spec.name,
        bf16_tflops=spec.bf16_tflops,
        fp16_tflops=spec.fp16_tflops,
        memory_bandwidth_gbps=spec.memory_bandwidth_gbps,
        nvlink_gbps=spec.nvlink_gbps,
        matmul_efficiency=perf.matmul_efficiency,
        attention_efficiency=perf.attention_efficiency,
        pcie_gen=perf.pcie_gen,
        p2p=perf.p2p,
        architecture=spec.architecture,
        source=perf.source,
    )


def uncatalogued_gpu(
    bf16_tflops: float | None, fp16_tflops: float | None, nvlink_gbps: float | None
) -> GpuFacts | None:
    """Facts for a GPU known only by its peaks (no catalog entry); None without any peak."""
    if not bf16_tflops and not fp16_tflops:
        return None
    return GpuFacts(
        name="unknown GPU",
        bf16_tflops=bf16_tflops,
        fp16_tflops=fp16_tflops,
        memory_bandwidth_gbps=UNKNOWN_BANDWIDTH_GBPS,
        nvlink_gbps=nvlink_gbps,
        matmul_efficiency=FALLBACK_MATMUL_EFFICIENCY,
        attention_efficiency=FALLBACK_ATTENTION_EFFICIENCY,
        pcie_gen=4,
        p2p=True,
        architecture="unknown",
        source="GPU not in the catalog: lowest catalogued efficiencies assumed",
    )


@dataclass(frozen=True)
class Links:
    """How the job's GPUs are joined: within a node and, for several nodes, between them."""

    gpus_per_node: int = 1
    nodes: int = 1
    interconnect: str = "unknown"  # nvswitch | nvlink | pcie | unknown
    nvlink_gbps: float | None = None  # GB/s per GPU, bidirectional (datasheet figure)
    network: str = "unknown"  # infiniband | roce | efa | ethernet | none | unknown
    network_gbps: float | None = None  # Gbit/s per node

    @property
    def gpus(self) -> int:
        """Data-parallel GPUs in all."""
        return self.gpus_per_node * self.nodes

    @staticmethod
    def for_count(
        gpus: int,
        *,
        interconnect: str = "unknown",
        nvlink_gbps: float | None = None,
        network: str = "unknown",
        network_gbps: float | None = None,
    ) -> Links:
        """`gpus` GPUs packed into nodes of GPUS_PER_NODE."""
        gpus = max(1, gpus)
        nodes = math.ceil(gpus / GPUS_PER_NODE)
        return Links(
            gpus_per_node=math.ceil(gpus / nodes),
            nodes=nodes,
            interconnect=interconnect,
            nvlink_gbps=nvlink_gbps,
            network=network,
            network_gbps=network_gbps,
        )

    @staticmethod
    def for_plan(
        listings: int,
        gpus_per_listing: int,
        *,
        interconnect: str = "unknown",
        nvlink_gbps: float | None = None,
        network: str = "unknown",
        network_gbps: float | None = None,
    ) -> Links:
        """`listings` identical machines of `gpus_per_listing` GPUs (each packed into nodes of
        GPUS_PER_NODE, as `for_count`) joined over their network."""
        one = Links.for_count(
            gpus_per_listing,
            interconnect=interconnect,
            nvlink_gbps=nvlink_gbps,
            network=network,
            network_gbps=network_gbps,
        )
        return Links(
            gpus_per_node=one.gpus_per_node,
            nodes=one.nodes * max(1, listings),
            interconnect=interconnect,
            nvlink_gbps=nvlink_gbps,
            network=network,
            network_gbps=network_gbps,
        )


def intra_node_busbw(gpu: GpuFacts, links: Links) -> float:
    """GB/s a ring collective reaches between the GPUs of one node."""
    if links.interconnect in ("nvswitch", "nvlink"):
        total = links.nvlink_gbps or gpu.nvlink_gbps or DEFAULT_NVLINK_GBPS
        return total / 2 * NCCL_LINK_EFFICIENCY
    pcie = PCIE_GBPS_PER_DIRECTION.get(gpu.pcie_gen, PCIE_GBPS_PER_DIRECTION[4])
    if not gpu.p2p:  # PCIe or unknown: without NVLink a GeForce card stages through the host
        return pcie * HOST_STAGED_EFFICIENCY
    return pcie * NCCL_LINK_EFFICIENCY


def network_gbit(links: Links) -> float:
    """Gbit/s per node between nodes (stated, or the documented default for the kind)."""
    if links.network_gbps:
        return links.network_gbps
    return DEFAULT_NETWORK_GBIT.get(links.network, UNKNOWN_NETWORK_GBIT)


def inter_node_busbw(links: Links) -> float:
    """GB/s per GPU that the network gives a ring collective spanning nodes."""
    efficiency = NCCL_LINK_EFFICIENCY if links.network in RDMA_NETWORKS else ETHERNET_EFFICIENCY
    return network_gbit(links) / 8 / max(1, links.gpus_per_node) * efficiency


def collective_busbw(gpu: GpuFacts, links: Links) -> float:
    """GB/s of a ring over all the job's GPUs: the slowest hop decides."""
    intra = intra_node_busbw(gpu, links)
    if links.nodes <= 1:
        return intra
    if links.gpus_per_node <= 1:
        return inter_node_busbw(links)
    return min(intra, inter_node_busbw(links))


def link_text(links: Links) -> str:
    """'8 GPUs over NVSwitch', '2 nodes × 8 GPUs, InfiniBand 3,200 Gbit/s', ..."""
    kind = {"nvswitch": "NVSwitch", "nvlink": "NVLink", "pcie": "PCIe"}.get(
        links.interconnect, "unknown interconnect"
    )
    if links.nodes <= 1:
        return f"{links.gpus} GPU" + ("s over " + kind if links.gpus > 1 else "")
    net = {"infiniband": "InfiniBand", "roce": "RoCE", "efa": "EFA", "ethernet": "Ethernet"}.get(
        links.network, "unknown network"
    )
    return (
        f"{links.nodes} nodes × {links.gpus_per_node} GPUs ({kind}), "
        f"{net} {network_gbit(links):,.0f} Gbit/s"
    )
