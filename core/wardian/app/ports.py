"""What the app needs of the edges that plug into it. The app imports no edge: the CLI builds them and passes them in,
so an app started without a web console never loads the console's libraries."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import anyio.abc

    from wardian.app.service import AppService
    from wardian.app.signals import ChangeFeed


class WebConsole(Protocol):
    """A web console bound to its port, serving the app's service."""

    @property
    def address(self) -> str:
        """The console's base URL (no secret in it)."""
        ...

    def mint_login(self) -> tuple[str, int]:
        """A new one-time login URL and when it expires (Unix ms)."""
        ...

    async def run(self, *, task_status: anyio.abc.TaskStatus[None] = ...) -> None:
        """Serve until `stop`; reports started once its socket accepts connections."""
        ...

    async def stop(self) -> None:
        """Stop serving; returns once the server has shut down (bounded)."""
        ...


class ConsoleSetup(Protocol):
    """The web console an app was asked to serve, not built yet: its address is checked before anything of the home
    changes, and it is built once the service it serves exists."""

    def check(self) -> None:
        """Raises: InvalidArguments (the address is not a loopback address)."""
        ...

    def __call__(self, service: AppService, feed: ChangeFeed) -> WebConsole:
        """Build the console; it binds its port now, so a taken port fails the start.

        Raises: AddressInUse.
        """
        ...
