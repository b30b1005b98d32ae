"""The app's method table: one entry per method in `METHODS`, name -> (params model, result type), and the functions
that serve them.

`METHODS` is the only method table: the app's service registers one handler function per entry with a `Handlers`
table (a missing, unknown or second handler fails at import), and the contract tests validate every method's actual
result against the result type it declares (`validate_result`). `parse_params` turns a validation failure into the
one wardian error that names the field and what is allowed.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Generic, TypeVar, cast

from pydantic import TypeAdapter, ValidationError

from wardian import errors
from wardian.durations import DEADLINE_ALLOWED
from wardian.model import DEFAULT_RECEIVE_LIMIT, MAX_MESSAGE_BYTES, MAX_RECEIVE_LIMIT, MAX_WAIT_MS
from wardian.overrides import MAX_OVERRIDES
from wardian.protocol.methods import agents as a
from wardian.protocol.methods import approvals as ap
from wardian.protocol.methods import chains as ch
from wardian.protocol.methods import mailbox as mb
from wardian.protocol.methods import messages as m
from wardian.protocol.methods import operator as op
from wardian.protocol.methods import story as st
from wardian.protocol.methods import tasks as t
from wardian.protocol.methods import worktrees as w
from wardian.protocol.methods.base import EmptyParams, OkResult, Params
from wardian.taskpolicy import (
    DEFAULT_MAX_CHAIN_TASKS,
    DEFAULT_MAX_TASK_DEPTH,
    MAX_CHAIN_TASKS_LIMIT,
    MAX_TASK_DEPTH_LIMIT,
)


@dataclass(frozen=True, slots=True)
class Method:
    """One app method: its params model, its result type and whether it acts for a session's caller."""

    params: type[Params]
    result: Any  # a closed TypedDict class
    needs_session: bool
    doc: str


METHODS: dict[str, Method] = {
    "message/send": Method(m.MessageSendParams, m.SendResult, True, "Send information to one agent."),
    "task/followup": Method(t.TaskFollowupParams, m.SendResult, True, "Assign a task; returns its request id."),
    "mailbox/receive": Method(mb.MailboxReceiveParams, mb.ReceiveResult, True, "Read and acknowledge records."),
    "mailbox/wait": Method(mb.MailboxWaitParams, mb.WaitResult, True, "Wait for mailbox activity (no body)."),
    "task/reply": Method(t.TaskReplyParams, t.ReplyResult, True, "Complete an assigned task."),
    "agent/interrupt": Method(a.AgentInterruptParams, a.InterruptResult, True, "Interrupt an active turn."),
    "session/announce": Method(a.SessionAnnounceParams, OkResult, True,
                               "A managed agent's MCP server has listed its tools to the agent."),
    "agent/list": Method(a.AgentListParams, a.AgentListResult, False, "List agents."),
    "agent/add": Method(a.AgentAddParams, a.AgentResult, False, "Register a managed agent."),
    "agent/session": Method(a.AgentSessionParams, a.AgentSessionResult, False, "Issue a session token."),
    "mailbox/records": Method(mb.MailboxRecordsParams, mb.MailboxRecordsResult, False, "Every record (operator)."),
    "agent/start": Method(a.AgentStartParams, a.AgentStartResult, False, "Start an agent's provider runtime."),
    "agent/stop": Method(a.AgentStopParams, a.AgentStopResult, False,
                         "Stop an agent's provider runtime (explicit off)."),
    "agent/attach": Method(a.AgentAttachParams, a.AgentAttachResult, False,
                           "How a terminal UI attaches to an agent."),
    "app/status": Method(EmptyParams, op.AppStatusResult, False, "The app's status."),
    "app/stop": Method(EmptyParams, OkResult, False, "Stop the app."),
    "agent/remove": Method(a.AgentRemoveParams, a.AgentRemoveResult, False,
                           "Remove an agent: stop it, revoke its sessions, answer its open tasks."),
    "worktree/remove": Method(w.WorktreeRemoveParams, a.WorktreeRemoveResult, False,
                              "Remove a stopped agent's clean worktree (it is made again at its next start)."),
    "agent/revoke": Method(a.AgentRevokeParams, a.AgentRevokeResult, False,
                           "Revoke an agent's operator-minted sessions (all of them with `all`)."),
    "request/show": Method(st.RequestShowParams, st.RecordStoryResult, False,
                           "Every fact about one record (operator)."),
    "request/status": Method(st.RequestStatusParams, st.RecordStoryResult, True,
                             "The story of a task the caller sent."),
    # The operator and the web console: the control socket's owner acts as the operator.
    "operator/send": Method(op.OperatorSendParams, m.SendResult, False, "Send information as the operator."),
    "operator/followup": Method(ch.OperatorFollowupParams, m.SendResult, False, "Assign a task as the operator."),
    "operator/receive": Method(op.OperatorReceiveParams, mb.ReceiveResult, False,
                               "Read and acknowledge the operator's records (replies to its tasks)."),
    "operator/interrupt": Method(op.OperatorInterruptParams, a.InterruptResult, False,
                                 "Interrupt an agent's active turn as the operator."),
    "agent/overview": Method(EmptyParams, op.AgentOverviewListResult, False,
                             "Every agent with its pending and in-flight tasks (operator)."),
    "exchange/page": Method(st.ExchangePageParams, st.ExchangePageResult, False,
                            "A page of every record, newest first, filtered (operator)."),
    "request/trace": Method(st.RequestTraceParams, st.RequestTraceResult, False,
                            "A record's story with its answer's and its turn's interrupts (operator)."),
    "approval/list": Method(ap.ApprovalListParams, ap.ApprovalListResult, False,
                            "The pending approvals (or the newest of all) (operator)."),
    "approval/show": Method(ap.ApprovalShowParams, ap.ApprovalResult, False, "One approval (operator)."),
    "approval/answer": Method(ap.ApprovalAnswerParams, ap.ApprovalResult, False,
                              "Allow or deny a pending approval as a person (operator)."),
    "console/login": Method(EmptyParams, op.ConsoleLoginResult, False,
                            "A fresh one-time login URL of the web console (operator)."),
    "team/policy": Method(ch.TeamPolicyParams, op.TeamPolicyResult, False,
                          "Set the team's task deadline and loop-guard limits (operator; `wardian up`)."),
}

