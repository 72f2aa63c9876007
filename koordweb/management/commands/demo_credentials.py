"""`python manage.py demo_credentials`: how to log in to the demo."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from koordweb.services.demo import credentials_path


class Command(BaseCommand):
    help = "Print the demo users and their passwords (written by seed_demo to var/)."

    def handle(self, *args: Any, **options: Any) -> None:
        path = credentials_path()
        if not path.is_file():
            raise CommandError(
                "no demo credentials: run `python manage.py seed_demo`", returncode=2
            )
        for user, password in json.loads(path.read_text()).items():
            role = "admin" if user == "admin" else "tenant"
            self.stdout.write(f"log in as {user} / {password}  ({role})")
