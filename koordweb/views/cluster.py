"""The topology page (domain tree, graph, free slots, a job's placement) and the device page."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from koordweb.figures.base import percent, plain
from koordweb.figures.devices import CardCell, column_groups, device_heatmap
from koordweb.figures.topology import TreeNode, domain_sunburst, topology_graph
from koordweb.forms import DeviceFilterForm, PodShapeForm
from koordweb.models import Cluster, JobState
from koordweb.presenters.quantities import amount_in_unit, resource_name, shape_text
from koordweb.presenters.words import domain_text, layer_word
from koordweb.selectors.card_tallies import card_model_text, device_counts, node_card_tallies
from koordweb.selectors.device_filters import CARD_STATES
from koordweb.selectors.devices import Card, device_grid
from koordweb.selectors.gpu_usage import cards_busy, cards_idle_now
from koordweb.selectors.jobs import job_node_names
from koordweb.selectors.nodes import usage_by_name
from koordweb.selectors.tenancy import quotas_visible
from koordweb.selectors.topology import (
    ROOT_KEY,
    DomainTotals,
    TopologyTotals,
    accelerator_resources,
    is_accelerator,
    topology_tree,
)
from koordweb.views.cards import held_text, use_text
from koordweb.views.common import current_cluster, int_param, is_admin, visible_jobs
from koordweb.views.gpu import HEATMAP_VIEWS, card_shades, heatmap_view
from koordweb.views.nodes import usage_context
from scheduler.vocabulary import NODE_LAYER, NVIDIA_GPU, natural_key

LIVE_SECONDS = 10
# Above this many nodes the figures stop at the layer above the nodes (aggregate, stay fast).
NODE_LEAF_LIMIT = 600
DEVICE_ROWS_PER_PAGE = 120


def tree_nodes(tree: TopologyTotals, resource: str) -> list[TreeNode]:
    """Selector domains -> figure input, parents first. Each domain's allocation and free amount
    are of `resource` when the domain has it, else of its own accelerator (the NPUs of an Ascend
    block when GPUs were asked for), else of CPU; `basis` says which, so a percent never changes
    meaning silently."""
    depth_of = {ROOT_KEY: 0}
    entries: list[TreeNode] = []
    for key, domain in tree.domains.items():
        depth = 0 if key == ROOT_KEY else depth_of[domain.parent] + 1
        depth_of[key] = depth
        accelerator = _domain_accelerator(domain.capacity, resource)
        basis = accelerator if domain.capacity.get(accelerator) else "cpu"
        capacity = domain.capacity.get(basis, 0)
        allocated: float = domain.allocated.get(basis, 0)
        free = domain.capacity.get(accelerator, 0) - domain.allocated.get(accelerator, 0)
        basis_words, free_text = resource_name(basis), _free_words(accelerator, free)
        free_amount = _free_in_unit(accelerator, free)
        kinds = _card_kinds(domain, resource)
        if kinds:
            # An Ascend or Cambricon domain when GPUs are picked: its own cards, in its words
            # ("3.1% of NPUs", "31 NPUs"), never the GPU-named shares its nodes report.
            capacity = sum(domain.cards[k] for k in kinds)
            allocated = sum(domain.cards_held[k] for k in kinds)
            basis_words = " and ".join(resource_name(k) for k in kinds)
            free_amount = sum(domain.cards_free[k] for k in kinds)
            free_text = ", ".join(
                f"{domain.cards_free[k]:,} {_card_word(k, domain.cards_free[k])}" for k in kinds
            )
        entries.append(
            TreeNode(
                key=key,
                label=domain.name,
                parent=domain.parent,
                layer=domain.layer,
                depth=depth,
                nodes=domain.node_count,
                allocated_pct=percent(allocated, capacity),
                free=free_amount,
                slots=domain.slots,
                basis=basis_words,
                free_text=free_text,
                cpu_used_pct=_used_pct(domain, "cpu"),
                memory_used_pct=_used_pct(domain, "memory"),
                busy_nodes=domain.busy_nodes,
            )
        )
    return entries


def _card_kinds(domain: DomainTotals, resource: str) -> list[str]:
    """The card kinds a domain is described by when it does not offer the picked resource
    itself: the picked kind if it has those cards, else every kind it has."""
    if domain.capacity.get(resource) or not any(domain.cards.values()):
        return []
    if domain.cards.get(resource):
        return [resource]
    return sorted(kind for kind, count in domain.cards.items() if count)


def _card_word(resource: str, count: int) -> str:
    """'NPUs', '1 MLU': a count of whole cards in its kind's word."""
    name = resource_name(resource)
    return name[:-1] if count == 1 and name.endswith("s") else name


