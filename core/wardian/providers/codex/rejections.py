"""Which answers of `codex app-server` are definite rejections, and what the app may do after each: the one table.

Codex answers a request it did not carry out with a JSON-RPC error. Those raised before the request reached the
conversation (the transport's queue, the params read, the thread looked up, the turn fence checked, Core declining
"without recording or enqueueing the input") prove that nothing was accepted: a task so refused is offered again, or
answered, but never marked uncertain. Every answer not in this table leaves the outcome unknown: the delivery is
uncertain and never resent. In particular a -32603 such as `failed to submit turn input: internal error; agent loop
died unexpectedly` or `failed to inject response items: …` may come after the input was recorded.

| verdict       | what Codex said                                    | what the app does                               |
|---------------|----------------------------------------------------|-------------------------------------------------|
| `STALE_TURN`  | the turn activity is not what the request assumed  | offers the task again once that turn has ended  |
| `THREAD_GONE` | it has no such thread (never materialised, rollout | starts a fresh thread, records the change,      |
|               | deleted, not loaded in this process)               | offers the task again there                     |
| `BUSY`        | its request queue is full (-32001)                 | offers the task again a moment later            |
| `REFUSED`     | the request is invalid as made (-32600, -32602)    | answers the task with a Wardian `failed` notice |

Rules are tried in order; a message is matched by its stable start (`re.match`), never by a phrase that could occur
inside a quoted id or path. Each rule keeps Codex's words as seen and where: `real` rules are checked against the pinned
Codex, which produces each on demand (tests/providers/codex/test_rejections.py); `fake` rules come from Codex's source
and are played by the fake app-server. Seen on Codex 0.171.0 and 0.154.0 alike unless the example says otherwise.

A trap the table does not cover, because it is about a thread, not about work: `no rollout found for thread id …` from
`thread/resume` in the process that holds the thread, or while it unloads, does not prove the thread is gone. The owner
resumes only in a process of its own, at start-up, where neither can be the case.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from wardian import errors


class Verdict(StrEnum):
    STALE_TURN = "stale_turn"
    THREAD_GONE = "thread_gone"
    BUSY = "busy"
    REFUSED = "refused"


# JSON-RPC codes Codex's app-server answers with (codex-rs/app-server-protocol, codex-rs/app-server-transport).
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
OVERLOADED = -32001


@dataclass(frozen=True, slots=True)
class Rule:
    methods: frozenset[str]
    """The requests this answer is a definite rejection of."""
    codes: frozenset[int]
    pattern: re.Pattern[str]
    """Matched at the start of Codex's message (`re.match`)."""
    verdict: Verdict
    example: str
    """Codex's words, as seen."""
    seen: str
    """`real`: the pinned Codex produces it on demand (a test does); `fake`: from Codex's source, played by the fake
    app-server."""


DELIVERY_METHODS = frozenset({"turn/start", "turn/steer", "thread/inject_items", "turn/interrupt"})
_FENCED = frozenset({"turn/steer", "turn/interrupt"})
_ALL = DELIVERY_METHODS | {"thread/resume"}
_REQUEST = frozenset({INVALID_REQUEST})
_REQUEST_OR_PARAMS = frozenset({INVALID_REQUEST, INVALID_PARAMS})


def _rule(methods: frozenset[str], codes: frozenset[int], pattern: str, verdict: Verdict, example: str,
          seen: str = "real") -> Rule:
    return Rule(methods, codes, re.compile(pattern), verdict, example, seen)


RULES: tuple[Rule, ...] = (
    # The turn activity changed under the request.
    _rule(_FENCED, _REQUEST, r"no active turn to (steer|interrupt)$", Verdict.STALE_TURN, "no active turn to steer"),
    _rule(_FENCED, _REQUEST, r"expected active turn id ", Verdict.STALE_TURN,
          "expected active turn id `wrong-turn-id` but found `019ad8e1-…`"),
    _rule(frozenset({"turn/steer"}), _REQUEST, r"cannot steer a (review|compact) turn$", Verdict.STALE_TURN,
          "cannot steer a review turn"),
    # Core declined the input "without recording or enqueueing" it (its NotSubmittedReason, Debug-printed): the only
    # -32603 that proves anything (codex-rs/core/src/codex_thread.rs, `start_or_steer_turn`). Review is seen on demand;
    # the other reasons only in the source, and the fake app-server plays one.
    _rule(frozenset({"turn/start"}), frozenset({INTERNAL_ERROR}),
          r"failed to submit turn input: (ActiveTurnOutputSchemaMismatch|ActiveTurnNotSteerable \{ turn_kind: "
          r"\w+ \}|NotIdle|ServerDraining|PendingTriggerTurn|NoActiveTurn|ExpectedTurnMismatch( \{.*\})?)$",
          Verdict.STALE_TURN, "failed to submit turn input: ActiveTurnNotSteerable { turn_kind: Review }"),
    # The thread is not there.
    _rule(frozenset({"thread/resume"}), _REQUEST, r"no rollout found for thread id ", Verdict.THREAD_GONE,
          "no rollout found for thread id 019ad8e1-…"),
    _rule(DELIVERY_METHODS, _REQUEST, r"thread not found: ", Verdict.THREAD_GONE, "thread not found: 019ad8e1-…"),
    # The transport refused it before any handler saw it: its inbound queue (128 messages) was full. Seen with
    # hundreds of requests written at once, but not on demand (a fast reader keeps the queue short): the fake plays it.
    _rule(_ALL, frozenset({OVERLOADED}), r"Server overloaded", Verdict.BUSY, "Server overloaded; retry later.",
          "fake"),
    # Anything else Codex answers -32600 or -32602 to these requests is raised before they reach the conversation:
    # `Invalid request: …` (params), `invalid thread id: …`, `… requires experimentalApi capability`, `Input exceeds
    # the maximum length of 1048576 characters.`, `input must not be empty`, `items must not be empty`, ….
    _rule(_ALL, _REQUEST_OR_PARAMS, r"", Verdict.REFUSED,
          "Invalid request: unknown variant `bogus`, expected one of `text`, `image`, …"),
)


def matching_rule(method: str, exc: errors.AppServerError) -> Rule | None:
    """The first rule Codex's error answer to `method` meets, if any."""
    code = exc.details.get("rpc_code")
    return next((r for r in RULES if method in r.methods and code in r.codes and r.pattern.match(exc.message)), None)


def classify(method: str, exc: errors.AppServerError) -> Verdict | None:
    """What Codex's error answer to `method` proves, or None: the outcome is unknown."""
    rule = matching_rule(method, exc)
    return None if rule is None else rule.verdict


def as_error(method: str, exc: errors.AppServerError, **details: Any) -> errors.WardianError:
    """The error a definite rejection of `method` is raised as (THREAD_GONE aside: the runtime first replaces the
    thread), else `exc` itself: the outcome is unknown."""
    verdict = classify(method, exc)
    if verdict is Verdict.STALE_TURN:
        return errors.StaleTurn(exc.message, **details)
    if verdict is Verdict.BUSY:
        return errors.ProviderBusy(f"Codex is overloaded ({exc.message}); nothing was accepted", method=method)
    if verdict is Verdict.REFUSED:
        return errors.ProviderRefused(f"Codex refused {method}: {exc.message}; nothing was accepted", method=method)
    return exc
