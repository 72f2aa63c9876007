"""An accelerator card's hold in words, in the unit its vendor counts: the devices page's hover.

The share a pod holds comes from the selector (`CardUse.core`: GPU core, else the memory share an
Ascend or a Cambricon slice carries); an Ascend card held whole is said in AI cores.
"""

from __future__ import annotations

from koordweb.presenters.quantities import number
from koordweb.selectors.devices import Card, CardUse

FULL = 100


def held_text(card: Card) -> str:
    """'all 20 AI cores' of an Ascend card one pod holds whole, else '50% of the card'; 'free'."""
    if not card.uses:
        return "free"
    if len(card.uses) == 1 and card.core_used == FULL and card.uses[0].ai_cores:
        return f"all {number(card.uses[0].ai_cores)} AI cores"
    return f"{card.core_used}% of the card"


def use_text(use: CardUse) -> str:
    """One pod's share: '20 AI cores' on an Ascend card, else '50%'."""
    if use.ai_cores:
        return f"{number(use.ai_cores)} AI cores"
    return f"{use.core}%"
