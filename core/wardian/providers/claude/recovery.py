"""What a killed app lost, settled from Claude Code's own session transcript at the next app start (never by asking
the model, never by resending).

The app chose each message's uuid and recorded it with the task before writing it, so the transcript answers for
each lost delivery: its turn answered (the final assistant text: the task's `done` reply), it was taken but its
turn never answered, or it is not there (it may never have reached Claude Code). The Claude Code process the killed
app left running is ended first: it may still be writing the turn, and a transcript read while it runs could miss
an answer about to be written, or see one the task's reply would then race.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from wardian.providers.base import Finding, LostDelivery, OutcomeStatus, Recovery, TurnOutcome
from wardian.providers.claude import homes, transcript
from wardian.providers.homes import end_left_behind

log = logging.getLogger("wardian.claude")


def end_recorded(name: str, pid_path: Path, config_dir: Path) -> None:
    """End the Claude Code process group a killed app left running for the agent (recorded at `pid_path`, and still
    running on the agent's `config_dir`), and wait until its leader is gone."""
    end_left_behind(pid_path, "CLAUDE_CONFIG_DIR", config_dir, agent=name, label="the Claude Code process")


def recover(deliveries: Sequence[LostDelivery]) -> list[Recovery]:
    """Settle the lost deliveries of one agent from its transcript (blocking: run it off the event loop). A delivery
    whose transcript cannot be read is left out: it stays as it is (uncertain)."""
    if not deliveries:
        return []
    first = deliveries[0]
    config_dir = homes.config_dir_of(first.agent_dir)
    end_recorded(first.agent_name, first.pid_path, config_dir)
    settled: list[Recovery] = []
    for delivery in deliveries:
        if delivery.message_id is None or delivery.thread_id is None:
            settled.append(Recovery(delivery.request_id, Finding.NOT_FOUND))
            continue
        try:
            path = transcript.transcript_path(config_dir, delivery.workspace, delivery.thread_id)
            found = transcript.look_up(path, delivery.message_id)
        except OSError as exc:
            log.warning("%s: the transcript of session %s could not be read (%s); task %s stays uncertain",
                        delivery.agent_name, delivery.thread_id, exc, delivery.request_id)
            continue
        settled.append(_finding(delivery, found))
    return settled


def _finding(delivery: LostDelivery, found: transcript.Found | None) -> Recovery:
    if found is None:
        return Recovery(delivery.request_id, Finding.NOT_FOUND)
    if found.final_text is None:
        return Recovery(delivery.request_id, Finding.TAKEN)
    assert delivery.message_id is not None
    return Recovery(delivery.request_id, Finding.ANSWERED,
                    TurnOutcome(delivery.message_id, OutcomeStatus.DONE, final_text=found.final_text))
