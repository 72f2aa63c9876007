"""The API's JSON renderer, which cannot fail on text: whatever a response holds is written.

DRF's JSONRenderer writes characters as they are and encodes the result as UTF-8, so a string
holding a lone surrogate (echoed in a 400, read from a row written before the doors refused it)
made the answer itself a 500. This one writes such an answer with every non-ASCII character
escaped (`\\ud800`), which is valid JSON; every other answer is written as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rest_framework.renderers import BrowsableAPIRenderer, JSONRenderer


class SafeJSONRenderer(JSONRenderer):
    def render(
        self,
        data: Any,
        accepted_media_type: str | None = None,
        renderer_context: Mapping[str, Any] | None = None,
    ) -> bytes:
        try:
            return super().render(data, accepted_media_type, renderer_context)  # type: ignore[arg-type]
        except UnicodeEncodeError:
            escaping = AsciiJSONRenderer()
            return escaping.render(data, accepted_media_type, renderer_context)  # type: ignore[arg-type]


class AsciiJSONRenderer(JSONRenderer):
    ensure_ascii = True


API_RENDERERS = [SafeJSONRenderer, BrowsableAPIRenderer]
