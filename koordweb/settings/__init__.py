"""koordweb's settings, one module per way of running it (as cookiecutter-django splits them):

- `production`: a deployment, and the default of manage.py, gunicorn and celery;
- `local`: `make run`'s demo on one machine (DEBUG on, plain HTTP);
- `test`: the test suite and the processes it starts;

each starting from `base` (what they share) and reading the environment through `environment`.
`DJANGO_SETTINGS_MODULE`, in the environment or in `.env`, chooses one.
"""
