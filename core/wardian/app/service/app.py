"""The app's operations: validated params in, store operations through the group-commit writer, results out.

Dispatch is `wardian.protocol.methods.METHODS`: each method is served by the one function its resource module
registered for it (`registry.handlers`), which returns that method's declared result type. Attribution is decided in
those functions and only there: every operation acts for the caller its session token resolves to inside the same
store transaction; no parameter can name a sender.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from wardian.app.runtime import Runtime
from wardian.app.service import agents, approvals, mailbox, messages, operator, story, tasks, worktrees
from wardian.app.service.registry import handlers
from wardian.app.signals import MailboxSignals
from wardian.app.writer import StoreWriter
from wardian.home import Home
from wardian.model import now_ms
from wardian.protocol.methods import parse_params

# Each module registers its functions as it is imported; completing the table here makes a method without its
# function fail when the app is imported, not when the method is first called.
_RESOURCES = (agents, approvals, mailbox, messages, operator, story, tasks, worktrees)
HANDLERS = handlers.complete()


class ConsoleLogins(Protocol):
    """What the service needs of the web console, when the app serves one."""

    @property
    def address(self) -> str:
        """The console's base URL (no secret in it)."""
        ...

    def mint_login(self) -> tuple[str, int]:
        """A new one-time login URL and when it expires (Unix ms)."""
        ...


class AppService:
    """What every method's function works with: the home, the store's writer, the mailbox signals and the provider
    runtime (an app without agents to run holds an empty one)."""

    def __init__(self, home: Home, writer: StoreWriter, signals: MailboxSignals,
                 stop: Callable[[], None], runtime: Runtime) -> None:
        self.runtime = runtime
        self.home = home
        self.writer = writer
        self.signals = signals
        self.started_at = now_ms()
        self._stop = stop
        self.stop_requested = False
        self.console: ConsoleLogins | None = None  # set by `app run --console`

    async def handle(self, method: str, raw_params: Any) -> Any:
        """Run one method.

        Raises:
            WardianError: the method's own error, with its code and delivery state.
        """
        params = parse_params(method, raw_params)
        return await HANDLERS[method](self, params)

    def stop(self) -> None:
        self._stop()
