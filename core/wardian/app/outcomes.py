"""What the app publishes when a provider turn ends or a task cannot be started: the one place turn outcomes become
replies, and the one place Wardian's notices are worded (seed: "Automatic task delivery").

An exact completed turn's final answer is the reply `done`; an interrupted turn, a turn with no final text or with
one over the 64 KiB reply limit becomes an attributed Wardian `blocked` notice; a failed turn `failed`. An unknown
outcome publishes nothing: its tasks stay uncertain, never replayed.
"""

from __future__ import annotations

from wardian.model import MAX_MESSAGE_BYTES, ReplyStatus
from wardian.providers.base import OutcomeStatus, TurnOutcome


def outcome_reply(outcome: TurnOutcome) -> tuple[ReplyStatus, str] | None:
    """The reply a finished turn stands for, or None when its outcome is unknown."""
    match outcome.status:
        case OutcomeStatus.DONE:
            text = outcome.final_text or ""
            if not text.strip():
                return ReplyStatus.BLOCKED, (f"Wardian: the turn {outcome.turn_id} completed without final text; "
                                             "no answer was published.")
            size = len(text.encode("utf-8", "surrogatepass"))
            if size > MAX_MESSAGE_BYTES:
                return ReplyStatus.BLOCKED, (f"Wardian: the turn {outcome.turn_id}'s final answer is {size} bytes, "
                                             f"over the {MAX_MESSAGE_BYTES}-byte reply limit; it was not published.")
            return ReplyStatus.DONE, text
        case OutcomeStatus.INTERRUPTED:
            return ReplyStatus.BLOCKED, (f"Wardian: the turn {outcome.turn_id} was interrupted before it finished; "
                                         "no final answer was produced.")
        case OutcomeStatus.FAILED:
            detail = f": {outcome.error}" if outcome.error else ""
            return ReplyStatus.FAILED, f"Wardian: the turn {outcome.turn_id} failed{detail}"
        case OutcomeStatus.UNKNOWN:
            return None


def start_failure_notice(agent_name: str, code: str, message: str) -> str:
    """The text of the `failed` notice a pending task gets when its agent definitely could not be started."""
    return f"Wardian: agent {agent_name} could not be started for this task ({code}: {message})"
