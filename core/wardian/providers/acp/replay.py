"""What an ACP agent's replayed history says of the tasks wardian prompted it with (docs/guide/acp.md#durable).

`session/load` replays the session's history as `session/update` notifications before it answers: each user message
(`user_message_chunk`), then the agent's text and tool calls. A task's prompt carries its request id (the structured
`wardian_task_delivery` text, or a task steered in at a tool boundary), so the history answers, per task it shows:

- answered: after the user message that carried it, the agent said a final text (after its last tool call) and left
  no tool call unfinished before the next user message or the history's end;
- taken: the user message is there, but no such answer follows (the turn was cut off);
- a task the history does not show is not in it at all (it may never have reached the agent).

The history never says how a turn ended (no stop reason is replayed), and an agent ended mid-answer may have saved
the text it had (Qwen Code 0.24.4 does, at times): so a replayed answer counts only when the agent's own record marks
its turn finished (`finished`: Qwen Code writes a branch checkpoint naming the answer's record at each turn's end).
An agent without such a mark (Gemini CLI, a generic one) gets no answer from its history: its lost tasks stay
uncertain. Everything not settled stays uncertain and is never resent.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from wardian.providers.delivery import TASK_ITEM_KIND

_REQUEST_ID = re.compile(r'"request_id": "(ask_[A-Za-z0-9_]+)"')
_DONE = ("completed", "failed")


@dataclass
class _Exchange:
    request_ids: list[str]
    segments: list[str] = field(default_factory=lambda: [""])
    open_calls: set[str] = field(default_factory=set)
    said: bool = False
    """The agent said or did something after the user message."""

    last_said: dict[str, Any] | None = None
    """The exchange's last `agent_message_chunk`."""

    def answer(self, finished: Callable[[dict[str, Any]], bool]) -> str | None:
        text = self.segments[-1]
        done = self.last_said is not None and finished(self.last_said)
        return text if text.strip() and not self.open_calls and done else None


def answers(updates: Sequence[dict[str, Any]], finished: Callable[[dict[str, Any]], bool]) -> dict[str, str | None]:
    """Per request id a replayed user message carried: the final text of its answered turn (its last chunk one
    the agent marks `finished`), or None (taken, not answered). A task in several user messages gets the last
    one's."""
    exchanges: list[_Exchange] = []
    current: _Exchange | None = None
    for update in updates:
        kind = update.get("sessionUpdate")
        content = update.get("content")
        text = str(content.get("text") or "") if isinstance(content, dict) and content.get("type") == "text" else ""
        if kind == "user_message_chunk":
            ids = _REQUEST_ID.findall(text) if TASK_ITEM_KIND in text else []
            if current is not None and not current.said:
                current.request_ids.extend(ids)  # the same user message, in several chunks
                continue
            # Each user message starts an exchange, a task steered into a turn too: what follows it is the rest of
            # that turn (the steered task's answer); the text before it, cut off, answers nothing.
            current = _Exchange(ids)
            exchanges.append(current)
        elif current is None:
            continue
        elif kind == "agent_message_chunk":
            current.segments[-1] += text
            current.said = True
            current.last_said = update
        elif kind in ("tool_call", "tool_call_update"):
            _tool(current, update)
            current.said = True
    found: dict[str, str | None] = {}
    for exchange in exchanges:
        for request_id in exchange.request_ids:
            found[request_id] = exchange.answer(finished)
    return found


def _tool(exchange: _Exchange, update: dict[str, Any]) -> None:
    call = str(update.get("toolCallId") or "")
    if update.get("status") in _DONE:
        exchange.open_calls.discard(call)
    else:
        exchange.open_calls.add(call)
    if exchange.segments[-1]:
        exchange.segments.append("")


def never(update: dict[str, Any]) -> bool:
    """For an agent that marks no turn finished in its records: no replayed answer counts."""
    return False


def qwen_finished(dirs: Mapping[str, Path], session_id: str) -> Callable[[dict[str, Any]], bool]:
    """Qwen Code's mark: at each turn's end it writes a `branch_checkpoint` record naming the turn's answer
    (`assistantRecordUuid`) into the session's transcript (`$QWEN_HOME/projects/<cwd>/chats/<session>.jsonl`), and
    each replayed chunk names the records it came from (`_meta.qwenTranscript.sourceRecordIds`)."""
    marked: set[str] = set()
    for path in (dirs["QWEN_HOME"] / "projects").glob(f"*/chats/{session_id}.jsonl"):
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue  # a line cut off when the agent was ended
            payload = record.get("systemPayload") if isinstance(record, dict) else None
            if record.get("subtype") == "branch_checkpoint" and isinstance(payload, dict):
                marked.add(str(payload.get("assistantRecordUuid")))

    def finished(update: dict[str, Any]) -> bool:
        meta = update.get("_meta")
        transcript = meta.get("qwenTranscript") if isinstance(meta, dict) else None
        ids = transcript.get("sourceRecordIds") if isinstance(transcript, dict) else None
        return isinstance(ids, list) and bool(ids) and all(str(i) in marked for i in ids)
    return finished
