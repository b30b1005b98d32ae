"""Claude Code's own record of a session, read to settle what the stream did not say: whether a message wardian
wrote was taken (its uuid is a transcript entry's), and what a turn answered when its `result` was lost.

The transcript is `$CLAUDE_CONFIG_DIR/projects/<cwd, each non-alphanumeric character replaced by "-">/<session>.jsonl`
(a session resumed from another directory keeps appending to its first file, so the session's file is also looked for
under every project). One JSON entry per line: `user`, `assistant` and `attachment` entries carry a `uuid`; a
message folded into a running turn is an `attachment` of type `queued_command` with the message's uuid as
`source_uuid`. A message is written there once Claude Code starts it (a message still queued behind a running turn is
not there yet). An assistant entry is written once its API message ended, with its `stop_reason`: a turn has
answered when an assistant entry after its message says `end_turn`.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from wardian import errors
from wardian.providers.base import OutcomeStatus, TurnOutcome

log = logging.getLogger("wardian.claude")

_NOT_ALNUM = re.compile(r"[^A-Za-z0-9]")
FINAL_STOP_REASONS = ("end_turn", "stop_sequence")


def project_key(cwd: Path) -> str:
    return _NOT_ALNUM.sub("-", str(cwd))


def transcript_path(config_dir: Path, cwd: Path, session_id: str) -> Path | None:
    """The session's transcript, if there is one (under the cwd's project, else under any project)."""
    for candidate in (cwd, cwd.resolve()):
        path = config_dir / "projects" / project_key(candidate) / f"{session_id}.jsonl"
        if path.is_file():
            return path
    found = sorted((config_dir / "projects").glob(f"*/{session_id}.jsonl"))
    return found[0] if found else None


def _entries(path: Path) -> Iterator[dict[str, Any]]:
    """The transcript's entries in order; an unreadable line (the last one, half-written by a killed process) is
    skipped."""
    with path.open("rb") as file:
        for raw in file:
            try:
                entry = json.loads(raw)
            except ValueError:
                continue
            if isinstance(entry, dict):
                yield entry


def _names(entry: dict[str, Any], uuid: str) -> bool:
    if entry.get("uuid") == uuid and entry.get("type") == "user":
        return True
    attachment = entry.get("attachment")
    return isinstance(attachment, dict) and attachment.get("source_uuid") == uuid


def _is_prompt(entry: dict[str, Any]) -> bool:
    """A user entry that starts a turn (a message, not a tool result or a note of Claude Code's own)."""
    if entry.get("type") != "user" or entry.get("isMeta") or "toolUseResult" in entry:
        return False
    content = (entry.get("message") or {}).get("content")
    if isinstance(content, list):
        return not any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content)
    return isinstance(content, str)


@dataclass(frozen=True, slots=True)
class Found:
    """What the transcript says of one message: it was taken, and the turn's final answer once it answered."""

    final_text: str | None


def look_up(path: Path | None, uuid: str) -> Found | None:
    """The message `uuid` in the transcript at `path`: None when it is not there; else whether the turn it ran in
    answered (its final assistant message's text) before the next message started a turn."""
    if path is None or not path.is_file():
        return None
    seen = False
    final: str | None = None
    message_id: str | None = None
    texts: list[str] = []
    for entry in _entries(path):
        if not seen:
            seen = _names(entry, uuid)
            continue
        if _is_prompt(entry):
            if message_id is None:
                continue  # run together with the next message (queued together: one turn)
            break  # the next turn began: this one answered (final) or ended without an answer
        if entry.get("type") != "assistant" or entry.get("isSidechain"):
            continue
        message = entry.get("message") or {}
        if message.get("id") != message_id or message_id is None:
            message_id, texts = str(message.get("id")), []
        texts.extend(str(b.get("text") or "") for b in message.get("content") or []
                     if isinstance(b, dict) and b.get("type") == "text")
        final = "".join(texts) if message.get("stop_reason") in FINAL_STOP_REASONS else None
    return Found(final) if seen else None


def settle(path: Path | None, tasks: list[str], exit_code: int | None) -> list[TurnOutcome]:
    """The outcome of each task whose turn's result the stream never gave (the process ended): its answer when
    the transcript has it, else unknown (never guessed, never resent)."""
    outcomes: list[TurnOutcome] = []
    for task in tasks:
        found = look_up(path, task)
        if found is not None and found.final_text is not None:
            outcomes.append(TurnOutcome(task, OutcomeStatus.DONE, final_text=found.final_text))
        else:
            outcomes.append(TurnOutcome(task, OutcomeStatus.UNKNOWN, error=(
                f"Claude Code ended (exit {exit_code}) before this turn's result, and its transcript has no final "
                "answer for it")))
    return outcomes


async def confirm(path_of: Callable[[], Path | None], uuid: str, why: str, seen: Callable[[str], bool],
                  pauses_s: Sequence[float]) -> str:
    """Whether message `uuid`, whose acknowledgement was lost (`why`), was taken: `why` when the stream (`seen`) or
    the transcript shows it after one of the pauses. Raises: DeliveryUncertain (`looked_up`: not found)."""
    for pause in pauses_s:
        await anyio.sleep(pause)
        if seen(uuid):
            return why
        if await anyio.to_thread.run_sync(lambda: look_up(path_of(), uuid)) is not None:
            log.warning("message %s was found in the session's transcript after %s", uuid, why)
            return why
    raise errors.DeliveryUncertain(f"{why}; message {uuid} is not in the session's transcript: never resent",
                                   provider_message_id=uuid, looked_up=True)
