"""Reading a replayed ACP history (`session/load`) for the tasks it shows (docs/guide/acp.md#durable-and-exact), on
the update shapes Qwen Code 0.24.4 replays."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from wardian.providers.acp import replay


def user(request_id: str) -> dict[str, Any]:
    text = "wardian_task_delivery\n" + json.dumps({"request_id": request_id, "text": "t"}, indent=1)
    return {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": text}}


def said(text: str, record: str = "r1") -> dict[str, Any]:
    return {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text},
            "_meta": {"qwenTranscript": {"sourceRecordIds": [record]}}}


def call(status: str, call_id: str = "c1") -> dict[str, Any]:
    return {"sessionUpdate": "tool_call" if status == "in_progress" else "tool_call_update", "toolCallId": call_id,
            "status": status}


def always(update: dict[str, Any]) -> bool:
    return True


def test_an_answer_after_the_last_tool_call_is_the_task_s_and_a_cut_off_turn_has_none() -> None:
    updates = [user("ask_1"), said("looking"), call("in_progress"), call("completed"), said("done: 4"),
               user("ask_2"), said("half"), call("in_progress", "c2"),
               user("ask_3")]
    assert replay.answers(updates, always) == {"ask_1": "done: 4", "ask_2": None, "ask_3": None}


def test_no_answer_counts_unless_the_agent_marks_it_finished() -> None:
    assert replay.answers([user("ask_1"), said("partial")], replay.never) == {"ask_1": None}


def test_a_user_message_in_several_chunks_is_one_exchange() -> None:
    chunk = {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "<session_context>"}}
    assert replay.answers([chunk, user("ask_1"), said("ok")], always) == {"ask_1": "ok"}


def test_qwen_marks_an_answer_finished_by_its_branch_checkpoint(tmp_path: Path) -> None:
    chats = tmp_path / "projects" / "-w" / "chats"
    chats.mkdir(parents=True)
    lines = [{"type": "assistant", "uuid": "r1"},
             {"type": "system", "subtype": "branch_checkpoint", "systemPayload": {"assistantRecordUuid": "r1"}},
             {"type": "assistant", "uuid": "r2"}]
    (chats / "s1.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + '\n{"cut off', encoding="utf-8")
    finished = replay.qwen_finished({"QWEN_HOME": tmp_path}, "s1")
    assert replay.answers([user("ask_1"), said("whole", "r1"), user("ask_2"), said("part", "r2")], finished) == {
        "ask_1": "whole", "ask_2": None}
