"""Reading pages as a test does: the figure JSON a page embeds."""

from __future__ import annotations

import json
import re


def figures(html: str) -> dict[str, dict]:
    """The figure JSON blocks of a page, by id (what figures.js draws)."""
    found = re.findall(
        r'<script id="(fig-[\w-]+)" type="application/json">(.*?)</script>', html, re.S
    )
    return {fig_id: json.loads(body) for fig_id, body in found}
