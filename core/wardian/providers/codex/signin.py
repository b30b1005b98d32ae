"""Codex sign-in: an agent's API key reaches its app-server in memory only, a start that is not signed in is
refused, and a turn whose credentials the model provider rejects ends at once (docs/providers/codex.md#sign-in).

- Delivery (`prepare_home`, `sign_in`). With a Codex API-key credential the agent's `config.toml` gets
  `cli_auth_credentials_store = "ephemeral"`: Codex keeps its login in process memory only (no `auth.json`, no
  keyring). After `initialize` the runtime sends `account/login/start {type: "apiKey", apiKey}` and waits, bounded,
  for its answer and `account/login/completed`. The key travels in that one request only: never in the
  environment, the command line, a file under the agent's folder or a log, and Codex's answers are scrubbed of it
  before they become an error. The app-server ignores `OPENAI_API_KEY` and `CODEX_API_KEY`, so this is the only
  way in. wardian never sends `account/logout` to an agent: for a ChatGPT login, Codex's logout revokes the
  refresh token at the server.
- The check before a start delivers anything (`require_signed_in`). `config/read` names the effective model
  provider (config.toml, the agent's `-c` settings, profiles). A provider with an `env_key` sends that variable
  as its key, so it must be set, and not blank (Codex treats a blank one as missing), in the environment the
  app-server got. Any other provider that needs OpenAI auth (`account/read`: `requiresOpenaiAuth`) must show an
  account. Otherwise the start is refused with `NotSignedIn`, naming the fix.
- During a turn (`RejectedTurns`). Codex retries a 401 five times, with backoff, before it fails the turn. The first
  `error` notification that says the credentials were rejected (`codexErrorInfo` `responseStreamDisconnected` or
  `httpConnectionFailed` with `httpStatusCode: 401`, or `unauthorized`: a ChatGPT token that could not be
  refreshed) marks the turn: the runtime interrupts it, and its outcome is FAILED with `credentials_rejected`,
  whatever status Codex then reports it ended with.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import suppress
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import pydantic
import tomlkit
import tomlkit.exceptions
from anyio.streams.memory import MemoryObjectSendStream

from wardian import errors
from wardian.auth.model import Credential, CredentialKind
from wardian.providers.base import OutcomeStatus, TurnOutcome
from wardian.providers.codex.app_server import AppServerClient
from wardian.providers.mcp_command import write_private

log = logging.getLogger("wardian.codex.signin")

STORE_KEY = "cli_auth_credentials_store"
EPHEMERAL = "ephemeral"
LOGIN_TIMEOUT_S = 60.0
CHECK_TIMEOUT_S = 60.0
METHOD_NOT_FOUND = -32601
FIX = ("run `wardian auth login codex --with-api-key` (the key on stdin; `wardian auth login codex` for a ChatGPT "
       "sign-in), then start the agent again")
REJECTED_STATUSES = frozenset({401})
INTERRUPT_BUFFER = 64


def api_key(credentials: Sequence[Credential]) -> Credential | None:
    """The agent's Codex API key among its credentials, if it has one."""
    return next((c for c in credentials if c.provider == "codex" and c.kind is CredentialKind.API_KEY), None)


def scrub(text: str, secret: str) -> str:
    """`text` with every occurrence of `secret` masked (Codex's words may quote what they were given)."""
    return text.replace(secret, "…") if secret else text


# --- delivery --------------------------------------------------------------------------------------------------


def prepare_home(codex_home: Path, credentials: Sequence[Credential]) -> None:
    """Keep the agent's Codex login in its process's memory (`cli_auth_credentials_store = "ephemeral"` in its
    `config.toml`) when it signs in with an API key; without one the file is left as it is.

    Raises:
        InvalidArguments: the agent's config.toml is not valid TOML (nothing was changed).
    """
    if api_key(credentials) is None:
        return
    path = codex_home / "config.toml"
    try:
        doc = tomlkit.parse(path.read_text(encoding="utf-8")) if path.exists() else tomlkit.document()
    except tomlkit.exceptions.ParseError as exc:
        raise errors.InvalidArguments(f"{path} is not valid TOML ({exc}); fix it first, nothing was changed",
                                      field="codex_home") from None
    if doc.get(STORE_KEY) == EPHEMERAL:
        return
    doc[STORE_KEY] = EPHEMERAL  # a top-level key: tomlkit places it before the file's tables
    write_private(path, tomlkit.dumps(doc))