def _domain_accelerator(capacity: dict[str, int], resource: str) -> str:
    """`resource` when the domain has it, else the first accelerator it has, else `resource`."""
    if capacity.get(resource):
        return resource
    return next(
        (name for name in sorted(capacity) if capacity[name] and is_accelerator(name)), resource
    )


def _used_pct(domain: DomainTotals, resource: str) -> int | None:
    total = domain.reporting.get(resource, 0)
    return round(100 * domain.used.get(resource, 0) / total) if total else None


def _free_words(resource: str, amount: int) -> str:
    """'63 NPUs', '12.5 cards', '40 cores': a free amount with the unit of its resource."""
    value = _free_in_unit(resource, amount)
    unit = free_unit(resource)
    if unit == "cards" and not resource.endswith("gpu-core"):
        unit = resource_name(resource)
    return f"{value:,g} {unit}"


def free_unit(resource: str) -> str:
    """The unit the topology page counts free `resource` in: cards for devices, else by kind."""
    if resource.endswith("gpu-core"):
        return "cards"
    return amount_in_unit(resource, 0)[1] or resource_name(resource)


def _free_in_unit(resource: str, amount: int) -> float:
    if resource.endswith("gpu-core"):
        return round(amount / 100, 2)  # percent of a card -> cards
    return round(amount_in_unit(resource, amount)[0], 2)


def domain_rows(entries: list[TreeNode], *, limit: int = 200) -> list[dict[str, Any]]:
    """The topology page's table: every domain between the root and the nodes, its layer and
    parent in words ('block', 'spine s3', 'the whole cluster'), never a layer's key."""
    return [
        {
            "layer": layer_word(e.layer),
            "label": e.label,
            "parent": domain_text(e.parent),
            "nodes": e.nodes,
            "allocated_pct": e.allocated_pct,
            "basis": e.basis,
            "free": e.free,
            "free_text": e.free_text,
            "slots": e.slots,
            "cpu_used_pct": e.cpu_used_pct,
            "memory_used_pct": e.memory_used_pct,
            "busy_nodes": e.busy_nodes,
        }
        for e in entries
        if e.layer != NODE_LAYER and e.depth > 0
    ][:limit]


def placement_keys(tree: TopologyTotals, node_names: set[str]) -> set[str]:
    """Every domain (and node leaf) on the path to the nodes where a job's pods are."""
    keys: set[str] = set()
    for name in node_names:
        keys.update(tree.node_path.get(name, []))
        keys.add(f"{NODE_LAYER}/{name}")
    return keys


def placement_figure(cluster: Cluster, node_names: set[str]) -> dict[str, Any]:
    """The sunburst of the cluster with the domains of these nodes outlined (a job's placement,
    or a what-if plan's)."""
    tree = topology_tree(cluster, include_nodes=_small(tree_size=cluster.nodes.count()))
    return domain_sunburst(
        tree_nodes(tree, NVIDIA_GPU), highlighted=placement_keys(tree, node_names)
    )


def _small(*, tree_size: int) -> bool:
    return tree_size <= NODE_LEAF_LIMIT


def scheduler_arg_lines(config: Any) -> list[tuple[str, list[tuple[str, str]]]]:
    """The cluster's plugin arguments as (plugin, [(argument, JSON value)]), sorted for display;
    nothing for an empty (reference) or malformed configuration."""
    if not isinstance(config, dict):
        return []
    return [
        (str(plugin), sorted((str(name), json.dumps(value)) for name, value in args.items()))
        for plugin, args in sorted(config.items())
        if isinstance(args, dict) and args
    ]


