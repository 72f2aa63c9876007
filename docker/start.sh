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
        # One process per worker (solo pool): a cluster's rounds and its warm state stay in it.
        # Scale with more containers (docker compose up --scale worker=N); WORKER_POOL=prefork
        # with WORKER_CONCURRENCY runs several processes behind one worker name instead.
        exec celery -A koordweb worker --loglevel=INFO --pool "${WORKER_POOL:-solo}" \
            --concurrency "${WORKER_CONCURRENCY:-1}"
        ;;
    beat)
        exec celery -A koordweb beat --loglevel=INFO --schedule /var/lib/koordweb/celerybeat-schedule
        ;;
    *)
        exec python manage.py "$@"
        ;;
esac
