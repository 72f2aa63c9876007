"""Kubernetes/Koordinator YAML <-> model rows (import and export)."""
