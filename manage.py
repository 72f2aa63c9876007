#!/usr/bin/env python
"""Django's command-line entry point for koordweb."""

import sys


def main() -> None:
    # `.env` and DJANGO_SETTINGS_MODULE (production unless the environment or `.env` names one).
    from koordweb.settings.environment import use_settings

    use_settings()
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import execute_from_command_line

    try:
        execute_from_command_line(sys.argv)
    except ImproperlyConfigured as exc:
        # Settings Django cannot use (a module that is not there, ...): one line, exit 2.
        print(f"manage.py: {exc}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
