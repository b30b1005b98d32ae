"""Claude Code's turns as its stream shows them, and what each `result` means for the tasks it answers.

Every message wardian writes carries a uuid wardian chose; that uuid is the turn id the app binds the task to. A
message is `queued` at once (`command_lifecycle`), `started` when Claude Code takes it: as the start of a turn when
none runs, else folded into the running turn at its next tool boundary. Messages queued together start together (one
turn). A turn ends with exactly one `result`, which names every message it answered in `user_message_uuids`: each
task among them gets the same outcome (never matched by counting results). A message sent with `shouldQuery: false`
(information) is not a turn: while idle it gets a `result` of its own with `num_turns: 0`, which answers no task.

A result's meaning: `terminal_reason` `aborted_*` is an interruption whatever its subtype says; `is_error` a failure
(credentials refused: "Not logged in", "Invalid API key", a 401); otherwise its `result` text is the final answer.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from wardian import usage
from wardian.providers.base import OutcomeStatus, TurnOutcome
from wardian.usage import TokenUsage

Kind = Literal["task", "note"]
_CREDENTIALS_REFUSED = ("not logged in", "invalid api key", "authentication_error", "oauth token", "401")


def usage_of(result: dict[str, Any]) -> TokenUsage | None:
    """A `result`'s `usage`, the sum over its turn's model requests. The Messages API counts `input_tokens` without
    the cached ones (`cache_read_input_tokens`, `cache_creation_input_tokens`): wardian's input adds them back."""
    raw = result.get("usage")
    if not isinstance(raw, dict):
        return None
    fresh, output = usage.count(raw.get("input_tokens")), usage.count(raw.get("output_tokens"))
    if fresh is None or output is None:
        return None
    read = usage.count(raw.get("cache_read_input_tokens")) or 0
    written = usage.count(raw.get("cache_creation_input_tokens")) or 0
    return TokenUsage(fresh + read + written, output, read)


def outcome_of(turn_id: str, result: dict[str, Any]) -> TurnOutcome:
    """The outcome a `result` line gives the task of turn `turn_id` (its usage is added by `Turns.on_result`)."""
    reason = str(result.get("terminal_reason") or "")
    text = result.get("result")
    if reason.startswith("aborted"):
        return TurnOutcome(turn_id, OutcomeStatus.INTERRUPTED, error=reason)
    if result.get("is_error") or result.get("subtype") not in (None, "success"):
        errors = result.get("errors")
        words = str(text) if isinstance(text, str) and text else "; ".join(map(str, errors or [])) or str(
            result.get("subtype") or "error")
        refused = any(marker in words.lower() for marker in _CREDENTIALS_REFUSED)
        return TurnOutcome(turn_id, OutcomeStatus.FAILED, error=words[:2000], credentials_rejected=refused)
    return TurnOutcome(turn_id, OutcomeStatus.DONE, final_text=text if isinstance(text, str) else None)


@dataclass
class Turns:
    """The messages wardian wrote and not yet answered, and the running turn (its uuids, the first its id)."""

    open: dict[str, Kind] = field(default_factory=dict)
    """Every message written whose answering result has not been read, by uuid."""
    queued: set[str] = field(default_factory=set)
    """The open messages Claude Code acknowledged (`queued`)."""
    started: set[str] = field(default_factory=set)
    running: list[str] = field(default_factory=list)
    """The uuids of the running turn, in the order they joined it; empty when idle."""
    answered: deque[str] = field(default_factory=lambda: deque(maxlen=256))

    @property
    def active(self) -> str | None:
        return self.running[0] if self.running else None

    def written(self, uuid: str, kind: Kind) -> None:
        self.open[uuid] = kind

    def forget(self, uuid: str) -> None:
        self.open.pop(uuid, None)
        self.queued.discard(uuid)
        self.started.discard(uuid)

    def on_queued(self, uuid: str) -> None:
        """Claude Code acknowledged a message (it starts later: at once when idle, after a note, or mid-turn)."""
        if uuid in self.open:
            self.queued.add(uuid)

    def on_started(self, uuid: str) -> bool:
        """A message started: True when it starts the turn (it joins a running one otherwise). A note started while
        idle starts nothing."""
        if uuid not in self.open or uuid in self.started:
            return False
        self.started.add(uuid)
        if self.running:
            if uuid not in self.running:
                self.running.append(uuid)
            return False
        return self.open[uuid] == "task"

    def begin(self, uuid: str) -> None:
        self.running = [uuid]

    def on_init(self, uuids: list[str]) -> str | None:
        """A turn's `system/init` (after the `started` of its messages): the turn id to activate when no turn is
        known to run and its messages are not all notes of ours (a turn wardian did not start), else None."""
        if self.running or (uuids and all(self.open.get(u) == "note" for u in uuids)):
            return None
        return uuids[0] if uuids else None

    def on_result(self, result: dict[str, Any]) -> tuple[bool, list[TurnOutcome]]:
        """A `result`: whether it ends the running turn, and the outcome of each task of ours it answers."""
        uuids = [str(u) for u in result.get("user_message_uuids") or [result.get("user_message_uuid")] if u]
        tasks = [u for u in uuids if self.open.get(u) == "task"]
        for uuid in uuids:
            self.forget(uuid)
            self.answered.append(uuid)
        ends = bool(self.running) and (bool(set(uuids) & set(self.running)) or not uuids
                                       or self.running[0] not in self.open)
        if ends:
            self.running = []
        outcomes = [outcome_of(uuid, result) for uuid in tasks]
        if outcomes:  # the result's usage once, on its first task: a turn is counted once (docs/guide/teams.md#usage)
            outcomes[0] = replace(outcomes[0], usage=usage_of(result))
        return ends, outcomes

    def seen(self, uuid: str) -> bool:
        """Whether the stream showed the message started or answered."""
        return uuid in self.started or uuid in self.answered

    def tasks_in_flight(self) -> list[str]:
        """The tasks Claude Code took (queued or started) whose result was not read."""
        return [u for u, kind in self.open.items() if kind == "task" and (u in self.queued or u in self.started)]
