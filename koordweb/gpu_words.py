"""GPU monitoring in words for admins: GPU-hours, percents and idle durations.

Kept in one small module so it can join the UI's shared quantity formatting (issue 19) later;
figures and views both use it (it imports nothing of Django).
"""

from __future__ import annotations


def gpu_hours(hours: float) -> str:
    """'0.25 GPU-hours', '12.5 GPU-hours', '1,240 GPU-hours' (never e-notation)."""
    if hours >= 100:
        return f"{hours:,.0f} GPU-hours"
    if hours >= 10:
        return f"{hours:,.1f} GPU-hours"
    return f"{hours:.2f} GPU-hours"


def percent(value: float) -> str:
    return f"{value:.0f}%"


def idle_for(minutes: int) -> str:
    """'45 min', '5 h 12 min', '3 days 4 h'."""
    if minutes < 60:
        return f"{minutes} min"
    hours, rest = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {rest} min" if rest else f"{hours} h"
    days, hours = divmod(hours, 24)
    return f"{days} days {hours} h" if hours else f"{days} days"
