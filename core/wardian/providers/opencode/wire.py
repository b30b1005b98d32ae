"""The HTTP side of one `opencode serve`: requests with the agent's credentials, and messages sent under an id
wardian chose, so an answer that was lost is settled by looking the message up, never by sending it again.

A request that could not be sent, or that OpenCode refused with 401, certainly did not reach it (`NotSent`); one
that left and whose answer did not come has an unknown outcome (`DeliveryUncertain`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Container
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import anyio
import httpx2

from wardian import errors
from wardian.providers.opencode.launch import basic_auth

log = logging.getLogger("wardian.opencode")

REQUEST_TIMEOUT_S = 30.0
# A message whose answer was lost is looked up after each of these pauses (seconds, ~4.3 s in all): OpenCode may
# answer before the message is readable, so one 404 right away does not prove it never arrived.
LOOKUP_PAUSES_S = (0.0, 0.25, 1.0, 3.0)


class NotSent(Exception):
    """The request certainly did not reach OpenCode (no connection, or refused by its auth)."""


class ServeClient:
    """Requests to one serve at `url`. `on_refused` is called once OpenCode refuses the credentials (401): the
    runtime cannot go on with a serve that does not know its password."""

    def __init__(self, name: str, url: str, password_path: Path, on_refused: Callable[[], None]) -> None:
        self.name = name
        self._password_path = password_path
        self._on_refused = on_refused
        self.failed_auth = False
        self._client = httpx2.AsyncClient(base_url=url, auth=httpx2.FunctionAuth(self._auth),
                                          timeout=REQUEST_TIMEOUT_S)

    def _auth(self, request: httpx2.Request) -> httpx2.Request:
        # Read at each request from its 0600 file (never logged): the password `serve` was started with.
        request.headers["Authorization"] = basic_auth(self._password_path)
        return request

    async def aclose(self) -> None:
        await self._client.aclose()

    def events(self) -> AbstractAsyncContextManager[httpx2.Response]:
        """The `/event` stream (no read timeout: it is quiet while nothing happens)."""
        return self._client.stream("GET", "/event", timeout=httpx2.Timeout(None, connect=10))

    async def request(self, method: str, path: str, **kw: Any) -> httpx2.Response:
        """One request. Raises: NotSent (no connection; or 401: OpenCode refused our credentials), DeliveryUncertain
        (it left, its answer did not come)."""
        try:
            response = await self._client.request(method, path, **kw)
        except (httpx2.ConnectError, httpx2.ConnectTimeout, httpx2.PoolTimeout) as exc:
            raise NotSent(type(exc).__name__) from None
        except httpx2.HTTPError as exc:
            raise errors.DeliveryUncertain(f"OpenCode did not answer {method} {path} ({type(exc).__name__}); its "
                                           "outcome is unknown", method=path) from None
        if response.status_code == 401:
            self.failed_auth = True
            log.error("OpenCode of %s refused this app's credentials (401); ending the runtime", self.name)
            self._on_refused()
            raise NotSent("401")
        return response

    async def post_named(self, path: str, body: dict[str, Any], mid: str, *, expect: int, session_id: str,
                         seen: Container[str]) -> str | None:
        """POST a message we named `mid`, which OpenCode then has. An answer lost or unexpected is settled by looking
        the message up (never by sending it again; `seen`: the user messages `/event` announced): found, the return
        value says why the answer was lost (None: it was answered as expected).

        Raises:
            NotSent, DeliveryUncertain (`looked_up`: the message was not found).
        """
        try:
            response = await self.request("POST", path, json=body)
            if response.status_code == expect:
                return None
            why = f"OpenCode answered {response.status_code}: {response.text[:200]}"
        except errors.DeliveryUncertain as exc:
            why = exc.message
        for pause in LOOKUP_PAUSES_S:
            await anyio.sleep(pause)
            if mid in seen:
                status = 200  # OpenCode announced it on /event
            else:
                try:
                    status = (await self.request("GET", f"/session/{session_id}/message/{mid}")).status_code
                except (NotSent, errors.DeliveryUncertain) as exc:
                    # The request may have left: whatever stops the lookup, the delivery stays uncertain.
                    raise errors.DeliveryUncertain(f"{why}; looking message {mid} up failed too ({exc}): never "
                                                   "resent", provider_message_id=mid) from None
            if status == 200:
                log.warning("%s: message %s was found after %s; its delivery is confirmed", self.name, mid, why)
                return why
            if status != 404:
                raise errors.DeliveryUncertain(f"{why}; looking message {mid} up answered {status}: never resent",
                                               provider_message_id=mid)
        raise errors.DeliveryUncertain(f"{why}; message {mid} was not found in {sum(LOOKUP_PAUSES_S):g} s of lookups "
                                       "(it may still arrive): never resent", provider_message_id=mid, looked_up=True)
