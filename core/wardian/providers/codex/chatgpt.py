"""A Codex agent on wardian's own ChatGPT sign-in: short-lived access tokens over the app-server, never a file.

After `initialize` (which already asks for the experimental API this needs), the agent is logged in with
`account/login/start {type: "chatgptAuthTokens", accessToken, chatgptAccountId, chatgptPlanType}`. Codex keeps that
login in memory, holds no refresh token and so never refreshes by itself: when the backend rejects the token it asks
its client with the server request `account/chatgptAuthTokens/refresh`, which is answered here with a token from
the app's `ChatGPTTokenSource` (wardian's own session, the only process that refreshes). The agent is never sent
`account/logout`: that would revoke the shared session at the server (docs/guide/sign-in.md#chatgpt).
"""

from __future__ import annotations

import logging
from typing import Any

from wardian import errors
from wardian.auth.model import ChatGPTTokens, ChatGPTTokenSource
from wardian.providers.codex.app_server import AppServerClient
from wardian.providers.codex.launch import AppServerSpec

log = logging.getLogger("wardian.codex.chatgpt")

REFRESH_REQUEST = "account/chatgptAuthTokens/refresh"
LOGIN_TIMEOUT_S = 60.0


def _wire(tokens: ChatGPTTokens) -> dict[str, Any]:
    wire: dict[str, Any] = {"accessToken": tokens.access_token, "chatgptAccountId": tokens.account_id}
    if tokens.plan_type is not None:
        wire["chatgptPlanType"] = tokens.plan_type
    return wire


async def _tokens(source: ChatGPTTokenSource, name: str, *, refresh: bool) -> ChatGPTTokens:
    try:
        return await source.tokens(refresh=refresh)
    except errors.NotSignedIn:
        raise errors.NotSignedIn(f"Codex agent {name} is not signed in: wardian's ChatGPT sign-in is missing or "
                                 "has ended; run `wardian auth login codex`", field="auth") from None


async def sign_in(client: AppServerClient, spec: AppServerSpec) -> None:
    """Log a ChatGPT agent in with a token of wardian's session and answer its refresh requests (nothing to do for
    an agent on another credential).

    Raises:
        NotSignedIn: wardian has no ChatGPT session. AppServerError: Codex refused the login.
    """
    source = spec.chatgpt
    if source is None:
        return
    name = spec.name

    async def refresh(params: dict[str, Any]) -> dict[str, Any]:
        log.info("%s: Codex asked for a new ChatGPT access token (%s)", name, params.get("reason"))
        return _wire(await _tokens(source, name, refresh=True))

    client.handle(REFRESH_REQUEST, refresh)
    tokens = await _tokens(source, name, refresh=False)
    await client.request("account/login/start", {"type": "chatgptAuthTokens", **_wire(tokens)},
                         timeout_s=LOGIN_TIMEOUT_S)
    log.info("%s: signed in with wardian's ChatGPT session", name)
