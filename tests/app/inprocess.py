"""An app in this process: the real service, writer, signals and provider-neutral runtime on a fresh SQLite home,
with the non-Codex fake provider (`tests/providers/fake_provider.py`) for agents of provider `fake`."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import anyio

from tests.providers.fake_provider import FakeProvider, FakeRuntime
from wardian.app.runtime import Runtime
from wardian.app.service import AppService
from wardian.app.signals import MailboxSignals
from wardian.app.writer import StoreWriter
from wardian.home import Home
from wardian.providers.base import Capabilities
from wardian.store import Store, open_sqlite, roster

T = TypeVar("T")


@dataclass
class World:
    service: AppService
    runtime: Runtime
    store: Store
    provider: FakeProvider
    lead: str  # the lead's session token
    worker_uuid: str

    async def call(self, method: str, **params: Any) -> Any:
        return await self.service.handle(method, params)

    def worker(self) -> FakeRuntime:
        return self.provider.runtimes[-1]

    def runtime_of(self, name: str) -> FakeRuntime:
        return next(r for r in reversed(self.provider.runtimes) if r.spec.name == name)

    async def until(self, predicate: Callable[[], Awaitable[T]], what: str) -> T:
        """Wait (bounded) until `predicate` returns something true, checking after each mailbox signal."""
        with anyio.fail_after(10):
            while True:
                value = await predicate()
                if value:
                    return value
                await anyio.sleep(0.005)
        raise AssertionError(what)


@asynccontextmanager
async def world(capabilities: Capabilities | None = None, lead_provider: str = "codex") -> AsyncIterator[World]:
    """`lead` (provider `lead_provider`, never started unless a test starts it) and `worker` (provider `fake`); the
    world's `lead` is lead's session token."""
    root = Path(tempfile.mkdtemp(prefix="wpb", dir="/tmp"))
    home = Home(root)
    (root / "logs").mkdir()
    (root / "run").mkdir(mode=0o700)
    store = open_sqlite(home.db_path)
    provider = FakeProvider() if capabilities is None else FakeProvider(capabilities=capabilities)
    try:
        lead = roster.add_agent(store, "lead", lead_provider, None)
        worker = roster.add_agent(store, "worker", "fake", None)
        token = roster.create_session(store, lead.id)
        writer = StoreWriter(store)
        signals = MailboxSignals()
        runtime = Runtime(home, writer, signals, providers={"fake": provider})
        async with anyio.create_task_group() as tg:
            await tg.start(writer.run)
            await tg.start(runtime.run)
            service = AppService(home, writer, signals, tg.cancel_scope.cancel, runtime)
            yield World(service, runtime, store, provider, token, worker.uuid)
            for handle in list(runtime.owners.values()):
                await runtime.stop_agent(handle.agent_id)
            writer.close()
            tg.cancel_scope.cancel()
    finally:
        store.close()
        shutil.rmtree(root, ignore_errors=True)
