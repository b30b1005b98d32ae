"""Which answers of `codex app-server` are definite rejections, and what the app may do after each: the one table.

Codex answers a request it did not carry out with a JSON-RPC error. Those raised before the request reached the
conversation (the transport's queue, the request read, the thread looked up, the turn fence checked, Core declining
"without recording or enqueueing the input") prove that nothing was accepted: a task so refused is offered again, or
answered, but never marked uncertain. Only such proof of "not admitted" is a rejection: every answer not in this table
leaves the outcome unknown, the delivery is uncertain and never resent. In particular a -32603 such as `failed to
submit turn input: internal error; agent loop died unexpectedly` or `failed to inject response items: …` may come
after the input was recorded.

| verdict       | what Codex said                                    | what the app does                               |
|---------------|----------------------------------------------------|-------------------------------------------------|
| `STALE_TURN`  | the turn activity is not what the request assumed  | offers the task again once that turn has ended  |
| `THREAD_GONE` | it has no such thread (never materialised, rollout | starts a fresh thread, records the change,      |
|               | deleted, not loaded in this process)               | offers the task again there                     |
| `BUSY`        | it cannot admit work now (overloaded, draining)    | offers the task again a moment later            |
| `REFUSED`     | the request is invalid as made                     | answers the task with a Wardian `failed` notice |
| `UNSUPPORTED` | it has no such method: a wardian/Codex version     | answers the task with a Wardian `failed` notice |
|               | mismatch, logged as such                           | that names the mismatch                         |

Each JSON-RPC code has its own outcome. What each code carries for the four deliveries (`turn/start`, `turn/steer`,
`thread/inject_items`, `turn/interrupt`) and for `thread/resume` was read in openai/codex
(https://github.com/openai/codex: `codex-rs/app-server`, `codex-rs/app-server-transport`, `codex-rs/core`) and checked
against Codex 0.154.0 and 0.171.0, which produce every `real` rule on demand. A code-wide outcome (last column) stands
on the evidence its row gives; a code whose row says "uncertain" has rules for named messages only.

| code   | what it carries (0.154.0 to 0.171.0)                        | a message no rule names                    |
|--------|-------------------------------------------------------------|--------------------------------------------|
| -32700 | never sent: the stdio transport logs a line it cannot parse | `REFUSED`, code-wide: JSON-RPC 2.0 defines |
|        | and drops it unanswered (app-server-transport               | it as "Invalid JSON was received", so      |
|        | `forward_incoming_message`): our request then times out,    | Codex read nothing; logged as a            |
|        | uncertain                                                   | wardian/Codex mismatch                     |
| -32600 | checks made before the input reaches Core: the processor's  | `REFUSED`, code-wide: every -32600 the     |
|        | (`Not initialized`, `Invalid request: <serde error>` for    | four deliveries can get is raised before   |
|        | the envelope, the method and the params, `… requires        | Core records anything (app-server          |
|        | experimentalApi capability`, `Server is draining; …`), the  | `message_processor.rs`, and in             |
|        | handlers' (thread id, thread, fence, input, items) and      | `request_processors/turn_processor.rs`     |
|        | Core's: a steer not submitted, `items must not be empty`    | `load_thread`, `turn_steer_inner`,         |
|        |                                                             | `turn_interrupt_inner`,                    |
|        |                                                             | `thread_inject_items_response_inner`;      |
|        |                                                             | core `codex_thread.rs`); a failure after   |
|        |                                                             | Core took the input is -32603              |
| -32601 | never sent: an unknown method is -32600 `Invalid request:   | `UNSUPPORTED`, code-wide: JSON-RPC 2.0     |
|        | unknown variant `<method>`, …` (the request enum's serde),  | defines it as "the method does not exist", |
|        | which the table reads as -32601; later Codex answers -32601 | as app-server `error_code.rs` does; logged |
|        | for a removed method                                        | as a wardian/Codex mismatch                |
| -32602 | `Input exceeds the maximum length of 1048576 characters.`   | `REFUSED`, code-wide: every -32602 is a    |
|        | (`turn/start`, `turn/steer`), checked before the input is   | params check made before submission        |
|        | submitted; later Codex adds `additionalContext` limits.     | (`input_too_large_error`); logged as a     |
|        | The params' serde check is -32600, not -32602               | wardian/Codex mismatch                     |
| -32603 | Core declining a turn start without recording it (`failed   | uncertain                                  |
|        | to submit turn input: <NotSubmittedReason>`), or a failure  |                                            |
|        | possibly after the input was recorded (`failed to submit    |                                            |
|        | turn input: <error>`, `failed to steer turn: …`, `failed    |                                            |
|        | to inject response items: …`, `failed to interrupt turn:    |                                            |
|        | …`)                                                         |                                            |
| -32001 | the transport's full request queue (`Server overloaded;     | `BUSY`, code-wide: the overload code is    |
|        | retry later.`); later Codex also a full root-turn capacity  | raised only where work is admitted, before |
|        |                                                             | any of it is taken (app-server-transport   |
|        |                                                             | `enqueue_incoming_message`)                |
| other  | nothing in these versions                                   | uncertain                                  |

Rules are tried in order; a message is matched by its stable start (`re.match`), never by a phrase that could occur
inside a quoted id or path. Each rule keeps Codex's words as seen and where: `real` rules are checked against Codex
0.171.0 and 0.154.0, which produce each on demand (tests/providers/codex/test_rejections.py); `fake` rules come from
Codex's source and are played by the fake app-server; `code` rules are the code-wide outcomes above.

A trap the table does not cover, because it is about a thread, not about work: `no rollout found for thread id …` from
`thread/resume` in the process that holds the thread, or while it unloads, does not prove the thread is gone. The owner
resumes only in a process of its own, at start-up, where neither can be the case.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, assert_never

from wardian import errors

log = logging.getLogger("wardian.codex.rejections")


class Verdict(StrEnum):
    STALE_TURN = "stale_turn"
    THREAD_GONE = "thread_gone"
    BUSY = "busy"
    REFUSED = "refused"
    UNSUPPORTED = "unsupported"


# JSON-RPC codes Codex's app-server answers with (codex-rs/app-server `error_code.rs`, codex-rs/app-server-transport).
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
OVERLOADED = -32001

MAX_QUOTED_CHARS = 500
"""Codex's words quoted in an error or a log line, at most: an unknown method's answer lists every method (~5 KB)."""


@dataclass(frozen=True, slots=True)
class Rule:
    methods: frozenset[str] | None
    """The requests this answer is a definite rejection of; None: any request (a check made before any handler)."""
    codes: frozenset[int]
    pattern: re.Pattern[str]
    """Matched at the start of Codex's message (`re.match`); a `method` group must name the request answered. An empty
    pattern is a code-wide rule."""
    verdict: Verdict
    example: str
    """Codex's words, as seen."""
    seen: str
    """`real`: Codex produces it on demand (a test does); `fake`: from Codex's source, played by the fake app-server;
    `code`: a code-wide outcome, on the evidence the module's table gives."""
    mismatch: bool = False
    """The answer means wardian sent a request this Codex does not accept: logged as a version mismatch."""


