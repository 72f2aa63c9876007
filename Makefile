# koordweb: `make run` starts the demo (web + worker + beat), `make test` runs the whole suite.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test lint types imports pytest e2e install migrate seed clean browser

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "installing dependencies into $(VENV) ..."
	@$(PY) -m pip install --quiet --upgrade pip
	@$(PY) -m pip install --quiet -e ".[dev,bench]"
	@touch $(STAMP)

install: $(STAMP)

# The demo's settings (koordweb.settings.local), also for manage.py commands typed by hand.
.env:
	@printf 'DJANGO_SETTINGS_MODULE=koordweb.settings.local\nSECRET_KEY=%s\n' "$$($(PYTHON) -c 'import secrets; print(secrets.token_urlsafe(50))')" > .env
	@echo "wrote a development .env (the local settings: DEBUG on; a fresh SECRET_KEY)"

# The demo runs on the local settings whatever an older .env says.
LOCAL := DJANGO_SETTINGS_MODULE=koordweb.settings.local

migrate: $(STAMP) .env
	@mkdir -p var
	@$(LOCAL) $(PY) manage.py migrate --noinput -v 0

seed: migrate
	@$(LOCAL) $(PY) manage.py seed_demo

run: seed
	@bash docker/run-local.sh

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

types: $(STAMP)
	$(VENV)/bin/mypy koordweb scheduler

imports: $(STAMP)
	$(VENV)/bin/lint-imports

# Browser tests drive Debian's chromium: install it on a machine that lacks it (as root, or with
# sudo when there is one).
CHROMIUM := /usr/bin/chromium
SUDO := $(shell [ "$$(id -u)" = 0 ] || command -v sudo)

$(CHROMIUM):
	@echo "installing Debian's chromium for the browser tests ..."
	@$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq chromium >/dev/null

browser: $(CHROMIUM)

pytest: $(STAMP) browser
	$(VENV)/bin/pytest $(PYTEST_ARGS)

test: lint types imports pytest

e2e: $(STAMP) browser
	$(VENV)/bin/pytest -m browser tests/e2e

clean:
	rm -rf var staticfiles .mypy_cache .ruff_cache