async def sign_in(client: AppServerClient, credentials: Sequence[Credential], *, agent: str,
                  timeout_s: float = LOGIN_TIMEOUT_S) -> None:
    """Log the agent's app-server in with its API key (nothing to do without one), once `initialize` is done.

    Raises:
        NotSignedIn: Codex refused the login (its words, without the key).
        ProviderUnavailable: Codex did not confirm it in time, or the connection ended.
    """
    credential = api_key(credentials)
    if credential is None:
        return
    with client.expect("account/login/completed") as completed:
        try:
            await client.request("account/login/start", {"type": "apiKey", "apiKey": credential.secret},
                                 timeout_s=timeout_s)
        except errors.AppServerError as exc:
            raise errors.NotSignedIn(f"Codex agent {agent} could not be signed in with its API key "
                                     f"({credential.name}, {credential.mask()}): Codex answered "
                                     f"{scrub(exc.message, credential.secret)!r}", field="auth") from None
        except errors.DeliveryUncertain:
            raise errors.ProviderUnavailable(f"Codex did not answer the sign-in of agent {agent} within "
                                             f"{timeout_s:g} s; nothing was started") from None
        note = await completed.wait(timeout_s)
    if note is None:
        raise errors.ProviderUnavailable(f"Codex did not confirm the sign-in of agent {agent} within {timeout_s:g} s;"
                                         " nothing was started")
    if note.params.get("success") is not True:
        words = scrub(str(note.params.get("error") or "no reason given"), credential.secret)
        raise errors.NotSignedIn(f"Codex agent {agent} could not be signed in with its API key ({credential.name}, "
                                 f"{credential.mask()}): {words}", field="auth")
    log.info("%s: signed in with API key %s (%s)", agent, credential.name, credential.mask())


# --- the check before a start ----------------------------------------------------------------------------------


class _Provider(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="ignore")
    env_key: str | None = None
    env_key_instructions: str | None = None


class _Config(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="ignore")
    model_provider: str | None = None
    model_providers: dict[str, _Provider] | None = None  # only the configured ones (the built-in openai is not)


class _ConfigRead(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="ignore")
    config: _Config


class _Account(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="ignore", populate_by_name=True)
    account: dict[str, Any] | None = None
    requires_openai_auth: bool = pydantic.Field(False, alias="requiresOpenaiAuth")


async def _read(client: AppServerClient, method: str, params: dict[str, Any], model: type[pydantic.BaseModel],
                *, agent: str, timeout_s: float) -> Any:
    """`method`'s answer as `model`; None when this Codex has no such method (the check is then skipped).

    Raises:
        ProviderError: Codex answered with another error, or with something wardian cannot read.
        DeliveryUncertain: no answer in time.
    """
    try:
        raw = await client.request(method, params, timeout_s=timeout_s)
    except errors.AppServerError as exc:
        if exc.details.get("rpc_code") != METHOD_NOT_FOUND:
            raise
        log.warning("%s: this Codex has no %s; its sign-in is not checked before the start", agent, method)
        return None
    try:
        return model.model_validate(raw if raw is not None else {})
    except pydantic.ValidationError as exc:
        raise errors.ProviderError(f"Codex answered {method} with a result wardian cannot read "
                                   f"({exc.error_count()} problems)", method=method) from None