DELIVERY_METHODS = frozenset({"turn/start", "turn/steer", "thread/inject_items", "turn/interrupt"})
_FENCED = frozenset({"turn/steer", "turn/interrupt"})
_REQUEST = frozenset({INVALID_REQUEST})
_CORE_DECLINED = ("ActiveTurnOutputSchemaMismatch|ActiveTurnNotSteerable \\{ turn_kind: \\w+ \\}|NotIdle|"
                  "ServerDraining|PendingTriggerTurn|NoActiveTurn|ExpectedTurnMismatch( \\{.*\\})?")


def _rule(methods: frozenset[str] | None, codes: frozenset[int], pattern: str, verdict: Verdict, example: str,
          seen: str = "real", *, mismatch: bool = False) -> Rule:
    return Rule(methods, codes, re.compile(pattern), verdict, example, seen, mismatch)


def _code(methods: frozenset[str] | None, code: int, verdict: Verdict, example: str, *,
          mismatch: bool = False) -> Rule:
    """The outcome of any other message of `code` (a code-wide rule: its evidence is in the module's table)."""
    return _rule(methods, frozenset({code}), "", verdict, example, "code", mismatch=mismatch)


_STALE_TURN_RULES = (
    _rule(_FENCED, _REQUEST, r"no active turn to (steer|interrupt)$", Verdict.STALE_TURN, "no active turn to steer"),
    _rule(_FENCED, _REQUEST, r"expected active turn id ", Verdict.STALE_TURN,
          "expected active turn id `wrong-turn-id` but found `019ad8e1-…`"),
    _rule(frozenset({"turn/steer"}), _REQUEST, r"cannot steer a (review|compact) turn$", Verdict.STALE_TURN,
          "cannot steer a review turn"),
    # Core declined the input "without recording or enqueueing" it (its NotSubmittedReason, Debug-printed): the only
    # -32603 that proves anything (codex-rs/core, `start_or_steer_turn`). Review and a different output schema are seen
    # on demand; the other reasons only in the source, and the fake app-server plays one.
    _rule(frozenset({"turn/start"}), frozenset({INTERNAL_ERROR}), rf"failed to submit turn input: ({_CORE_DECLINED})$",
          Verdict.STALE_TURN, "failed to submit turn input: ActiveTurnNotSteerable { turn_kind: Review }"),
)

