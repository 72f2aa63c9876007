"""The trace's cluster and pods as arrays: nodes (CPU, memory, GPUs of one model) and pod shapes.

Units follow the openb trace: CPU in milli-cores, memory in MiB, GPU in milli-GPU per card (a
whole card is 1000). A node has up to `MAX_GPUS` cards; absent cards are padded with 0 milli free,
which no GPU request (always > 0 milli) can use, so the padding never needs a mask.

A pod asks for `num_gpu` cards of `gpu_milli` each: a GPU-sharing pod is (1, < 1000), a whole-card
pod (k, 1000), a CPU-only pod (0, 0). Its GPU-model constraint (`gpu_spec`, e.g. `V100M16|V100M32`)
becomes a spec id whose row in `ClusterSpec.spec_allows` says which node models it may use.

Parsing takes rows (dicts, as `csv.DictReader` gives them): this package does no file I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

MAX_GPUS = 8
MILLI_PER_GPU = 1000

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


class TraceError(ValueError):
    """A trace row that cannot be understood (bad number, unknown column, impossible request)."""


@dataclass(frozen=True)
class Cluster:
    """Node capacities, immutable; `ClusterState` holds what is free."""

    names: tuple[str, ...]
    cpu_milli: IntArray  # (N,)
    memory_mib: IntArray  # (N,)
    gpu_count: IntArray  # (N,)
    model_id: IntArray  # (N,) index into `models`
    models: tuple[str, ...]

    @property
    def size(self) -> int:
        return len(self.names)

    @property
    def total_gpu_milli(self) -> int:
        return int(self.gpu_count.sum()) * MILLI_PER_GPU


@dataclass(frozen=True)
class PodTable:
    """A list of pods as parallel arrays, in arrival order once tuned."""

    names: tuple[str, ...]
    cpu_milli: IntArray
    memory_mib: IntArray
    num_gpu: IntArray
    gpu_milli: IntArray  # per card
    spec_id: IntArray  # row of `spec_allows`; 0 = no constraint
    spec_allows: BoolArray  # (specs, models)

    def __len__(self) -> int:
        return len(self.names)

    @property
    def gpu_request(self) -> IntArray:
        """Total GPU milli each pod asks for."""
        return self.num_gpu * self.gpu_milli

    def take(self, order: npt.NDArray[np.intp]) -> PodTable:
        """The pods at `order` (repeats allowed), sharing the spec table."""
        return PodTable(
            names=tuple(self.names[i] for i in order),
            cpu_milli=self.cpu_milli[order],
            memory_mib=self.memory_mib[order],
            num_gpu=self.num_gpu[order],
            gpu_milli=self.gpu_milli[order],
            spec_id=self.spec_id[order],
            spec_allows=self.spec_allows,
        )


def _int(row: Mapping[str, str | None], column: str) -> int:
    raw = row.get(column)
    if raw is None or raw == "":
        raise TraceError(f"missing {column!r} in row {dict(row)!r}")
    try:
        return int(float(raw))
    except ValueError as exc:
        raise TraceError(f"bad {column!r} value {raw!r}") from exc


def parse_nodes(rows: Iterable[Mapping[str, str | None]]) -> Cluster:
    """Nodes from `openb_node_list_*.csv` rows (sn, cpu_milli, memory_mib, gpu, model)."""
    names: list[str] = []
    cpu: list[int] = []
    mem: list[int] = []
    gpus: list[int] = []
    model_names: list[str] = []
    for row in rows:
        count = _int(row, "gpu")
        if not 0 <= count <= MAX_GPUS:
            raise TraceError(f"node {row.get('sn')!r} has {count} GPUs (0..{MAX_GPUS} supported)")
        names.append(str(row.get("sn") or f"node-{len(names):04d}"))
        cpu.append(_int(row, "cpu_milli"))
        mem.append(_int(row, "memory_mib"))
        gpus.append(count)
        model_names.append((row.get("model") or "").strip() if count else "")
    if not names:
        raise TraceError("the node list is empty")
    models = tuple(sorted(set(model_names)))
    index = {m: i for i, m in enumerate(models)}
    return Cluster(
        names=tuple(names),
        cpu_milli=np.array(cpu, dtype=np.int64),
        memory_mib=np.array(mem, dtype=np.int64),
        gpu_count=np.array(gpus, dtype=np.int64),
        model_id=np.array([index[m] for m in model_names], dtype=np.int64),
        models=models,
    )


def parse_pods(rows: Iterable[Mapping[str, str | None]], models: tuple[str, ...]) -> PodTable:
    """Pods from `openb_pod_list_*.csv` rows; `gpu_spec` may be absent (multigpu traces)."""
    names: list[str] = []
    cpu: list[int] = []
    mem: list[int] = []
    num: list[int] = []
    milli: list[int] = []
    spec_ids: list[int] = []
    specs: dict[frozenset[str], int] = {frozenset(): 0}
    for row in rows:
        count = _int(row, "num_gpu")
        per_card = _int(row, "gpu_milli") if count else 0
        if count < 0 or count > MAX_GPUS or (count and not 0 < per_card <= MILLI_PER_GPU):
            raise TraceError(f"pod {row.get('name')!r} asks for {count} x {per_card} milli-GPU")
        if count > 1 and per_card != MILLI_PER_GPU:
            raise TraceError(f"pod {row.get('name')!r}: a multi-GPU request must be whole cards")
        wanted = frozenset(t for t in (row.get("gpu_spec") or "").split("|") if t) if count else ()
        names.append(str(row.get("name") or f"pod-{len(names):05d}"))
        cpu.append(_int(row, "cpu_milli"))
        mem.append(_int(row, "memory_mib"))
        num.append(count)
        milli.append(per_card)
        spec_ids.append(specs.setdefault(frozenset(wanted), len(specs)))
    allows = np.ones((len(specs), len(models)), dtype=np.bool_)
    for wanted, sid in specs.items():
        if wanted:
            allows[sid] = [m in wanted for m in models]
    return PodTable(
        names=tuple(names),
        cpu_milli=np.array(cpu, dtype=np.int64),
        memory_mib=np.array(mem, dtype=np.int64),
        num_gpu=np.array(num, dtype=np.int64),
        gpu_milli=np.array(milli, dtype=np.int64),
        spec_id=np.array(spec_ids, dtype=np.int64),
        spec_allows=allows,
    )


class ClusterState:
    """What is free on every node; the only mutable object of a replay.

    `version[n]` grows each time node n changes so that policies can cache per-node scores.
    """

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.cpu_free = cluster.cpu_milli.copy()
        self.memory_free = cluster.memory_mib.copy()
        slots = np.arange(MAX_GPUS)[None, :] < cluster.gpu_count[:, None]
        self.gpu_free: IntArray = np.where(slots, MILLI_PER_GPU, 0).astype(np.int64)
        self.version = np.zeros(cluster.size, dtype=np.int64)
        self.used_gpu_milli = 0

    def feasible(self, pods: PodTable, i: int) -> BoolArray:
        """Nodes that can host pod i now: CPU, memory, GPU model and enough cards with room."""
        ok: BoolArray = (self.cpu_free >= pods.cpu_milli[i]) & (
            self.memory_free >= pods.memory_mib[i]
        )
        count = int(pods.num_gpu[i])
        if count:
            ok &= pods.spec_allows[pods.spec_id[i]][self.cluster.model_id]
            ok &= (self.gpu_free >= pods.gpu_milli[i]).sum(axis=1) >= count
        return ok

    def bind(self, pods: PodTable, i: int, node: int, cards: tuple[int, ...]) -> None:
        """Place pod i on `node`, taking `gpu_milli` from each card in `cards`."""
        per_card = int(pods.gpu_milli[i])
        if len(cards) != int(pods.num_gpu[i]) or len(set(cards)) != len(cards):
            raise ValueError(f"pod {pods.names[i]} needs {pods.num_gpu[i]} distinct cards")
        if any(self.gpu_free[node, card] < per_card for card in cards):
            raise ValueError(f"a card of node {node} has too little room for {pods.names[i]}")
        if self.cpu_free[node] < pods.cpu_milli[i] or self.memory_free[node] < pods.memory_mib[i]:
            raise ValueError(f"node {node} has too little CPU or memory for {pods.names[i]}")
        for card in cards:
            self.gpu_free[node, card] -= per_card
        self.cpu_free[node] -= pods.cpu_milli[i]
        self.memory_free[node] -= pods.memory_mib[i]
        self.version[node] += 1
        self.used_gpu_milli += per_card * len(cards)
