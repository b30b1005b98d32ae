"""The scripted model's per-agent required key, seen by a plain HTTP client in both dialects: a request without the
exact key is a 401 in its dialect's error form that consumes no step, and the log keeps only a fingerprint."""

from __future__ import annotations

import http.client
import json
from typing import Any
from urllib.parse import urlsplit

import pytest

from wardian_harness.models.scripted_model import AgentScript, Message, ScriptedModel, key_fingerprint

pytestmark = pytest.mark.fast

RESPONSES = {"model": "m", "stream": True, "input": [
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}]}
CHAT = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
KEY_A = "sk-test-alpha-0123456789"
KEY_B = "sk-test-bravo-9876543210"


def post(model: ScriptedModel, agent: AgentScript, headers: dict[str, str], *, chat: bool = False,
         method: str = "POST") -> tuple[int, bytes]:
    parts = urlsplit(model.url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    try:
        path = urlsplit(agent.base_url).path + ("/chat/completions" if chat else "/responses")
        body = json.dumps(CHAT if chat else RESPONSES).encode() if method == "POST" else None
        conn.request(method, path, body=body, headers={"Content-Type": "application/json", **headers})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


@pytest.mark.parametrize("chat", [False, True], ids=["responses", "chat"])
def test_a_request_without_the_exact_key_is_a_401_and_consumes_no_step(chat: bool) -> None:
    with ScriptedModel() as model:
        alice = model.agent("alice", Message("only for the right key")).require_key(KEY_A)
        statuses = [post(model, alice, h, chat=chat)[0] for h in (
            {}, {"Authorization": f"Bearer {KEY_B}"}, {"Authorization": f"Bearer {KEY_A}x"},
            {"Authorization": KEY_A}, {"x-api-key": KEY_B})]
        assert statuses == [401] * 5
        assert alice.pending == 1
        ok, body = post(model, alice, {"Authorization": f"Bearer {KEY_A}"}, chat=chat)
    assert ok == 200
    assert b"only for the right key" in body
    assert [r.unauthorized for r in alice.requests] == [True] * 5 + [False]
    assert len(alice.unauthorized_requests) == 5
    assert alice.requests[-1].carried(KEY_A)
    assert [r.key for r in alice.requests] == [None, key_fingerprint(KEY_B), key_fingerprint(KEY_A + "x"), None,
                                               key_fingerprint(KEY_B), key_fingerprint(KEY_A)]


def test_the_401_is_the_dialects_json_error_and_names_no_key() -> None:
    with ScriptedModel() as model:
        alice = model.agent("alice").require_key(KEY_A)
        status, body = post(model, alice, {"Authorization": f"Bearer {KEY_B}"})
    assert status == 401
    error: dict[str, Any] = json.loads(body)["error"]
    assert "requires its own API key" in error["message"]
    assert KEY_A not in body.decode()
    assert KEY_B not in body.decode()


def test_x_api_key_is_accepted_like_a_bearer_and_neither_header_is_kept() -> None:
    with ScriptedModel() as model:
        alice = model.agent("alice", Message("one"), Message("two")).require_key(KEY_A)
        assert post(model, alice, {"x-api-key": KEY_A})[0] == 200
        assert post(model, alice, {"Authorization": f"Bearer {KEY_B}", "x-api-key": KEY_A})[0] == 200
    for request in alice.requests:
        assert request.carried(KEY_A)
        assert "x-api-key" not in request.headers
        assert "authorization" not in request.headers
        assert KEY_A not in repr(request)
        assert KEY_B not in repr(request)
    assert KEY_A not in repr(alice.required_key)


def test_two_agents_each_need_their_own_key_and_none_means_any() -> None:
    with ScriptedModel() as model:
        alice = model.agent("alice", Message("a")).require_key(KEY_A)
        bob = model.agent("bob", Message("b"), Message("b2")).require_key(KEY_B)
        carol = model.agent("carol", Message("c"))
        assert post(model, alice, {"Authorization": f"Bearer {KEY_B}"})[0] == 401
        assert post(model, bob, {"Authorization": f"Bearer {KEY_B}"})[0] == 200
        assert post(model, carol, {})[0] == 200
        bob.require_key(None)
        assert post(model, bob, {})[0] == 200
    assert [r.unauthorized for r in alice.requests] == [True]
    assert [r.carried(KEY_B) for r in bob.requests] == [True, False]
    assert carol.requests[0].key is None


def test_a_websocket_upgrade_is_refused_with_426_and_is_no_error() -> None:
    with ScriptedModel() as model:
        alice = model.agent("alice")
        status, _ = post(model, alice, {"Upgrade": "websocket", "Connection": "Upgrade"}, method="GET")
    assert status == 426
    assert alice.requests == []