@login_required
def topology(request: HttpRequest) -> HttpResponse:
    cluster = current_cluster(request)
    if cluster is None:
        return render(request, "topology.html", {"cluster": None})
    resources = accelerator_resources(cluster) or ["cpu"]
    jobs = visible_jobs(request.user, cluster).filter(state__in=JobState.PLACED)
    # Bound only when the shape was asked for: ?cluster= alone is not an empty shape.
    asked = "resource" in request.GET or "job" in request.GET
    form = PodShapeForm(request.GET if asked else None, resources=resources, jobs=jobs)
    shape = form.shape() if form.is_valid() else PodShapeForm.default_shape(resources)
    resource = next(iter(k for k in shape if k not in ("cpu", "memory")), resources[0])
    tree = topology_tree(
        cluster,
        shape=shape,
        include_nodes=_small(tree_size=cluster.nodes.count()),
        usage=usage_by_name(cluster),
        cards=node_card_tallies(cluster),
    )
    job = form.cleaned_data.get("job") if form.is_valid() else None
    highlighted = placement_keys(tree, job_node_names(job)) if job else set()
    entries = tree_nodes(tree, resource)
    unit = free_unit(resource)
    context = {
        "cluster": cluster,
        "form": form,
        "job": job,
        "shape": shape,
        "sunburst": domain_sunburst(entries, highlighted=highlighted, unit=unit),
        "graph": topology_graph(entries, highlighted=highlighted, unit=unit),
        "outside": tree.outside,
        "layers": [layer_word(layer) for layer in tree.layers],
        "domains": domain_rows(entries),
        "root": entries[0] if entries else None,
        "resource": resource,
        "free_unit": free_unit(resource),
        "shape_words": shape_text(shape),
        "scheduler_args": scheduler_arg_lines(cluster.scheduler_args),
        "usage": usage_context(cluster),
    }
    return render(request, "topology.html", context)


def _card_hover(card: Card) -> str:
    """The card, where it sits, how much of it is held in its vendor's unit and by whom."""
    lines = [
        f"<b>{card.node}</b> #{card.minor} {card_model_text(card.vendor, card.model)}",
        f"NUMA {card.numa if card.numa is not None else '?'} · PCIe {card.pcie or '?'}"
        + (f" · NVLink {card.nvlink}" if card.nvlink else ""),
        ("allocated " if card.uses else "")
        + held_text(card)
        + (" (shared)" if card.shared else "")
        + ("" if card.healthy else " · UNHEALTHY"),
    ]
    # job and pod names are the tenants' text: shown as written, never as plotly markup
    lines += [
        plain(f"{use.job} {use.pod} {use_text(use)}".replace("  ", " ")) for use in card.uses[:6]
    ]
    return "<br>".join(lines)


def _majority(values: list[str]) -> str:
    return Counter(values).most_common(1)[0][0] if values else ""


