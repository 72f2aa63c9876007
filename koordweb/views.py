"""HTML pages. Views read through selectors and draw with koordweb.figures."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from koordweb.models import Cluster, Job, Node


@login_required
def overview(request: HttpRequest) -> HttpResponse:
    context = {
        "clusters": Cluster.objects.all(),
        "node_count": Node.objects.count(),
        "job_count": Job.objects.count(),
    }
    return render(request, "overview.html", context)
