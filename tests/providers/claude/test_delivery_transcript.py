"""Reading Claude Code's transcript (entries in the shapes Claude Code 2.1.328 writes, trimmed): whether a message was
taken, and a turn's answer when its `result` was lost."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from wardian.providers.base import OutcomeStatus
from wardian.providers.claude import transcript

pytestmark = pytest.mark.fast


def user(uuid: str, content: Any) -> dict[str, Any]:
    return {"type": "user", "uuid": uuid, "promptSource": "sdk", "message": {"role": "user", "content": content}}


def assistant(mid: str, blocks: list[dict[str, Any]], stop: str | None) -> dict[str, Any]:
    return {"type": "assistant", "uuid": f"a-{mid}-{len(blocks)}", "isSidechain": False,
            "message": {"id": mid, "role": "assistant", "content": blocks, "stop_reason": stop}}


def write(tmp_path: Path, entries: list[dict[str, Any]], *, torn: bool = False) -> Path:
    path = tmp_path / "projects" / "-work" / "s1.jsonl"
    path.parent.mkdir(parents=True)
    text = "".join(json.dumps(e) + "\n" for e in entries)
    path.write_text(text + ('{"type":"assist' if torn else ""), encoding="utf-8")
    return path


def test_a_turn_that_answered_gives_its_final_message(tmp_path: Path) -> None:
    path = write(tmp_path, [
        {"type": "queue-operation", "operation": "enqueue", "content": "task"},
        user("u1", "task"), {"type": "attachment", "uuid": "x", "attachment": {"type": "environment"}},
        assistant("m1", [{"type": "tool_use", "id": "t", "name": "Bash", "input": {}}], "tool_use"),
        {"type": "user", "uuid": "r", "toolUseResult": {}, "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t", "content": "ok"}]}},
        {"type": "attachment", "uuid": "f", "attachment": {"type": "queued_command", "source_uuid": "u2"}},
        assistant("m2", [{"type": "text", "text": "final ☃\nanswer"}], "end_turn"),
        user("u3", "next task"), assistant("m3", [{"type": "text", "text": "other"}], "end_turn")], torn=True)
    assert transcript.transcript_path(tmp_path, Path("/work"), "s1") == path
    assert transcript.look_up(path, "u1") == transcript.Found("final ☃\nanswer")
    assert transcript.look_up(path, "u2") == transcript.Found("final ☃\nanswer")  # folded into u1's turn
    assert transcript.look_up(path, "u3") == transcript.Found("other")


def test_a_message_taken_whose_turn_did_not_answer_has_no_final_text(tmp_path: Path) -> None:
    path = write(tmp_path, [user("u1", "task"),
                            assistant("m1", [{"type": "tool_use", "id": "t", "name": "Bash", "input": {}}],
                                      "tool_use")])
    assert transcript.look_up(path, "u1") == transcript.Found(None)
    outcomes = transcript.settle(path, ["u1", "u9"], -9)
    assert [o.status for o in outcomes] == [OutcomeStatus.UNKNOWN, OutcomeStatus.UNKNOWN]


def test_a_message_not_in_the_transcript_is_not_found(tmp_path: Path) -> None:
    path = write(tmp_path, [user("u1", "task")])
    assert transcript.look_up(path, "nope") is None
    assert transcript.look_up(None, "u1") is None
    assert transcript.transcript_path(tmp_path, Path("/elsewhere"), "s1") == path  # resumed from another cwd
    assert transcript.transcript_path(tmp_path, Path("/work"), "s2") is None
