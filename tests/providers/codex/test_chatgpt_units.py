"""The pieces of the ChatGPT route that need no Codex: server requests answered by a handler, and the shared
refresh of the token source."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from tests.providers.codex.test_signin_units import _Pipe
from wardian import errors
from wardian.auth.model import ChatGPTTokens
from wardian.home import Home
from wardian.providers.codex.app_server import AppServerClient
from wardian.providers.codex.chatgpt_owner import OwnerTokens
from wardian_harness.models.chatgpt_backend import make_jwt

pytestmark = pytest.mark.fast


def test_a_handled_server_request_is_answered_in_its_own_task_and_a_refusal_is_an_error() -> None:
    async def main() -> list[dict[str, Any]]:
        answered = anyio.Event()

        class Pipe(_Pipe):
            async def send(self, message: bytes) -> None:
                await super().send(message)
                if len(self.sent) == 2:
                    answered.set()

        pipe = Pipe()
        client = AppServerClient(pipe)
        release = anyio.Event()

        async def slow(params: dict[str, Any]) -> dict[str, Any]:
            await release.wait()
            return {"echo": params["n"]}

        async def refuse(params: dict[str, Any]) -> dict[str, Any]:
            raise errors.NotSignedIn("no session")

        client.handle("slow/ask", slow)
        client.handle("refuse/ask", refuse)
        async with anyio.create_task_group() as tg:
            await tg.start(client.run)
            await pipe.send_in.send(b'{"id":7,"method":"slow/ask","params":{"n":1}}')
            await pipe.send_in.send(b'{"id":8,"method":"refuse/ask","params":{}}')
            # The reader is not held up by the slow answer: a notification after it still arrives.
            await pipe.send_in.send(b'{"method":"after","params":{}}')
            assert (await client.notifications.receive()).method == "after"
            release.set()
            with anyio.fail_after(10):
                await answered.wait()
            await pipe.aclose()
        client.notifications.close()
        return [json.loads(m) for m in pipe.sent]

    sent = sorted(anyio.run(main), key=lambda m: m["id"])
    assert sent == [{"id": 7, "result": {"echo": 1}},
                    {"id": 8, "error": {"code": -32000, "message": "no session"}}]


class _Counting(OwnerTokens):
    """OwnerTokens whose owner only counts (the real owner, a Codex app-server, is tested in test_chatgpt.py)."""

    def __init__(self, tmp_path: Path) -> None:
        super().__init__(Home(tmp_path))
        self.fetched: list[bool] = []

    async def _fetch(self, *, refresh: bool) -> ChatGPTTokens:
        self.fetched.append(refresh)
        await anyio.lowlevel.checkpoint()  # the owner's start, during which the other callers queue
        return ChatGPTTokens(make_jwt({"exp": time.time() + 3600, "n": len(self.fetched)}), "acct")


def test_agents_rejected_together_share_one_refresh_and_a_fresh_token_is_served_from_memory(tmp_path: Path) -> None:
    async def main() -> tuple[_Counting, list[str]]:
        source = _Counting(tmp_path)
        first = await source.tokens(refresh=False)
        assert (await source.tokens(refresh=False)) == first  # fresh: no owner start
        got: list[str] = []

        async def rejected() -> None:
            got.append((await source.tokens(refresh=True)).access_token)

        async with anyio.create_task_group() as tg:
            for _ in range(3):
                tg.start_soon(rejected)
        got.append((await source.tokens(refresh=True)).access_token)  # a straggler of the same wave
        return source, got

    source, got = anyio.run(main)
    assert source.fetched == [False, True]
    assert len(set(got)) == 1
