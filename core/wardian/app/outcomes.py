"""What the app publishes when a provider turn ends or a task cannot be started: the one place turn outcomes become
replies, and the one place Wardian's notices are worded (contract rules CMP-1..CMP-5, UNC-4).

An exact completed turn's final answer is the reply `done`; an interrupted turn, a turn with no final text or with
one over the 64 KiB reply limit becomes an attributed Wardian `blocked` notice; a failed turn `failed`. An unknown
outcome publishes nothing: its tasks stay uncertain, never replayed.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

from wardian.approvals import Approval
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
        case OutcomeStatus.FAILED if outcome.credentials_rejected:
            detail = f" ({outcome.error})" if outcome.error else ""
            return ReplyStatus.FAILED, (f"Wardian: the turn {outcome.turn_id} failed: the provider rejected the "
                                        f"agent's credentials{detail}. Sign in again (`wardian auth login`), then "
                                        "restart the agent.")
        case OutcomeStatus.FAILED:
            detail = f": {outcome.error}" if outcome.error else ""
            return ReplyStatus.FAILED, f"Wardian: the turn {outcome.turn_id} failed{detail}"
        case OutcomeStatus.UNKNOWN:
            return None


DEADLINE_NOTICE = ("Wardian: this task's deadline passed before it was answered; it failed (deadline_exceeded), its "
                   "turn, if one still ran it, was interrupted, and a late reply from its recipient is refused.")


def start_failure_notice(agent_name: str, code: str, message: str) -> str:
    """The text of the `failed` notice a pending task gets when its agent definitely could not be started."""
    return f"Wardian: agent {agent_name} could not be started for this task ({code}: {message})"


def refused_notice(agent_name: str, code: str, message: str) -> str:
    """The text of the `failed` notice a task gets when its agent's provider refused it before accepting anything."""
    return (f"Wardian: the provider of agent {agent_name} refused this task before accepting any of it ({code}: "
            f"{message}); it was not delivered, and offering it again unchanged would be refused too.")


# Why a delivery is uncertain, as `wardian message show` tells the operator (never resent; check, then decide).
RESTART_LOST = "the app stopped before this task's turn was seen to end (or before its submission was acknowledged)"
RESTART_TAKEN = ("the app stopped while this task's turn ran: the provider's record shows the message was taken, "
                 "but its turn never answered, and the process that ran it is gone")
RESTART_NOT_FOUND = ("the app stopped before this task's turn was seen to end, and the provider's record of the "
                     "conversation does not have the message: it may never have arrived")
PUSH_INTERRUPTED = "the app stopped while pushing this record into its recipient's conversation"


def runtime_lost(generation: int) -> str:
    return f"the agent's provider runtime (generation {generation}) ended before this task's turn was seen to end"


def unknown_outcome(turn_id: str) -> str:
    return f"the provider reported that turn {turn_id} ended, with an outcome wardian cannot tell"


def submission_unknown(code: str, message: str) -> str:
    return f"the provider's answer to the submission was lost or unclear ({code}: {message})"


def push_unknown(code: str, message: str) -> str:
    return f"the provider's answer to the push was lost or unclear ({code}: {message})"


def removed_notice(agent_name: str) -> str:
    """The `failed` notice each open task of a removed agent gets."""
    return f"Wardian: agent {agent_name} was removed before it answered this task; nothing more will come of it."


REMOVED_UNCERTAIN = "its recipient was removed before this task's turn was seen to end"


def approval_for_lead(approval: Approval) -> str:
    """What a lead reads of an approval routed to it (docs/guide/approvals.md#the-lead-answers): who asks what, for
    which of its tasks, by when, and how to answer. Summary and detail are already redacted by the provider runtime."""
    task = f"your task {approval.request_id}" if approval.request_id else "a task of yours"
    by = "" if approval.deadline_at is None else (
        " Unanswered by " + datetime.fromtimestamp(approval.deadline_at / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        + ", it is denied.")
    return (f"Wardian: approval {approval.approval_id}. Agent {approval.agent.name}, working on {task}, asks "
            f"permission: {approval.summary}\n"
            f"detail: {json.dumps(approval.detail, ensure_ascii=False, sort_keys=True)}\n"
            f"Answer with the answer_approval tool: approval_id \"{approval.approval_id}\", decision \"allow\" or "
            f"\"deny\" (with deny, a reason the agent reads).{by}")