# The first protocol's control operations, retired: they answer with `retired_operation` and never deliver.
RETIRED_METHODS = frozenset({"send", "ask", "message/ask", "mailbox/send", "terminal/send", "surface/send"})


# --- handlers ------------------------------------------------------------------------------------------------

S = TypeVar("S")
P = TypeVar("P")
R = TypeVar("R")
Handler = Callable[[S, Any], Awaitable[Any]]


class Handlers(Generic[S]):
    """The functions that serve `METHODS`, one per method, each called with the service `S` and the parsed params.

    The protocol cannot import the app, so the app fills this table: `@handlers.serves("message/send")` on each
    function, then `handlers.complete()` once every module has registered, which fails (at import) on a method
    without its function. A name `METHODS` lacks, or a second function for one method, fails as it is registered.
    """

    def __init__(self) -> None:
        self._by_method: dict[str, Handler[S]] = {}

    def serves(self, method: str) -> Callable[[Callable[[S, P], Awaitable[R]]], Callable[[S, P], Awaitable[R]]]:
        def register(fn: Callable[[S, P], Awaitable[R]]) -> Callable[[S, P], Awaitable[R]]:
            if method not in METHODS:
                raise LookupError(f"{fn.__qualname__} serves {method!r}, which is no method of METHODS")
            if method in self._by_method:
                raise LookupError(f"{method!r} has two handlers: {self._by_method[method].__qualname__} and "
                                  f"{fn.__qualname__}")
            self._by_method[method] = fn
            return fn

        return register

    def complete(self) -> Mapping[str, Handler[S]]:
        """The finished table, read-only.

        Raises:
            LookupError: a method of `METHODS` has no handler.
        """
        missing = [name for name in METHODS if name not in self._by_method]
        if missing:
            raise LookupError(f"methods without a handler: {', '.join(missing)}")
        return MappingProxyType(dict(self._by_method))


# --- params ---------------------------------------------------------------------------------------------------

