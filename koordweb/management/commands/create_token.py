"""`python manage.py create_token USER`: print a new API token for USER on the last line."""

from __future__ import annotations

import sys
from typing import Any

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandParser

from koordweb.services.tokens import token_create


class Command(BaseCommand):
    help = "Create an API token for a user; the token is printed alone on the last line."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")

    def handle(self, *args: Any, **options: Any) -> None:
        username = options["username"]
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            self.stderr.write(f"create_token: no user named {username!r}")
            sys.exit(2)
        try:
            instance, clear_text = token_create(user=user)
        except ValidationError as exc:  # the user holds as many live tokens as allowed
            self.stderr.write(f"create_token: {' '.join(exc.messages)}")
            sys.exit(2)
        expiry = instance.expiry.isoformat() if instance.expiry else "never"
        self.stdout.write(f"token for {username}, expires {expiry}:")
        self.stdout.write(clear_text)
