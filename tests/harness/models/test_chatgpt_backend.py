"""The ChatGPT backend stand-in speaks the wire Codex's ChatGPT route needs: TLS with a CA made for the run, refresh
tokens accepted once and rotated, revocations recorded, and model requests only with a live access token."""

from __future__ import annotations

import http.client
import json
import ssl
from pathlib import Path
from typing import Any

import pytest

from wardian_harness.models.chatgpt_backend import ACCOUNT_ID, CLIENT_ID, MODEL_PREFIX, ChatGPTBackend, make_jwt
from wardian_harness.models.scripted_model import Message, ScriptedModel

pytestmark = pytest.mark.fast


def post(backend: ChatGPTBackend, path: str, body: Any, headers: dict[str, str] | None = None,
         ) -> tuple[int, bytes]:
    context = ssl.create_default_context(cafile=str(backend.ca_path))
    port = int(backend.url.rsplit(":", 1)[1])
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=30)
    try:
        conn.request("POST", path, body=json.dumps(body), headers={"content-type": "application/json",
                                                                   **(headers or {})})
        answer = conn.getresponse()
        return answer.status, answer.read()
    finally:
        conn.close()


def refresh(backend: ChatGPTBackend, token: str) -> tuple[int, dict[str, Any]]:
    status, data = post(backend, "/oauth/token", {"client_id": CLIENT_ID, "grant_type": "refresh_token",
                                                  "refresh_token": token})
    return status, json.loads(data)


def test_a_refresh_token_is_accepted_once_then_rotated(tmp_path: Path) -> None:
    with ScriptedModel() as model, ChatGPTBackend(tmp_path, model) as backend:
        first = backend.login()["tokens"]["refresh_token"]
        status, issued = refresh(backend, first)
        assert status == 200
        assert issued["refresh_token"] != first
        assert set(issued) == {"id_token", "access_token", "refresh_token"}
        assert refresh(backend, first) == (401, {"error": {"code": "refresh_token_reused",
                                                           "message": "the refresh token was already used"},
                                                 "error_description": "the refresh token was already used"})
        assert refresh(backend, "rt-never-issued")[1]["error"]["code"] == "refresh_token_invalidated"
        assert refresh(backend, issued["refresh_token"])[0] == 200
        assert backend.refresh_tokens_used == [first, issued["refresh_token"]]


def test_a_revoked_refresh_token_is_recorded_and_stops_working(tmp_path: Path) -> None:
    with ScriptedModel() as model, ChatGPTBackend(tmp_path, model) as backend:
        token = backend.login()["tokens"]["refresh_token"]
        assert post(backend, "/oauth/revoke", {"token": token, "token_type_hint": "refresh_token"})[0] == 200
        assert [r.body["token"] for r in backend.requests_to("/oauth/revoke")] == [token]
        assert refresh(backend, token)[0] == 401


def test_model_requests_need_a_live_access_token_and_reach_the_agents_script(tmp_path: Path) -> None:
    with ScriptedModel() as model, ChatGPTBackend(tmp_path, model) as backend:
        model.agent("ada", Message("hi from ada", phase="final_answer"))
        access = backend.login()["tokens"]["access_token"]
        body = {"model": f"{MODEL_PREFIX}ada", "input": [], "stream": True}
        ok = {"authorization": f"Bearer {access}", "chatgpt-account-id": ACCOUNT_ID}
        assert post(backend, "/backend-api/codex/responses", body)[0] == 401
        assert post(backend, "/backend-api/codex/responses", body,
                    {"authorization": f"Bearer {make_jwt({'exp': 4102444800})}",
                     "chatgpt-account-id": ACCOUNT_ID})[0] == 401
        status, stream = post(backend, "/backend-api/codex/responses", body, ok)
        assert status == 200
        assert b"hi from ada" in stream
        assert b"response.completed" in stream
        backend.reject_access_tokens()
        assert post(backend, "/backend-api/codex/responses", body, ok)[0] == 401
        expired = backend.login(expired=True)["tokens"]["access_token"]
        assert post(backend, "/backend-api/codex/responses", body,
                    {**ok, "authorization": f"Bearer {expired}"})[0] == 401


def test_the_server_is_trusted_only_through_its_own_ca(tmp_path: Path) -> None:
    with ScriptedModel() as model, ChatGPTBackend(tmp_path, model) as backend:
        port = int(backend.url.rsplit(":", 1)[1])
        conn = http.client.HTTPSConnection("127.0.0.1", port, context=ssl.create_default_context(), timeout=30)
        with pytest.raises(ssl.SSLCertVerificationError):
            conn.request("GET", "/backend-api/wham/accounts/check")
        conn.close()
        assert backend.env()["CODEX_CA_CERTIFICATE"] == str(backend.ca_path)
        assert backend.ca_path.read_text().startswith("-----BEGIN CERTIFICATE-----")
