"""UI routes: the pages for admins and tenants (login required everywhere but /login/)."""

from django.contrib.auth import views as auth_views
from django.urls import path

from koordweb.security import RateLimitedLoginView
from koordweb.views import (
    actions,
    cluster,
    gpu,
    jobs,
    navigation,
    nodes,
    overview,
    quotas,
    records,
)

urlpatterns = [
    path("login/", RateLimitedLoginView.as_view(template_name="login.html"), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("", overview.overview, name="overview"),
    path("cluster/", navigation.cluster_switch, name="cluster-switch"),
    path("overview/live/", overview.overview_live, name="overview-live"),
    path("topology/", cluster.topology, name="topology"),
    path("devices/", cluster.devices, name="devices"),
    path("nodes/", nodes.node_list, name="nodes"),
    path("nodes/<str:name>/cordon/", nodes.node_cordon_page, name="node-cordon"),
    path("efficiency/", gpu.efficiency_page, name="efficiency"),
    path("jobs/", jobs.job_list, name="jobs"),
    path("jobs/submit/", actions.job_submit_page, name="job-submit"),
    path("jobs/<int:pk>/", jobs.job_detail, name="job-detail"),
    path("jobs/<int:pk>/cancel/", actions.job_cancel_page, name="job-cancel"),
    path("preemptions/", records.preemptions, name="preemptions"),
    path("preemptions/<int:pk>/", records.preemption_page, name="preemption-detail"),
    path("quotas/", quotas.quota_list, name="quotas"),
    path("quotas/<str:name>/edit/", quotas.quota_edit, name="quota-edit"),
    path("rounds/", records.rounds, name="rounds"),
    path("rounds/<int:pk>/", records.round_page, name="round-detail"),
    path("import/", actions.import_page, name="import"),
    path("tokens/", actions.tokens_page, name="tokens"),
    path("tokens/<str:token_key>/revoke/", actions.token_revoke_page, name="token-revoke"),
]