_THREAD_GONE_RULES = (
    _rule(frozenset({"thread/resume"}), _REQUEST, r"no rollout found for thread id ", Verdict.THREAD_GONE,
          "no rollout found for thread id 019ad8e1-…"),
    _rule(DELIVERY_METHODS, _REQUEST, r"thread not found: ", Verdict.THREAD_GONE, "thread not found: 019ad8e1-…"),
)

_BUSY_RULES = (
    # The transport refused it before any handler saw it: its inbound queue (128 messages) was full. Seen with
    # hundreds of requests written at once, but not on demand (a fast reader keeps the queue short): the fake plays it.
    _rule(None, frozenset({OVERLOADED}), r"Server overloaded", Verdict.BUSY, "Server overloaded; retry later.", "fake"),
    # Later Codex declines a turn start past its root-turn capacity with the same code, before Core takes the input.
    _rule(frozenset({"turn/start"}), frozenset({OVERLOADED}), r"Server is at its root turn capacity", Verdict.BUSY,
          "Server is at its root turn capacity; retry later.", "fake"),
    # A draining app-server (a graceful restart) admits nothing more; in 0.171.0's binary, -32600 with data
    # `{"reason": "serverShuttingDown"}`; later Codex says the same while it prepares an upgrade ("serverSwitching").
    # The owner's app-server is going away: the task waits for the next one.
    _rule(None, _REQUEST, r"Server is (draining|preparing an upgrade); retry after reconnecting$", Verdict.BUSY,
          "Server is draining; retry after reconnecting", "fake"),
    _code(None, OVERLOADED, Verdict.BUSY, "Server is at its root turn capacity; retry later."),
)

_UNSUPPORTED_RULES = (
    # The request enum's serde names a method this Codex does not have (both versions, for any request).
    _rule(None, _REQUEST, r"Invalid request: unknown variant `(?P<method>[^`]*)`, expected one of ",
          Verdict.UNSUPPORTED, "Invalid request: unknown variant `turn/bogus`, expected one of `initialize`, …",
          mismatch=True),
    _code(None, METHOD_NOT_FOUND, Verdict.UNSUPPORTED, "Method not found", mismatch=True),
)

