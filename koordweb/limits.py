"""Every limit on what a tenant writes, defined once: the API's JSON and YAML, the UI's forms and
the manifest reader (imports too) all take them from here, so no door accepts what another
refuses. tests/koordweb/test_tenant_doors.py is generated from `BOUNDS` and `CHOICES` and sends
each refused value through every door.

Pure: no ORM, no request (the per-team limits a quota row holds are `services.tenant_limits`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from koordweb.kubenames import NAME_CHARACTERS, is_dns_subdomain


@dataclass(frozen=True)
class Bound:
    """A whole number a field may hold, inclusive at both ends, in `unit`."""

    field: str
    minimum: int
    maximum: int
    unit: str

    def errors(self, value: Any) -> list[str]:
        if isinstance(value, bool) or not isinstance(value, int):
            return [f"must be a whole number of {self.unit}"]
        if not self.minimum <= value <= self.maximum:
            return [f"must be {self.minimum:,} to {self.maximum:,} {self.unit}"]
        return []


# Pods a job may have, whichever door it comes through (a YAML job counts its Pod documents).
POD_COUNT = Bound("replicas", 1, 4096, "pods")
MIN_AVAILABLE = Bound("min_available", 1, POD_COUNT.maximum, "pods")
# How long a simulated job runs (the koordweb.io/duration-seconds annotation in YAML).
DURATION = Bound("duration_seconds", 1, 365 * 86400, "seconds")
# A new API token's lifetime, from the API and from the tokens page (REST_KNOX's TOKEN_TTL is
# the default, and settings keep it within this).
TOKEN_DAYS = Bound("expiry_days", 1, 30, "days")

BOUNDS = (POD_COUNT, MIN_AVAILABLE, DURATION, TOKEN_DAYS)

# A job's name: its pods are "<name>-<index>", so 200 leaves room within a DNS subdomain's 253.
JOB_NAME_MAX = 200
JOB_NAME_RULE = f"{NAME_CHARACTERS}, at most {JOB_NAME_MAX} characters"


def job_name_errors(value: str) -> list[str]:
    """A job's name, from a JSON field, a form, a PodGroup or a gang annotation: a Kubernetes
    object name (so no markup, no control or direction characters) of at most 200 characters."""
    if len(value) > JOB_NAME_MAX:
        return [f"must be at most {JOB_NAME_MAX} characters"]
    return [] if is_dns_subdomain(value) else [f"must be {NAME_CHARACTERS}"]


# What-ifs a team may have computing at once (each one a round's engine work on the live state);
# KOORDWEB_WHATIF_IN_FLIGHT overrides it. Its rate budgets are `api.throttles.DEFAULT_RATES`.
WHATIF_IN_FLIGHT = 2

# Choice fields: the values each door offers or reads.
GANG_MODES = ("Strict", "NonStrict")
GATHER_STRATEGIES = ("MustGather", "PreferGather")
CHOICES = {"mode": GANG_MODES, "strategy": GATHER_STRATEGIES}
