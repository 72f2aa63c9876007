"""Celery tasks: orchestration only (ids in; services, snapshot, engine and backend do the work)."""
