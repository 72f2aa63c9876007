"""Prometheus: the `/metrics` view and the collectors behind it (`metrics`, `gpu_metrics`).

Apart from `koordweb.observability` (logs and counters, which every layer writes to) because the
collectors read the pages' selectors at scrape time: nothing but the URL map and the settings'
middleware list imports this package.
"""
