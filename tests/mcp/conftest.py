"""Fixtures of the MCP contract tests: two managed agents, each with its own `wardian mcp serve` process."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

import pytest

from tests.conftest import AppHandle
from tests.mcp.mcp_harness import McpConnection, mcp_server, server_env


@dataclass
class Peer:
    agent: dict[str, Any]
    mcp: McpConnection

    @property
    def name(self) -> str:
        return str(self.agent["name"])

    @property
    def uuid(self) -> str:
        return str(self.agent["uuid"])

    def drain(self) -> None:
        """Acknowledge everything pending so a test starts from an empty mailbox."""
        page = self.mcp.ok("receive_messages", {"limit": 100})
        while page["records"]:
            page = self.mcp.ok("receive_messages", {"ack_cursor": page["cursor"], "limit": 100})


@dataclass
class Peers:
    app: AppHandle
    alice: Peer
    bob: Peer

    def records(self) -> list[dict[str, Any]]:
        return list(self.app.call("mailbox/records", {"limit": 100_000})["records"])


@pytest.fixture(scope="module")
def peers(shared_app: AppHandle) -> Iterator[Peers]:
    with ExitStack() as stack:
        made = []
        for _ in range(2):
            agent, token = shared_app.add_agent()
            conn = stack.enter_context(mcp_server(server_env(str(shared_app.home.root), token)))
            made.append(Peer(agent, conn))
        yield Peers(shared_app, made[0], made[1])
