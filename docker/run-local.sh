#!/usr/bin/env bash
# `make run`: the web server, a Celery worker and Celery beat on the local settings
# (koordweb/settings/local.py: the embedded defaults, DEBUG on, demo jobs arriving on a timer).
# Ctrl-C stops all three. KOORDWEB_PORT chooses the port (default 8000).
set -uo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
PORT="${KOORDWEB_PORT:-8000}"
export DJANGO_SETTINGS_MODULE=koordweb.settings.local
mkdir -p var/broker/out var/broker/processed var/log

pids=()
stop() {
    trap - INT TERM EXIT
    echo
    echo "stopping web, worker and beat ..."
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null; done
    wait 2>/dev/null
    exit 0
}
trap stop INT TERM EXIT

$PY manage.py runserver "127.0.0.1:$PORT" --noreload >var/log/web.log 2>&1 &
pids+=($!)
.venv/bin/celery -A koordweb worker --pool=solo --loglevel=INFO >var/log/worker.log 2>&1 &
pids+=($!)
.venv/bin/celery -A koordweb beat --loglevel=INFO \
    --schedule=var/celerybeat-schedule >var/log/beat.log 2>&1 &
pids+=($!)

for _ in $(seq 1 60); do
    if $PY -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$PORT/login/')" 2>/dev/null; then
        break
    fi
    sleep 0.5
done
echo
echo "koordweb is running at http://127.0.0.1:$PORT/"
$PY manage.py demo_credentials
echo "logs: var/log/web.log, var/log/worker.log, var/log/beat.log. Ctrl-C stops everything."
wait
