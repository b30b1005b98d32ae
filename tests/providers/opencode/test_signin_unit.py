"""The OpenCode sign-in rules without a serve (docs/providers/opencode.md#sign-in): which credentials an agent may be
given, what is injected, when a start is refused, which turn errors mean the credentials were rejected, and what is
left of an `auth.json`."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from wardian import errors
from wardian.auth.model import Credential, CredentialKind
from wardian.providers.base import OutcomeStatus
from wardian.providers.opencode import signin
from wardian.providers.opencode.session import outcome_of

pytestmark = pytest.mark.fast  # the fast tier (scripts/check test-fast)

SECRET = "sk-unit-key-1234567890"


def oc(pid: str | None, secret: str = SECRET, name: str = "default") -> Credential:
    return Credential("opencode", name, CredentialKind.API_KEY, secret, pid)


def test_the_injected_map_is_opencodes_auth_shape_one_entry_per_provider_id() -> None:
    keys = signin.api_keys("a", [oc("openai", "sk-openai-0001"), oc("mine", "sk-mine-0002")])
    assert json.loads(signin.auth_content(keys)) == {"mine": {"type": "api", "key": "sk-mine-0002"},
                                                     "openai": {"type": "api", "key": "sk-openai-0001"}}
    assert signin.api_keys("a", []) == {}


@pytest.mark.parametrize(("credential", "said"), [
    (Credential("codex", "default", CredentialKind.API_KEY, SECRET), "was given a codex api_key credential"),
    (Credential("opencode", "default", CredentialKind.OAUTH_TOKEN, SECRET, "anthropic"),
     "was given a opencode oauth_token credential"),
    (oc(None), "names no OpenCode provider id"),
])
def test_a_credential_opencode_cannot_take_is_refused_without_its_secret(credential: Credential, said: str) -> None:
    with pytest.raises(errors.InvalidArguments) as refused:
        signin.api_keys("a", [credential])
    assert said in refused.value.message
    assert SECRET not in str(refused.value.to_data())


def test_two_keys_for_one_provider_id_are_refused() -> None:
    with pytest.raises(errors.InvalidArguments, match="two keys for provider openai"):
        signin.api_keys("a", [oc("openai", name="x"), oc("openai", "sk-other-key-000", name="y")])


@pytest.mark.parametrize(("model", "declared", "connected"), [
    (None, (), []),  # OpenCode chooses the model: nothing to check
    ("no-slash", (), []),
    ("openai/gpt-5", (), ["opencode", "openai"]),
    ("mine/model", ("mine",), ["opencode"]),  # declared: its turn says whether its key works
])
def test_a_start_goes_on_when_the_models_provider_may_have_a_key(model: Any, declared: tuple[str, ...],
                                                                   connected: list[str]) -> None:
    signin.check_connected("a", model, declared, connected, {})


def test_a_start_is_refused_when_the_models_provider_is_neither_declared_nor_connected() -> None:
    with pytest.raises(errors.NotSignedIn) as refused:
        signin.check_connected("a", "anthropic/claude", ("mine",), ["opencode", "openai"], {})
    assert refused.value.message == ("OpenCode agent a has no key for provider anthropic: run `wardian auth login "
                                     "opencode --provider anthropic --with-api-key`")
    assert refused.value.code == "not_signed_in"
    with pytest.raises(errors.NotSignedIn, match=r"--with-api-key --name work`$"):
        signin.check_connected("a", "anthropic/claude", (), None, signin.api_keys("a", [oc("openai", name="work")]))


def test_a_config_api_key_is_warned_about_only_for_an_injected_provider() -> None:
    keys = signin.api_keys("a", [oc("openai", name="work")])
    config = {"provider": {"openai": {"options": {"apiKey": "sk-config-9999999"}},
                           "other": {"options": {"apiKey": "sk-config-8888888"}}}}
    [warning] = signin.config_key_warnings("a", config, keys)
    assert "provider.openai.options.apiKey" in warning
    assert "'work'" in warning
    assert "sk-config" not in warning
    assert signin.config_key_warnings("a", {"provider": {"openai": {"options": {"baseURL": "x"}}}}, keys) == []
    assert signin.config_key_warnings("a", {"provider": "not an object"}, keys) == []


@pytest.mark.parametrize(("error", "rejected"), [
    ({"name": "ProviderAuthError", "data": {"providerID": "openai", "message": "OpenAI API key is missing."}}, True),
    ({"name": "APIError", "data": {"message": "Incorrect API key provided", "statusCode": 401}}, True),
    ({"name": "APIError", "data": {"message": "rate limited", "statusCode": 429}}, False),
    ({"name": "APIError", "data": {"message": "scripted http error", "statusCode": 500}}, False),
    ({"name": "UnknownError", "data": {"message": "boom"}}, False),
])
def test_which_turn_errors_mean_the_credentials_were_rejected(error: dict[str, Any], rejected: bool) -> None:
    outcome = outcome_of("msg_root", {"info": {"error": error}, "parts": []})
    assert outcome.status is OutcomeStatus.FAILED
    assert outcome.credentials_rejected is rejected
    assert outcome.error == f"{error['name']}: {error['data']['message']}"


def write_auth(data_dir: Path, text: str) -> Path:
    path = data_dir / "opencode" / "auth.json"
    path.parent.mkdir(parents=True)
    path.write_text(text)
    return path


def test_copies_of_injected_keys_are_removed_and_other_entries_kept(tmp_path: Path) -> None:
    keys = signin.api_keys("a", [oc("openai")])
    path = write_auth(tmp_path, json.dumps({"openai": {"type": "api", "key": SECRET},
                                            "mine": {"type": "api", "key": "sk-theirs-0000000"}}))
    assert signin.scrub_auth_file(tmp_path, keys) == ["mine"]
    assert json.loads(path.read_text()) == {"mine": {"type": "api", "key": "sk-theirs-0000000"}}
    assert os.stat(path).st_mode & 0o777 == 0o600
    warning = signin.stale_auth_warning("a", tmp_path, ["mine"], injected=True)
    assert warning is not None
    assert "holds keys for mine" in warning
    assert "sk-theirs" not in warning


def test_an_auth_file_of_only_injected_copies_goes_and_an_empty_one_is_no_warning(tmp_path: Path) -> None:
    keys = signin.api_keys("a", [oc("openai")])
    path = write_auth(tmp_path, json.dumps({"openai": {"type": "api", "key": SECRET}}))
    assert signin.scrub_auth_file(tmp_path, keys) is None
    assert not path.exists()
    path.write_text("{}")
    assert signin.scrub_auth_file(tmp_path, keys) is None
    assert signin.stale_auth_warning("a", tmp_path, None, injected=True) is None


def test_an_unreadable_auth_file_is_left_alone_and_warned_about(tmp_path: Path) -> None:
    path = write_auth(tmp_path, "not json")
    assert signin.scrub_auth_file(tmp_path, signin.api_keys("a", [oc("openai")])) == []
    assert path.read_text() == "not json"
    warning = signin.stale_auth_warning("a", tmp_path, [], injected=False)
    assert warning is not None
    assert "entries wardian cannot read" in warning
    assert "OpenCode uses it, since wardian gives the agent no credential" in warning