async def require_signed_in(client: AppServerClient, *, agent: str, env: Mapping[str, str], cwd: Path,
                            timeout_s: float = CHECK_TIMEOUT_S) -> None:
    """Refuse the start unless the agent's model provider has what it needs to sign its requests.

    Raises:
        NotSignedIn: the provider's `env_key` variable is missing or blank in `env`, or Codex shows no account
            while the provider requires OpenAI auth.
        ProviderError, DeliveryUncertain: Codex could not be asked.
    """
    config = await _read(client, "config/read", {"cwd": str(cwd)}, _ConfigRead, agent=agent, timeout_s=timeout_s)
    provider_id = (config.config.model_provider if config is not None else None) or "openai"
    provider = (config.config.model_providers or {}).get(provider_id) if config is not None else None
    if provider is not None and provider.env_key:
        if not env.get(provider.env_key, "").strip():
            hint = f" ({provider.env_key_instructions})" if provider.env_key_instructions else ""
            raise errors.NotSignedIn(
                f"Codex agent {agent} is not signed in: its model provider {provider_id!r} sends the key in the "
                f"environment variable {provider.env_key}, which is not set in the environment the app starts "
                f"agents with{hint}; set it before `wardian app start`, then start the agent again", field="auth",
                variable=provider.env_key)
        return
    account = await _read(client, "account/read", {}, _Account, agent=agent, timeout_s=timeout_s)
    if account is not None and account.account is None and account.requires_openai_auth:
        raise errors.NotSignedIn(f"Codex agent {agent} is not signed in: {FIX}", field="auth")


# --- during a turn ---------------------------------------------------------------------------------------------


def rejection(params: Mapping[str, Any]) -> str | None:
    """The provider's words when an `error` notification says the agent's credentials were rejected, else None."""
    error = params.get("error")
    if not isinstance(error, dict):
        return None
    info = error.get("codexErrorInfo")
    rejected = info == "unauthorized"
    if isinstance(info, dict):
        for key in ("responseStreamDisconnected", "httpConnectionFailed"):
            detail = info.get(key)
            if isinstance(detail, dict) and detail.get("httpStatusCode") in REJECTED_STATUSES:
                rejected = True
    if not rejected:
        return None
    words = error.get("additionalDetails") or error.get("message")
    return str(words) if words else "the model provider answered 401 Unauthorized"


class RejectedTurns:
    """The turns whose credentials the provider rejected: each is interrupted once (`interrupting` runs the
    interrupts, so the reader that observed the rejection never waits on Codex), and ends FAILED with
    `credentials_rejected` and the provider's words (scrubbed of the agent's key)."""

    def __init__(self, credentials: Sequence[Credential], *, agent: str = "") -> None:
        self._agent = agent
        credential = api_key(credentials)
        self._secret = credential.secret if credential is not None else ""
        self._words: dict[str, str] = {}
        self._send: MemoryObjectSendStream[str] | None = None  # while `interrupting` runs

    def observed(self, params: Mapping[str, Any], active_turn_id: str | None) -> None:
        """An `error` notification: a turn it newly says had its credentials rejected is marked and interrupted."""
        words = rejection(params)
        turn_id = params.get("turnId") or active_turn_id
        if words is None or not isinstance(turn_id, str) or turn_id in self._words:
            return
        self._words[turn_id] = scrub(words, self._secret)
        log.warning("%s: the model provider rejected the agent's credentials in turn %s; the turn is ended now",
                    self._agent, turn_id)
        if self._send is not None:
            with suppress(anyio.WouldBlock, anyio.ClosedResourceError):  # more than a conversation could have
                self._send.send_nowait(turn_id)

    async def interrupting(self, interrupt: Callable[[str], Awaitable[None]]) -> None:
        """Interrupt each marked turn (a turn that has already ended is no error); runs until cancelled."""
        send, receive = anyio.create_memory_object_stream[str](INTERRUPT_BUFFER)
        self._send = send
        with send, receive:
            async for turn_id in receive:
                try:
                    await interrupt(turn_id)
                except errors.WardianError as exc:
                    log.info("%s: turn %s was not interrupted (%s); it ends on its own", self._agent, turn_id,
                             exc.message)

    def outcome(self, outcome: TurnOutcome) -> TurnOutcome:
        """The outcome of an ended turn, FAILED with `credentials_rejected` if its credentials were rejected."""
        words = self._words.pop(outcome.turn_id, None)
        if words is None:
            return outcome
        return replace(outcome, status=OutcomeStatus.FAILED, final_text=None, error=words, credentials_rejected=True)
