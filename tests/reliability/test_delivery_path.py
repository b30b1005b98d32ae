"""No duplicate body (DLV-8, row D12): every record reaches its recipient through exactly one path, pushed into its live
conversation or returned by a receive, never both. A reply committed while the requester's receive is reading
used to be returned by that receive and pushed into the requester's conversation as well.

The race is hammered in this process (the app's real service, writer and runtime; the requester on the fake
provider, which can push): each round a task's recipient replies while the requester receives, in a random order
with a random number of scheduling points between them and inside the push, and some pushes fail (nothing sent:
the reply must come by receive, once) or lose their answer (it may have been shown: never shown again).
`scripts/reliability.py` runs more rounds (`WARDIAN_DELIVERY_RACE_ROUNDS`).
"""

from __future__ import annotations

import os
from collections import Counter
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from tests.app.inprocess import world
from tests.reliability.world import report, seeded_random, size

ROUNDS = int(os.environ.get("WARDIAN_DELIVERY_RACE_ROUNDS", "0")) or size(2_000, 20_000)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def _yields(n: int) -> None:
    for _ in range(n):
        await anyio.lowlevel.checkpoint()


@pytest.mark.anyio
async def test_a_reply_racing_the_requesters_receive_reaches_it_once() -> None:
    rng, seed = seeded_random("DELIVERY")
    async with world(lead_provider="fake") as w:
        await w.call("agent/start", agent="lead")
        lead_runtime = w.runtime_of("lead")
        worker = (await w.call("agent/session", agent="worker"))["session_id"]
        received: Counter[str] = Counter()
        replies: list[str] = []
        cursor: str | None = None
        lost_answers = 0

        async def lead_receives() -> None:
            nonlocal cursor
            params: dict[str, Any] = {"session": w.lead, "limit": 100}
            if cursor is not None:
                params["ack_cursor"] = cursor
            page = await w.call("mailbox/receive", **params)
            received.update(r["id"] for r in page["records"])
            cursor = page["cursor"] if page["records"] else None

        for _ in range(ROUNDS):
            rid = (await w.call("task/followup", session=w.lead, target="worker", message="q"))["request_id"]
            page = await w.call("mailbox/receive", session=worker, limit=1)
            assert [r["request_id"] for r in page["records"]] == [rid]
            lead_runtime.push_yields = rng.randrange(4)
            fault = rng.choices([None, "unavailable", "lost"], weights=[8, 1, 1])[0]
            lead_runtime.push_faults = [fault]
            lost_answers += fault == "lost"
            gap = rng.randrange(4)

            async def reply(rid: str = rid, gap: int = gap) -> None:
                await _yields(gap)
                result = await w.call("task/reply", session=worker, request_id=rid, status="done", message="a")
                replies.append(result["reply_id"])

            async def receive(gap: int = gap) -> None:
                await _yields(3 - gap)
                await lead_receives()

            async with anyio.create_task_group() as tg:
                first, second = (reply, receive) if rng.random() < 0.5 else (receive, reply)
                tg.start_soon(first)
                tg.start_soon(second)
            await w.call("mailbox/receive", session=worker, ack_cursor=page["cursor"])
        await lead_receives()  # what a failed push gave back to the receive path
        await lead_receives()

        pushed = Counter(r.id for r in lead_runtime.pushed)
        twice = [r for r in replies if received[r] + pushed[r] > 1]
        never = [r for r in replies if received[r] + pushed[r] == 0]
        report("DELIVERY one_path_per_record", rounds=ROUNDS, duplicated=len(twice), lost=len(never),
               pushed=sum(pushed.values()), received=sum(received[r] for r in replies), lost_answers=lost_answers,
               seed=seed)
        assert twice == [], f"{len(twice)} replies reached the requester by both paths (seed {seed})"
        assert never == [], f"{len(never)} replies reached the requester by neither path (seed {seed})"
        assert sum(pushed.values()), "the race never took the push path"
        assert sum(received[r] for r in replies), "the race never took the receive path"
