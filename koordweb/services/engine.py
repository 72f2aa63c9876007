"""How koordweb runs the engine: the profile and the device-state builder for snapshots."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from scheduler.profile import Profile


def engine_profile() -> Profile:
    """The default profile (Koordinator's reference behaviour plus the optional plugins present)."""
    return Profile.default()


def node_devices_builder() -> Callable[..., Any] | None:
    """A function (node row, device rows) -> the devices plugin's per-node state, if present."""
    return None
