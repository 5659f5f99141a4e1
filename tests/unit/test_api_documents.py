"""The documents and maintenance routes of the API where no pipeline runs, and their bad requests."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from starlette.testclient import TestClient

from memstream.auth import admin_principal
from memstream.front.app import create_app
from memstream.serve.context import ApiContext
from memstream.settings import Settings


def client() -> TestClient:
    providers: Any = SimpleNamespace(settings=Settings.from_env({}), documents=None)
    # Open mode: one admin principal, as on loopback (the tenancy suite tests the tokens).
    return TestClient(create_app(ApiContext(providers=providers, open_principal=admin_principal())))


def test_without_a_pipeline_documents_and_maintenance_say_so() -> None:
    api = client()
    listed = api.get("/documents", params={"project": "/repo"})
    assert listed.status_code == 503 and "not available" in listed.json()["error"]
    added = api.post("/documents", json={"content": "Feature flags live in LaunchDarkly.", "project": "/repo"})
    assert added.status_code == 503 and "memstream up" in added.json()["error"]
    doctor = api.get("/maintenance")
    assert doctor.status_code == 503 and "no maintenance worker" in doctor.json()["error"]


def test_bad_document_requests_are_refused_with_a_reason() -> None:
    api = client()
    assert api.post("/documents", content=b"{not json").json() == {"error": "the body must be JSON"}
    refused = api.post("/documents", json={"source": "ftp://host/file", "project": "/repo"})
    assert refused.status_code == 400 and "http or https URL" in refused.json()["error"]
    empty = api.post("/documents", json={"content": "   ", "project": "/repo"})
    assert empty.status_code == 400 and empty.json()["error"] == "the document is empty"
    search = api.get("/search", params={"q": "x", "project": "/repo", "documents": "some"})
    assert search.status_code == 400 and "include, exclude, only" in search.json()["error"]
