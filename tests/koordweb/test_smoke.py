"""The project boots: settings load, migrations apply, the login page answers."""

import pytest


@pytest.mark.django_db
def test_login_page_answers(client):
    response = client.get("/login/")
    assert response.status_code == 200
    assert b"Log in to koordweb" in response.content


@pytest.mark.django_db
def test_overview_requires_login(client):
    response = client.get("/")
    assert response.status_code == 302
    assert "/login/" in response["Location"]
