"""Reads: querysets and aggregates for the API and the pages, prefetched (no N+1)."""
