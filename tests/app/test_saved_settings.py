"""An agent's launch settings travel with it: a plain `agent start` reuses the mode and `-c` settings of its last
start, `-c` replaces them, `reset_settings` drops them, and the operator sees them (secret-looking values masked).
Through the app's real service and provider-neutral runtime, with the non-Codex fake provider."""

from __future__ import annotations

from dataclasses import replace
from functools import partial

import anyio
import pytest

from tests.app.inprocess import world
from tests.providers.fake_provider import FAKE_CAPABILITIES
from wardian import errors
from wardian.overrides import MASK

pytestmark = pytest.mark.fast  # the fast tier (scripts/check test-fast)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


SETTINGS = ['model="scripted"', 'model_providers.mock.base_url="http://127.0.0.1:9/v1"',
            'env.API_KEY="sk-live-0123456789"']


@pytest.mark.anyio
async def test_a_plain_start_reuses_the_saved_settings() -> None:
    """Previously a start without `-c` threw the saved settings away, and the agent could no longer reach its
    model."""
    async with world() as w:
        await w.call("agent/start", agent="worker", config=SETTINGS)
        assert w.worker().spec.overrides == tuple(SETTINGS)
        await w.call("agent/stop", agent="worker")
        await w.call("agent/start", agent="worker")
        assert w.worker().spec.overrides == tuple(SETTINGS)
        await w.call("agent/start", agent="worker", keep_settings=True)  # the console's button: the same
        assert w.worker().spec.overrides == tuple(SETTINGS)


@pytest.mark.anyio
async def test_given_settings_replace_the_saved_ones_and_reset_drops_them() -> None:
    async with world() as w:
        await w.call("agent/start", agent="worker", config=SETTINGS)
        await w.call("agent/start", agent="worker", config=['model="other"'])
        assert w.worker().spec.overrides == ('model="other"',)
        await w.call("agent/start", agent="worker")
        assert w.worker().spec.overrides == ('model="other"',)
        await w.call("agent/start", agent="worker", reset_settings=True)
        assert w.worker().spec.overrides == ()
        await w.call("agent/start", agent="worker")
        assert w.worker().spec.overrides == ()


@pytest.mark.anyio
async def test_reset_with_settings_and_keep_with_anything_are_refused_and_change_nothing() -> None:
    async with world() as w:
        await w.call("agent/start", agent="worker", config=SETTINGS)
        generation = w.worker().spec
        for params, field in (({"reset_settings": True, "config": ['model="x"']}, "reset_settings"),
                              ({"keep_settings": True, "config": ['model="x"']}, "keep_settings"),
                              ({"keep_settings": True, "reset_settings": True}, "keep_settings"),
                              ({"keep_settings": True, "mode": "background"}, "keep_settings")):
            with pytest.raises(errors.InvalidArguments) as exc:
                await w.call("agent/start", agent="worker", **params)
            assert exc.value.field == field
        assert w.worker().spec is generation  # nothing was restarted
        managed = (await w.call("agent/list"))["managed"][w.worker_uuid]
        assert managed["settings"][:2] == SETTINGS[:2]


@pytest.mark.anyio
async def test_the_operator_sees_the_saved_settings_with_secrets_masked_and_peers_do_not() -> None:
    """`agent/list` for the operator carries each agent's saved mode and settings; a value whose key looks like a
    secret (`*key*`, `*token*`, `*secret*`, `*password*`), at any depth, is masked; a session's list has none."""
    nested = 'provider={"x": {"options": {"apiKey": "sk-nested-secret", "baseURL": "http://127.0.0.1:9"}}}'
    async with world() as w:
        await w.call("agent/start", agent="worker", config=[*SETTINGS, nested, 'auth.token="t0k3n"'])
        listed = await w.call("agent/list")
        managed = listed["managed"][w.worker_uuid]
        assert managed["mode"] == "background"
        assert managed["settings"] == [
            SETTINGS[0], SETTINGS[1], f"env.API_KEY={MASK}",
            f'provider={{"x": {{"options": {{"apiKey": "{MASK}", "baseURL": "http://127.0.0.1:9"}}}}}}',
            f"auth.token={MASK}"]
        text = repr(listed)
        for secret in ("sk-live", "sk-nested", "t0k3n"):
            assert secret not in text
        peer = await w.call("agent/list", session=w.lead)
        assert "managed" not in peer


@pytest.mark.anyio
async def test_a_start_refused_as_already_starting_saves_nothing_it_was_given() -> None:
    """A second `agent start` while the first still runs was refused ("already starting") only after it had saved its
    `-c` settings and tool grants over the first's: the agent then ran with one start's settings and kept the other's.
    Now it is refused before anything is saved."""
    capabilities = replace(FAKE_CAPABILITIES, tool_grants=True)
    async with world(capabilities) as w:
        w.provider.start_gate = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(partial(w.call, "agent/start", agent="worker", config=SETTINGS,
                                  approve_tools=["send_message"]))
            await w.provider.preparing.wait()
            with pytest.raises(errors.Unsupported) as refused:
                await w.call("agent/start", agent="worker", config=['model="other"'], approve_tools=["reply"])
            assert "already starting" in refused.value.message
            w.provider.start_gate.set()
        managed = (await w.call("agent/list"))["managed"][w.worker_uuid]
        assert managed["approve_tools"] == ["send_message"]
        assert managed["settings"][0] == 'model="scripted"'
        assert w.worker().spec.overrides == tuple(SETTINGS)
