"""`wardian agent remove NAME|UUID` (decision 0015): the runtime stops, the sessions are revoked, the name is freed,
every record stays, and each task still pending or claimed gets one correlated `failed` notice from Wardian; a task in a
turn nobody saw end becomes uncertain, not failed."""

from __future__ import annotations

import pytest

from tests.app.inprocess import world
from tests.conftest import AppHandle
from wardian import errors
from wardian.cli import EXIT_NOT_FOUND
from wardian.model import TaskState
from wardian.store import ledger

pytestmark = pytest.mark.fast  # the fast tier (scripts/check test-fast)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_removing_an_agent_answers_its_open_tasks_and_keeps_its_records() -> None:
    async with world() as w:
        await w.call("agent/start", agent="worker")
        fake = w.worker()
        in_turn = (await w.call("task/followup", session=w.lead, target="worker", message="in a turn"))["request_id"]
        await w.until(lambda: _true(bool(fake.turns_started)), "the first task never started a turn")
        pending = (await w.call("task/followup", session=w.lead, target="worker", message="waits"))["request_id"]
        worker = (await w.call("agent/session", agent="worker"))["session_id"]
        await w.call("message/send", session=w.lead, target="worker", message="FYI")

        result = await w.call("agent/remove", agent="worker")
        assert result["answered"] == [pending]
        assert result["uncertain"] == [in_turn]
        assert fake.ready is False  # its runtime was stopped first
        assert ledger.task(w.store, in_turn).state is TaskState.UNCERTAIN
        notices = (await w.call("mailbox/receive", session=w.lead, limit=100))["records"]
        assert [(r["kind"], r["request_id"], r["status"], r["sender_kind"]) for r in notices] == [
            ("notice", pending, "failed", "wardian")]
        assert "removed" in notices[0]["text"]

        assert [a["name"] for a in (await w.call("agent/list"))["agents"]] == ["lead"]
        with pytest.raises(errors.UnknownTarget):
            await w.call("message/send", session=w.lead, target="worker", message="still there?")
        with pytest.raises(errors.UnknownSession):
            await w.call("mailbox/wait", session=worker, timeout_ms=0)
        texts = [r["text"] for r in (await w.call("mailbox/records", limit=100))["records"]]
        assert {"in a turn", "waits", "FYI"} <= set(texts)  # evidence stays
        with pytest.raises(errors.UnknownAgent):
            await w.call("agent/remove", agent="worker")


async def _true(value: bool) -> bool:
    return value


def test_remove_from_the_cli_frees_the_name(app: AppHandle) -> None:
    lead, lead_token = app.add_agent("lead")
    old, _ = app.add_agent("worker")
    task = app.call("task/followup", {"session": lead_token, "target": "worker", "message": "orphaned"})
    out = app.cli("agent", "remove", "worker")
    assert out.returncode == 0, out.stderr
    assert task["request_id"].encode() in out.stdout
    refused = app.cli("message", "send", "--to", "worker", "hi", token=lead_token)
    assert refused.returncode == EXIT_NOT_FOUND
    assert b"unknown_target" in refused.stderr
    new = app.call("agent/add", {"name": "worker", "provider": "codex"})
    assert new["uuid"] != old["uuid"]
    receipt = app.call("message/send", {"session": lead_token, "target": "worker", "message": "hi again"})
    assert receipt["target"]["uuid"] == new["uuid"]
    shown = app.cli("message", "show", task["request_id"])
    assert shown.returncode == 0, shown.stderr
    assert b"failed" in shown.stdout
    assert lead["uuid"].encode() in shown.stdout