# The error a wrong value of each field stands for.
_FIELD_ERRORS: dict[str, type[errors.RequestError]] = {
    "target": errors.InvalidTarget,
    "limit": errors.InvalidLimit,
    "timeout_ms": errors.InvalidTimeout,
    "cursor": errors.InvalidCursor,
    "ack_cursor": errors.InvalidCursor,
    "status": errors.InvalidStatus,
    "request_id": errors.UnknownRequest,
    "id": errors.UnknownRequest,
    "name": errors.InvalidAgentName,
    "provider": errors.InvalidProvider,
    "session": errors.MissingSession,
    "mode": errors.InvalidArguments,
}
_ALLOWED: dict[str, str] = {
    "limit": f"an integer 1..{MAX_RECEIVE_LIMIT}, or null for {DEFAULT_RECEIVE_LIMIT}",
    "timeout_ms": f"an integer 0..{MAX_WAIT_MS} (milliseconds)",
    "status": "done, blocked, failed",
    "target": "one agent name or UUID",
    "cursor": "a cursor returned by an earlier receive",
    "ack_cursor": "a cursor returned by an earlier receive",
    "message": f"a string of 1..{MAX_MESSAGE_BYTES} UTF-8 bytes",
    "request_id": "an ask_ request id",
    "id": "an ask_, msg_, rep_ or ntc_ id",
    "mode": "background, attached",
    "config": f"at most {MAX_OVERRIDES} key=value strings",
    "kind": "information, task, reply, notice",
    "before": "the seq of a record of an earlier page (an integer >= 1)",
    "agent": "one agent's name or UUID",
    "deadline_ms": DEADLINE_ALLOWED,
    "task_deadline_ms": DEADLINE_ALLOWED,
    "max_task_depth": f"an integer 1..{MAX_TASK_DEPTH_LIMIT}, or null for {DEFAULT_MAX_TASK_DEPTH}",
    "max_chain_tasks": f"an integer 1..{MAX_CHAIN_TASKS_LIMIT}, or null for {DEFAULT_MAX_CHAIN_TASKS}",
}
_MISSING: dict[str, type[errors.RequestError]] = {
    "message": errors.EmptyMessage,
    "target": errors.InvalidTarget,
    "status": errors.InvalidStatus,
    "session": errors.MissingSession,
}


def parse_params(method: str, params: Any) -> Params:
    """Validate `params` for `method`.

    Raises:
        MethodNotFound, RetiredOperation, InvalidArguments or the field's own error.
    """
    if method in RETIRED_METHODS:
        raise errors.RetiredOperation(
            f"{method!r} is a retired v1 control operation and delivers nothing; use message/send for "
            "information or task/followup for work")
    spec = METHODS.get(method)
    if spec is None:
        raise errors.MethodNotFound(f"unknown method {method[:80]!r}", allowed=", ".join(METHODS))
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise errors.InvalidArguments("params must be a JSON object", field="params")
    if spec.needs_session and not cast(dict[str, Any], params).get("session"):
        raise errors.MissingSession(
            "no managed caller: set WARDIAN_SESSION_ID (print it with `wardian agent env NAME`) in the "
            "environment of the CLI or MCP server", field="session")
    try:
        return spec.params.model_validate(params)
    except ValidationError as exc:
        raise _translate(exc) from None


def _translate(exc: ValidationError) -> errors.WardianError:
    problems = exc.errors(include_url=False)
    # Unknown fields first: "sender" on a send is the one mistake the caller must hear about.
    problems.sort(key=lambda e: e["type"] != "extra_forbidden")
    first = problems[0]
    field = str(first["loc"][0]) if first["loc"] else "params"
    ctx = first.get("ctx") or {}
    original = ctx.get("error")
    if isinstance(original, errors.WardianError):
        return original
    if first["type"] == "extra_forbidden":
        return errors.InvalidArguments(f"unknown argument {field!r}", field=field)
    if first["type"] == "missing":
        cls = _MISSING.get(field, errors.InvalidArguments)
        return cls(f"{field} is required", field=field, allowed=_ALLOWED.get(field))
    cls = _FIELD_ERRORS.get(field, errors.InvalidArguments)
    return cls(f"{field} is invalid: {first['msg']}", field=field, allowed=_ALLOWED.get(field))


# --- results --------------------------------------------------------------------------------------------------


@functools.cache
def _result_adapter(method: str) -> TypeAdapter[Any]:
    return TypeAdapter(METHODS[method].result)


def validate_result(method: str, value: Any) -> Any:
    """Check a method's actual result against its declared result type (contract tests; not on the hot path).

    Raises:
        pydantic.ValidationError: a key is missing, extra or of the wrong type.
    """
    return _result_adapter(method).validate_python(value, strict=True)
