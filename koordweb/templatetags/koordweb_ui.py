"""Template filters of the UI pages, each a thin call into `koordweb.presenters`:

- `{{ amount|quantity:"memory" }}`: an amount with its unit ('512 GiB', '64 cores', '8 GPUs');
- `{{ decision|decision_words }}`: a Decision row's sentence and details (for includes/why.html);
- `{{ preemption|preemption_words }}`: a recorded preemption (its rule and reason) in words;
- `{{ job.topology_spec|topology_words }}`: a network-topology rule ('all in one block').
"""

from __future__ import annotations

from typing import Any

from django import template

from koordweb.presenters.quantities import quantity_text
from koordweb.presenters.reasons import (
    Explanation,
    decision_sentence,
    preemption_sentence,
)
from koordweb.presenters.words import topology_rule_text

register = template.Library()


@register.filter
def quantity(amount: float | None, resource: str) -> str:
    return quantity_text(resource, amount)


@register.filter
def decision_words(decision: Any) -> Explanation:
    return decision_sentence(decision.outcome, decision.reason, decision.details)


@register.filter
def preemption_words(preemption: Any, preemptor_named: bool = True) -> str:
    """`{{ preemption|preemption_words }}`; `|preemption_words:False` for another team's
    preemptor. The rule is in the row's cost: given only a reason (`preemption.reason`), the
    reason alone is said."""
    if preemption is None or isinstance(preemption, str):
        reason, cost = preemption or "", None
    else:
        reason, cost = preemption.reason, preemption.cost
    return preemption_sentence(reason, cost, preemptor_named=bool(preemptor_named))


@register.filter
def topology_words(spec: Any) -> str:
    return topology_rule_text(spec)