@login_required
def devices(request: HttpRequest) -> HttpResponse:
    cluster = current_cluster(request)
    if cluster is None:
        return render(request, "devices.html", {"cluster": None})
    form = DeviceFilterForm(request.GET or None)
    filters = form.card_filter()
    page = int_param(request, "page", 1, 1, 10_000)
    label = _job_labeller(request, cluster)
    # A tenant filters and counts by its own teams only: other teams' cards stay unnamed.
    teams = (
        None
        if is_admin(request.user)
        else set(quotas_visible(user=request.user).values_list("name", flat=True))
    )
    idle_cards = cards_idle_now(cluster)
    grid = device_grid(
        cluster,
        filters=filters,
        idle_cards=idle_cards,
        teams=teams,
        job_label=label,
        offset=(page - 1) * DEVICE_ROWS_PER_PAGE,
        limit=DEVICE_ROWS_PER_PAGE,
    )
    form.fields["block"].widget.choices = [("", "all blocks")] + [(g, g) for g in grid.groups]
    facets = grid.facets
    form.count_choices("show", [("", "every card"), *CARD_STATES.items()], facets["show"])
    team_names = sorted(set(facets["team"]) - {""} | ({filters.team} - {""}), key=natural_key)
    form.count_choices("team", [("", "all teams"), *((t, t) for t in team_names)], facets["team"])
    models = sorted(set(facets["model"]) - {""} | ({filters.model} - {""}))
    vendors = grid.model_vendors
    form.count_choices(
        "model",
        [("", "all models"), *((m, card_model_text(vendors.get(m, ""), m)) for m in models)],
        facets["model"],
    )
    row_of = {node: i for i, (_, node) in enumerate(grid.rows)}
    column_of = {minor: i for i, minor in enumerate(grid.minors)}
    view = heatmap_view(request)
    shades = card_shades(cluster, grid.cards, view, idle_cards) if view != "allocation" else {}
    cells = {
        (row_of[c.node], column_of[c.minor]): CardCell(
            shades[(c.node, c.minor)].value if shades else c.core_used,
            c.shared,
            c.healthy,
            _card_hover(c) + (f"<br>{shades[(c.node, c.minor)].words}" if shades else ""),
        )
        for c in grid.cards
    }
    per_column: dict[int, list[Card]] = {m: [] for m in grid.minors}
    for card in grid.cards:
        per_column[card.minor].append(card)
    numa = [
        _majority([str(c.numa) for c in per_column[m] if c.numa is not None]) for m in grid.minors
    ]
    pcie = [_majority([c.pcie for c in per_column[m] if c.pcie]) for m in grid.minors]
    nvlink = [_majority([c.nvlink for c in per_column[m] if c.nvlink]) for m in grid.minors]
    groups = [
        *column_groups(numa, "NUMA"),
        *column_groups(pcie, "PCIe"),
        *column_groups(nvlink, "NVLink"),
    ]
    figure = (
        device_heatmap(
            [f"{group} · {node}" for group, node in grid.rows],
            grid.minors,
            cells,
            groups=groups,
            value_title={"allocation": "% allocated", "utilisation": "% busy"}.get(view, "idle"),
        )
        if grid.rows
        else None
    )
    pages = max(1, -(-grid.row_count // DEVICE_ROWS_PER_PAGE))
    cards, unhealthy, nodes = device_counts(cluster)
    context = {
        "cluster": cluster,
        "form": form,
        "figure": figure,
        "cluster_cards": cards,
        "cluster_unhealthy": unhealthy,
        "cluster_nodes": nodes,
        "card_count": len(grid.cards),
        "shared_count": sum(1 for c in grid.cards if c.shared),
        "unhealthy_count": sum(1 for c in grid.cards if not c.healthy),
        "unhealthy_cards": [c for c in grid.cards if not c.healthy][:50],
        "node_count": grid.row_count,
        "page_nodes": len(grid.rows),
        "live_seconds": LIVE_SECONDS,
        "page": page,
        "pages": pages,
        "query": _query_without_page(request),
        "view": view,
        "views": HEATMAP_VIEWS,
        "view_query": _query_without(request, "view"),
        "show": filters.show,
        "idle_count": facets["show"].get("idle", 0),
        "idle_query": _query_without(request, "show", "page"),
        "usage": usage_context(cluster),
        "cards_busy": cards_busy(cluster, idle_cards),
    }
    return render(request, "devices.html", context)


def _job_labeller(request: HttpRequest, cluster: Cluster) -> Any:
    if is_admin(request.user):
        return lambda job_id, name: name
    mine = set(visible_jobs(request.user, cluster).values_list("pk", flat=True))
    return lambda job_id, name: name if job_id in mine else "another tenant's job"


def _query_without_page(request: HttpRequest) -> str:
    return _query_without(request, "page")


def _query_without(request: HttpRequest, *names: str) -> str:
    query = request.GET.copy()
    for name in names:
        query.pop(name, None)
    return query.urlencode()
