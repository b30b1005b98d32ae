"""A loopback stand-in for ChatGPT's sign-in and backend, so Codex's ChatGPT route runs offline in tests.

`ChatGPTBackend` is an HTTPS server on 127.0.0.1 (ephemeral port, background threads) with a CA generated for the
run (`ca_path`, given to Codex as `CODEX_CA_CERTIFICATE`). It serves, under any path prefix:
- `POST …/oauth/token` (`CODEX_REFRESH_TOKEN_URL_OVERRIDE`): the refresh grant. Each refresh token is accepted once
  and rotated: the answer carries a new access token, id token and refresh token; a refresh token used again gets
  401 `{"error": {"code": "refresh_token_reused"}}`, an unknown one `refresh_token_invalidated`.
- the sign-in itself, with the server as the issuer (`CODEX_APP_SERVER_LOGIN_ISSUER`, which the app-server's logins
  read): the device code (`…/api/accounts/deviceauth/usercode`, then `…/deviceauth/token` polled until the test
  calls `approve_device_code(user_code)`, as the person entering the code would) and the browser's authorization
  code (`authorization_code()` makes one for the callback), each exchanged once at `…/oauth/token`.
- `POST …/oauth/revoke` (`CODEX_REVOKE_TOKEN_URL_OVERRIDE`): recorded; the refresh token it names stops working.
- the ChatGPT backend Codex calls under `chatgpt_base_url`: `…/wham/accounts/check`, `…/wham/settings/user`, and
  `…/codex/responses`, which needs `Authorization: Bearer <a live access token>` and `chatgpt-account-id`, else
  401; an accepted request is forwarded to the scripted model's Responses endpoint of the agent its `model` names
  (`codex_overrides(agent)` sets it: Codex sends its model requests to the origin's `/backend-api/codex/responses`
  whatever the path of `chatgpt_base_url`, so the model is what tells the agents apart), and its answer is streamed
  back unchanged, so every scripted step works here too. Anything else is answered 404 and recorded.

Tokens are test values that look like the real ones (JWTs whose claims Codex reads without checking a
signature); `login()` makes the `auth.json` of a signed-in Codex home, the way a finished sign-in leaves it.
`reject_access_tokens()` makes every access token issued so far answer 401, as an expired one would.

Invariants: the server binds 127.0.0.1 only; its only outbound connection is to the scripted model on loopback.

The package: `backend` (`ChatGPTBackend`: its state and life), `_http` (the server and its routes) and `account`
(the test account, its tokens and the OAuth error shape).
"""

from wardian_harness.models.chatgpt_backend._http import BackendRequest
from wardian_harness.models.chatgpt_backend.account import (
    ACCOUNT_ID,
    CLIENT_ID,
    EMAIL,
    MODEL_PREFIX,
    PLAN_TYPE,
    make_jwt,
)
from wardian_harness.models.chatgpt_backend.backend import ChatGPTBackend

__all__ = ["ACCOUNT_ID", "CLIENT_ID", "EMAIL", "MODEL_PREFIX", "PLAN_TYPE", "BackendRequest", "ChatGPTBackend",
           "make_jwt"]
