#!/usr/bin/env python
"""Django's command-line entry point for koordweb."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "koordweb.settings")
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import execute_from_command_line

    try:
        execute_from_command_line(sys.argv)
    except ImproperlyConfigured as exc:
        # Settings that cannot start (no SECRET_KEY with DEBUG off, ...): one line, exit 2.
        print(f"manage.py: {exc}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
