#!/bin/sh
# Entry point of the image: `web` (migrate, then gunicorn), `worker`, `beat`, or a manage.py command.
set -e
case "${1:-web}" in
    web)
        python manage.py migrate --noinput
        exec gunicorn koordweb.wsgi --bind 0.0.0.0:8000 \
            --workers "${WEB_CONCURRENCY:-3}" --access-logfile - --forwarded-allow-ips '*'
        ;;
    worker)
        exec celery -A koordweb worker --loglevel=INFO --concurrency "${WORKER_CONCURRENCY:-2}"
        ;;
    beat)
        exec celery -A koordweb beat --loglevel=INFO --schedule /var/lib/koordweb/celerybeat-schedule
        ;;
    *)
        exec python manage.py "$@"
        ;;
esac
