"""The pure parts of Codex sign-in (`wardian.providers.codex.signin`): which `error` notifications are a rejection
of the agent's credentials, the outcome of a rejected turn, the agent's config.toml, and the client's wait for one
notification. The wire shapes are Codex 0.171.0's, as the real binary sends them (test_signin.py drives it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from wardian import errors
from wardian.auth.model import Credential, CredentialKind
from wardian.providers.base import OutcomeStatus, TurnOutcome
from wardian.providers.codex import signin
from wardian.providers.codex.app_server import AppServerClient

pytestmark = pytest.mark.fast

KEY = "sk-test-units-77aa88bb99cc00dd"
CREDENTIALS = (Credential(provider="codex", name="work", kind=CredentialKind.API_KEY, secret=KEY),)


def error_note(info: Any, *, details: str | None = "unexpected status 401 Unauthorized: Incorrect API key",
               message: str = "Reconnecting... 1/5", turn: str | None = "turn-1") -> dict[str, Any]:
    return {"error": {"message": message, "codexErrorInfo": info, "additionalDetails": details},
            "willRetry": True, "threadId": "thread-1", "turnId": turn}


@pytest.mark.parametrize("info", [
    {"responseStreamDisconnected": {"httpStatusCode": 401}},
    {"httpConnectionFailed": {"httpStatusCode": 401}},
    "unauthorized",
])
def test_a_401_or_an_unauthorized_error_is_a_rejection_with_the_providers_words(info: Any) -> None:
    assert signin.rejection(error_note(info)) == "unexpected status 401 Unauthorized: Incorrect API key"
    assert signin.rejection(error_note(info, details=None, message="refresh token was already used")) == (
        "refresh token was already used")


@pytest.mark.parametrize("info", [
    {"responseStreamDisconnected": {"httpStatusCode": 500}},
    {"httpConnectionFailed": {"httpStatusCode": 403}},
    {"responseStreamDisconnected": {"httpStatusCode": None}},
    "internalServerError", "other", None, {"unexpected": 401},
])
def test_other_errors_are_not_a_rejection(info: Any) -> None:
    assert signin.rejection(error_note(info)) is None


def test_a_notification_without_an_error_object_is_not_a_rejection() -> None:
    assert signin.rejection({"error": "text"}) is None
    assert signin.rejection({}) is None


def test_a_rejected_turn_is_marked_once_and_its_outcome_is_failed_and_scrubbed_of_the_key() -> None:
    turns = signin.RejectedTurns(CREDENTIALS)
    note = error_note({"httpConnectionFailed": {"httpStatusCode": 401}}, details=f"the key {KEY} is wrong")
    turns.observed(note, None)
    turns.observed(note, None)  # the second 401 of the same turn changes nothing
    outcome = turns.outcome(TurnOutcome("turn-1", OutcomeStatus.INTERRUPTED))
    assert outcome == TurnOutcome("turn-1", OutcomeStatus.FAILED, None, "the key … is wrong", True)
    # Once ended, the turn is forgotten; other turns are untouched.
    assert turns.outcome(TurnOutcome("turn-1", OutcomeStatus.DONE, "x")) == TurnOutcome("turn-1", OutcomeStatus.DONE,
                                                                                         "x")


def test_a_rejection_without_a_turn_id_marks_the_active_turn() -> None:
    turns = signin.RejectedTurns(())
    turns.observed(error_note("unauthorized", turn=None), "turn-7")
    assert turns.outcome(TurnOutcome("turn-7", OutcomeStatus.FAILED, error="x")).credentials_rejected
    turns.observed(error_note("unauthorized", turn=None), None)  # no turn at all: nothing to mark


def test_each_marked_turn_is_interrupted_once_and_a_failed_interrupt_is_no_error() -> None:
    turns = signin.RejectedTurns(CREDENTIALS)
    interrupted: list[str] = []

    async def interrupt(turn_id: str) -> None:
        interrupted.append(turn_id)
        if turn_id == "turn-2":
            raise errors.NotActive("turn turn-2 is no longer active", field="target")

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(turns.interrupting, interrupt)
            await anyio.wait_all_tasks_blocked()
            for turn in ("turn-1", "turn-2", "turn-1", "turn-3"):
                turns.observed(error_note("unauthorized", turn=turn), None)
            with anyio.fail_after(10):
                while len(interrupted) < 3:
                    await anyio.wait_all_tasks_blocked()
            tg.cancel_scope.cancel()

    anyio.run(main)
    assert interrupted == ["turn-1", "turn-2", "turn-3"]


def test_only_a_codex_api_key_is_signed_in_with() -> None:
    others = (Credential(provider="claude", name="default", kind=CredentialKind.API_KEY, secret="x" * 20),
              Credential(provider="codex", name="default", kind=CredentialKind.CHATGPT, secret=""))
    assert signin.api_key(others) is None
    assert signin.api_key((*others, *CREDENTIALS)) == CREDENTIALS[0]


def test_prepare_home_sets_the_ephemeral_store_and_keeps_the_rest(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('# mine\nmodel = "x"\ncli_auth_credentials_store = "file"\n\n[mcp_servers.wardian]\n'
                      'command = "wardian"\n', encoding="utf-8")
    config.chmod(0o600)
    signin.prepare_home(tmp_path, CREDENTIALS)
    text = config.read_text(encoding="utf-8")
    assert text.startswith('# mine\nmodel = "x"\ncli_auth_credentials_store = "ephemeral"\n')
    assert '[mcp_servers.wardian]\ncommand = "wardian"\n' in text
    assert KEY not in text
    assert config.stat().st_mode & 0o777 == 0o600


def test_prepare_home_without_a_key_changes_nothing(tmp_path: Path) -> None:
    signin.prepare_home(tmp_path, ())
    assert not (tmp_path / "config.toml").exists()


def test_prepare_home_refuses_an_unreadable_config_and_changes_nothing(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text("model = [unclosed\n", encoding="utf-8")
    with pytest.raises(errors.InvalidArguments, match="is not valid TOML"):
        signin.prepare_home(tmp_path, CREDENTIALS)
    assert config.read_text(encoding="utf-8") == "model = [unclosed\n"


class _Pipe:
    """A message stream fed by the test: what the app-server would send."""

    def __init__(self) -> None:
        self.send_in, self.receive_in = anyio.create_memory_object_stream[bytes](10)
        self.sent: list[bytes] = []

    async def send(self, message: bytes) -> None:
        self.sent.append(message)

    async def receive(self) -> bytes:
        return await self.receive_in.receive()

    async def aclose(self) -> None:
        self.send_in.close()
        self.receive_in.close()


def test_expect_catches_a_notification_that_comes_before_the_answer_and_still_forwards_it() -> None:
    seen: list[Any] = []

    async def main() -> None:
        pipe = _Pipe()
        client = AppServerClient(pipe)
        async with anyio.create_task_group() as tg:
            await tg.start(client.run)
            with client.expect("account/login/completed") as completed:
                await pipe.send_in.send(b'{"method":"account/login/completed","params":{"success":true}}')
                seen.append(await completed.wait(10))
            seen.append(await client.notifications.receive())
            with client.expect("account/login/completed") as late:
                await pipe.aclose()  # the connection ends: the wait returns at once, with nothing
                seen.append(await late.wait(10))
        client.notifications.close()

    anyio.run(main)
    note, forwarded, ended = seen
    assert note.params == {"success": True}
    assert forwarded == note
    assert ended is None


def test_the_codex_provider_never_sends_account_logout() -> None:
    """An agent's `account/logout` would revoke a ChatGPT login at the server: no request of the provider names it but
    `wardian auth logout codex`'s, which signs out wardian's own session in the home's owner app-server, no agent."""
    package = Path(signin.__file__).parent
    sent = [p.name for p in package.glob("*.py") if '"account/logout"' in p.read_text(encoding="utf-8")]
    assert sent == ["chatgpt_login.py"]


