"""`wardian agent start NAME --env NAME=VALUE` (docs/guide/using.md): non-secret variables for the provider's
process, kept with the agent like its `-c` settings and handed to the provider in `LaunchSpec.env`; a credential's
name is refused with a pointer to `wardian auth`, and a refused start changes nothing. Through the app's real service
and provider-neutral runtime, with the fake provider."""

from __future__ import annotations

import pytest

from tests.app.inprocess import world
from wardian import errors

pytestmark = pytest.mark.fast  # the fast tier (scripts/check test-fast)

ENV = ["OPENAI_BASE_URL=http://127.0.0.1:9/v1", "OPENAI_MODEL=scripted"]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_env_settings_reach_the_provider_and_are_kept_like_config() -> None:
    async with world() as w:
        await w.call("agent/start", agent="worker", env=ENV)
        assert dict(w.worker().spec.env) == {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "OPENAI_MODEL": "scripted"}
        await w.call("agent/stop", agent="worker")
        await w.call("agent/start", agent="worker")  # a plain start: the saved ones
        assert dict(w.worker().spec.env)["OPENAI_MODEL"] == "scripted"
        assert (await w.call("agent/list"))["managed"][w.worker_uuid]["env"] == ENV
        await w.call("agent/start", agent="worker", env=["OPENCODE_CONFIG_CONTENT={}"])
        assert dict(w.worker().spec.env) == {"OPENCODE_CONFIG_CONTENT": "{}"}
        await w.call("agent/start", agent="worker", reset_settings=True)
        assert dict(w.worker().spec.env) == {}


@pytest.mark.anyio
@pytest.mark.parametrize("setting", ["OPENAI_API_KEY=canary-v", "GITHUB_TOKEN=canary-v", "MY_SECRET=canary-v",
                                     "DB_PASSWORD=canary-v", "password_file=canary-v", "WARDIAN_HOME=canary-v",
                                     "1BAD=canary-v", "NOVALUE", "A=canary-v\nline"])
async def test_a_credential_or_malformed_env_setting_is_refused_and_changes_nothing(setting: str) -> None:
    async with world() as w:
        await w.call("agent/start", agent="worker", env=ENV)
        with pytest.raises(errors.InvalidArguments) as refused:
            await w.call("agent/start", agent="worker", env=[*ENV, setting])
        assert refused.value.field == "env"
        assert "canary-v" not in f"{refused.value.message} {refused.value.allowed}"  # a value is never echoed
        assert (await w.call("agent/list"))["managed"][w.worker_uuid]["env"] == ENV
        assert dict(w.worker().spec.env)["OPENAI_MODEL"] == "scripted"
