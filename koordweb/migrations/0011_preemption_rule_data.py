"""A preemption's rule becomes data: `cost["rule"]` (the engine's rule name) and
`cost["preemptor_priority"]`, and `reason` keeps the engine's words only.

Records written before carry the rule as an English prefix of their reason
("lower-priority jobs evicted (priority 9000 over at most 5000): ..."). This is the one place that
prefix is read: each of its forms is turned into the two keys (and `highest_victim_priority` when
the cost lacks it) and cut from the reason. A reason that starts with none of them is left as it
is (a preemption recorded before the rule was). The reverse puts the prefix back in front of the
reason of every row whose cost names a rule, and takes the two keys out of the cost.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from django.db import migrations

# The engine's rule names (scheduler.plugins.preemption); a migration keeps its own copy.
LOWER_PRIORITY, IN_QUOTA, QUOTA_RECLAIM = "LowerPriority", "InQuota", "QuotaReclaim"

_PRIORITIES = r"\(priority (?P<own>-?\d+) over at most (?P<highest>-?\d+|None)"
_PREFIXES = (
    (LOWER_PRIORITY, re.compile(r"lower-priority jobs evicted " + _PRIORITIES + r"\): ")),
    (
        IN_QUOTA,
        re.compile(
            r"lower-priority jobs evicted "
            + _PRIORITIES
            + r", of the same quota, to free quota\): "
        ),
    ),
    # The in-quota wording for a few hours before the one above.
    (
        IN_QUOTA,
        re.compile(
            r"lower-priority jobs of the same quota evicted to free quota " + _PRIORITIES + r"\): "
        ),
    ),
    (
        QUOTA_RECLAIM,
        re.compile(r"borrowed quota reclaimed \(the preemptor's quota is within its min\): "),
    ),
)
_BATCH = 500


def parse_prefix(reason: str) -> tuple[str, int | None, int | None, str] | None:
    """(rule, preemptor priority, highest victim priority, the engine's reason) of a recorded
    reason, None when it carries no rule prefix; priorities None where the prefix says none."""
    for rule, pattern in _PREFIXES:
        found = pattern.match(reason)
        if found is None:
            continue
        groups = found.groupdict()
        own = int(groups["own"]) if groups.get("own") else None
        highest = groups.get("highest")
        return (
            rule,
            own,
            int(highest) if highest and highest != "None" else None,
            reason[found.end() :],
        )
    return None


def prefix_of(cost: dict[str, Any]) -> str:
    """The prefix the code before this migration wrote for the rule in `cost`."""
    if cost["rule"] == QUOTA_RECLAIM:
        return "borrowed quota reclaimed (the preemptor's quota is within its min): "
    own, highest = cost.get("preemptor_priority"), cost.get("highest_victim_priority")
    if cost["rule"] == IN_QUOTA:
        return (
            f"lower-priority jobs evicted (priority {own} over at most {highest}, of the"
            " same quota, to free quota): "
        )
    return f"lower-priority jobs evicted (priority {own} over at most {highest}): "


def _rewrite(apps: Any, schema_editor: Any, change: Callable[[Any], bool]) -> None:
    """`change` each preemption row (True: it changed), a batch of ids at a time: no cursor is
    left open over the table while it is written (SQLite would not isolate the two)."""
    Preemption = apps.get_model("koordweb", "Preemption")
    rows = Preemption.objects.using(schema_editor.connection.alias)
    ids = list(rows.order_by("pk").values_list("pk", flat=True))
    for start in range(0, len(ids), _BATCH):
        batch = rows.filter(pk__in=ids[start : start + _BATCH]).select_related("preemptor")
        changed = [row for row in batch if change(row)]
        rows.bulk_update(changed, ["cost", "reason"])


def _to_data(row: Any) -> bool:
    parsed = parse_prefix(row.reason or "")
    if parsed is None or not isinstance(row.cost, dict) or "rule" in row.cost:
        return False
    rule, own, highest, reason = parsed
    # Reclaim's prefix names no priority: the preemptor's, which the record was written with.
    own = own if own is not None else row.preemptor.priority
    cost = {**row.cost, "rule": rule, "preemptor_priority": own}
    if highest is not None and cost.get("highest_victim_priority") is None:
        cost["highest_victim_priority"] = highest
    row.cost, row.reason = cost, reason
    return True


def _to_prefix(row: Any) -> bool:
    cost = row.cost if isinstance(row.cost, dict) else {}
    if cost.get("rule") not in (LOWER_PRIORITY, IN_QUOTA, QUOTA_RECLAIM):
        return False
    row.reason = prefix_of(cost) + (row.reason or "")
    row.cost = {k: v for k, v in cost.items() if k not in ("rule", "preemptor_priority")}
    return True


def rule_to_data(apps: Any, schema_editor: Any) -> None:
    _rewrite(apps, schema_editor, _to_data)


def rule_to_prefix(apps: Any, schema_editor: Any) -> None:
    _rewrite(apps, schema_editor, _to_prefix)


class Migration(migrations.Migration):
    dependencies = [("koordweb", "0010_pod_intent_fewer_indexes")]

    operations = [migrations.RunPython(rule_to_data, rule_to_prefix)]
