"""Fluent builders for small synthetic openb-style traces (rows as csv.DictReader gives them)."""

from __future__ import annotations

from scheduler.fgd import Cluster, PodTable, parse_nodes, parse_pods


class TraceBuilder:
    """Nodes and pods that read like the scenario: `.node(gpus=8, model="G2").shared(470)`."""

    def __init__(self) -> None:
        self.node_rows: list[dict[str, str | None]] = []
        self.pod_rows: list[dict[str, str | None]] = []

    def node(
        self, gpus: int = 8, model: str = "G2", cpu: int = 96_000, memory: int = 393_216
    ) -> TraceBuilder:
        name = f"node-{len(self.node_rows):03d}"
        self.node_rows.append(
            {
                "sn": name,
                "cpu_milli": str(cpu),
                "memory_mib": str(memory),
                "gpu": str(gpus),
                "model": model,
            }
        )
        return self

    def pod(
        self, num_gpu: int, gpu_milli: int, cpu: int = 4_000, memory: int = 8_192, spec: str = ""
    ) -> TraceBuilder:
        name = f"pod-{len(self.pod_rows):04d}"
        self.pod_rows.append(
            {
                "name": name,
                "cpu_milli": str(cpu),
                "memory_mib": str(memory),
                "num_gpu": str(num_gpu),
                "gpu_milli": str(gpu_milli),
                "gpu_spec": spec,
            }
        )
        return self

    def shared(self, milli: int, **kw: int | str) -> TraceBuilder:
        return self.pod(1, milli, **kw)  # type: ignore[arg-type]

    def whole(self, cards: int, **kw: int | str) -> TraceBuilder:
        return self.pod(cards, 1000, **kw)  # type: ignore[arg-type]

    def cpu_only(self, cpu: int = 8_000) -> TraceBuilder:
        return self.pod(0, 0, cpu=cpu)

    def build(self) -> tuple[Cluster, PodTable]:
        cluster = parse_nodes(self.node_rows)
        return cluster, parse_pods(self.pod_rows, cluster.models)


def mixed_trace(nodes: int = 12, pods_per_kind: int = 6) -> tuple[Cluster, PodTable]:
    """A small heterogeneous cluster and a workload with every kind of request."""
    b = TraceBuilder()
    for k in range(nodes):
        if k % 3 == 0:
            b.node(gpus=2, model="T4", cpu=104_000, memory=524_288)
        elif k % 3 == 1:
            b.node(gpus=8, model="G2")
        else:
            b.node(gpus=4, model="V100M16", cpu=32_000, memory=131_072)
    for _ in range(pods_per_kind):
        b.shared(470, cpu=11_908).shared(810, cpu=3_152).shared(230).shared(650, cpu=11_908)
        b.whole(1, cpu=12_000).whole(2, cpu=16_000).whole(4, cpu=24_000).whole(8, cpu=64_000)
        b.shared(470, spec="T4").whole(1, spec="V100M16|V100M32").cpu_only()
    return b.build()