class _Answers:
    """Codex's answers to the start check's requests, as a stand-in client (the real ones: test_signin.py)."""

    def __init__(self, **answers: Any) -> None:
        self.answers = answers
        self.asked: list[str] = []

    async def request(self, method: str, params: dict[str, Any], timeout_s: float = 30) -> Any:
        self.asked.append(method)
        answer = self.answers[method.replace("/", "_")]
        if isinstance(answer, errors.AppServerError):
            raise answer
        return answer


def check(client: _Answers, env: dict[str, str] | None = None) -> None:
    anyio.run(lambda: signin.require_signed_in(client, agent="lead", env=env or {}, cwd=Path("/w")))  # type: ignore[arg-type]


NO_ACCOUNT = {"account": None, "requiresOpenaiAuth": True}


def test_no_configured_providers_means_the_built_in_one_which_needs_an_account() -> None:
    for config in ({"model_provider": None, "model_providers": None}, {"model_provider": "openai"}):
        client = _Answers(config_read={"config": config}, account_read=NO_ACCOUNT)
        with pytest.raises(errors.NotSignedIn, match="Codex agent lead is not signed in"):
            check(client)
        assert client.asked == ["config/read", "account/read"]
    check(_Answers(config_read={"config": {}}, account_read={"account": {"type": "apiKey"},
                                                             "requiresOpenaiAuth": True}))


def test_an_env_key_provider_needs_its_variable_and_no_account() -> None:
    config = {"config": {"model_provider": "x", "model_providers": {"x": {
        "env_key": "X_KEY", "env_key_instructions": "get one at example.test"}}}}
    with pytest.raises(errors.NotSignedIn, match=r"X_KEY, .*\(get one at example.test\)"):
        check(_Answers(config_read=config))
    client = _Answers(config_read=config)
    check(client, {"X_KEY": "set"})
    assert client.asked == ["config/read"]


def test_a_codex_without_the_methods_is_not_checked_and_other_errors_are_raised() -> None:
    missing = errors.AppServerError("method not found", rpc_code=-32601)
    check(_Answers(config_read=missing, account_read=missing))
    with pytest.raises(errors.AppServerError):
        check(_Answers(config_read=errors.AppServerError("boom", rpc_code=-32603)))
    with pytest.raises(errors.ProviderError, match="cannot read"):
        check(_Answers(config_read={"config": {"model_providers": {"x": "not a table"}}}))