_REFUSED_RULES = (
    _rule(None, _REQUEST, r"Not initialized$", Verdict.REFUSED, "Not initialized"),
    # The envelope or the params do not deserialize into this Codex's request types.
    _rule(None, _REQUEST, r"Invalid request: ", Verdict.REFUSED, "Invalid request: missing field `threadId`",
          mismatch=True),
    _rule(None, _REQUEST, r"\S+ requires experimentalApi capability$", Verdict.REFUSED,
          "turn/steer.additionalContext requires experimentalApi capability", mismatch=True),
    _rule(DELIVERY_METHODS, _REQUEST, r"invalid thread id: ", Verdict.REFUSED,
          "invalid thread id: invalid character: …"),
    _rule(frozenset({"turn/steer"}), _REQUEST, r"(expectedTurnId|input) must not be empty$", Verdict.REFUSED,
          "expectedTurnId must not be empty"),
    _rule(frozenset({"thread/inject_items"}), _REQUEST, r"items must not be empty$", Verdict.REFUSED,
          "items must not be empty"),
    _rule(frozenset({"thread/inject_items"}), _REQUEST, r"items\[\d+\] is not a valid response item: ",
          Verdict.REFUSED, "items[0] is not a valid response item: invalid type: integer `5`, …", mismatch=True),
    _rule(DELIVERY_METHODS, _REQUEST, r"direct app-server input is not allowed for ", Verdict.REFUSED,
          "direct app-server input is not allowed for multi-agent v2 sub-agents", "fake"),
    _code(DELIVERY_METHODS, INVALID_REQUEST, Verdict.REFUSED, "`permissions` cannot be combined with `sandboxPolicy`"),
    _rule(frozenset({"turn/start", "turn/steer"}), frozenset({INVALID_PARAMS}), r"Input exceeds the maximum length ",
          Verdict.REFUSED, "Input exceeds the maximum length of 1048576 characters.", mismatch=True),
    _code(DELIVERY_METHODS, INVALID_PARAMS, Verdict.REFUSED, "queued input must not be empty", mismatch=True),
    # Core refuses a turn with no input before it records anything; wardian never sends one.
    _rule(frozenset({"turn/start"}), frozenset({INTERNAL_ERROR}), r"failed to submit turn input: EmptyInput$",
          Verdict.REFUSED, "failed to submit turn input: EmptyInput"),
    _code(None, PARSE_ERROR, Verdict.REFUSED, "Parse error", mismatch=True),
)

RULES: tuple[Rule, ...] = (*_STALE_TURN_RULES, *_THREAD_GONE_RULES, *_BUSY_RULES, *_UNSUPPORTED_RULES,
                           *_REFUSED_RULES)


def _meets(rule: Rule, method: str, code: object, message: str) -> bool:
    if code not in rule.codes or (rule.methods is not None and method not in rule.methods):
        return False
    found = rule.pattern.match(message)
    return found is not None and found.groupdict().get("method", method) == method


def matching_rule(method: str, exc: errors.AppServerError) -> Rule | None:
    """The first rule Codex's error answer to `method` meets, if any."""
    code = exc.details.get("rpc_code")
    return next((r for r in RULES if _meets(r, method, code, exc.message)), None)


def classify(method: str, exc: errors.AppServerError) -> Verdict | None:
    """What Codex's error answer to `method` proves, or None: the outcome is unknown."""
    rule = matching_rule(method, exc)
    return None if rule is None else rule.verdict


def _quoted(message: str) -> str:
    return message if len(message) <= MAX_QUOTED_CHARS else f"{message[:MAX_QUOTED_CHARS]}…"


def as_error(method: str, exc: errors.AppServerError, **details: Any) -> errors.WardianError:
    """The error a definite rejection of `method` is raised as (THREAD_GONE aside: the runtime first replaces the
    thread), else `exc` itself: the outcome is unknown. An answer that shows wardian and this Codex disagree on the
    protocol is logged as such."""
    rule = matching_rule(method, exc)
    if rule is None:
        return exc
    said = f"{exc.details.get('rpc_code')} {_quoted(exc.message)}"
    if rule.mismatch:
        # Codex's words may quote our params back: those of these requests are task text and ids, never a credential
        # (sign-in requests never reach this table).
        log.error("Codex refused %s as a request it does not accept (%s): wardian and this Codex version disagree "
                  "on the app-server protocol", method, said)
    match rule.verdict:
        case Verdict.STALE_TURN:
            return errors.StaleTurn(exc.message, **details)
        case Verdict.THREAD_GONE:
            return exc
        case Verdict.BUSY:
            return errors.ProviderBusy(f"Codex cannot admit work now ({said}); nothing was accepted", method=method)
        case Verdict.UNSUPPORTED:
            return errors.ProviderRefused(f"this Codex has no method {method} ({said}): a wardian/Codex version "
                                          "mismatch; nothing was accepted", method=method)
        case Verdict.REFUSED:
            why = "; wardian and this Codex version disagree on it" if rule.mismatch else ""
            return errors.ProviderRefused(f"Codex refused {method}: {_quoted(exc.message)}{why}; nothing was "
                                          "accepted", method=method)
        case _:
            assert_never(rule.verdict)
