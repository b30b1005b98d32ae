"""The one exception tree of wardian, branched by what the caller may do next.

```
WardianError                      code: a stable snake_case string; delivery: what happened to the input
├── RequestError                  the caller's input was wrong; never retry it unchanged (delivery: not_admitted)
│   ├── InvalidArguments          unknown field or wrong JSON type
│   ├── InvalidTarget, UnknownTarget, AmbiguousTarget, BroadcastNotAllowed
│   ├── EmptyMessage, MessageTooLarge, InvalidText
│   ├── InvalidLimit, InvalidTimeout, InvalidCursor, StaleCursor, InvalidStatus
│   ├── UnknownRequest, NotATask, NotRecipient, AlreadyCompleted, DeadlineExceeded
│   ├── TaskDepthExceeded, ChainBudgetExceeded (the loop guard: docs/guide/teams.md)
│   ├── MissingSession, UnknownSession, SessionHomeMismatch, Unauthenticated, StaleSession
│   ├── NotActive, Unsupported, RetiredOperation, InvalidAgentName, UnknownAgent, NotSignedIn,
│   │   UnknownCredential, InvalidTeamFile, UnknownApproval, ApprovalEnded
│   ├── NotAGitRepository, BranchCheckedOut, WorktreePathTaken, WorktreeDirty, GitNotFound, GitFailed
├── Rejected                      definitely not admitted; the app may offer the work again (StaleTurn,
│                                 ConversationGone, ProviderRefused, ProviderUnavailable, ...)
├── DeliveryUncertain             the outcome is unknown: never replay (delivery: uncertain)
├── ProviderError                 the provider answered with an error (AppServerError)
├── TransportError                failed before any byte of the request was written (delivery: not_admitted)
│   ├── AppNotRunning, AppIncompatible, UntrustedSocket, AppBusy
├── StorageError                  the store refused the write; nothing was committed (delivery: not_admitted)
│   ├── StorageFull, StorageUnavailable
└── HomeError                     the home cannot host an app (AlreadyRunning, InsecureHome, AddressInUse, ...)
```

Whether a byte of a request was written decides between `TransportError` and `DeliveryUncertain`; the
type encodes it, so no caller ever has to guess (docs/reference/errors.md).
"""

from __future__ import annotations

from enum import StrEnum

# `typing` is not imported at run time: it is a sizeable part of the CLI's cold start (docs/benchmarks.md).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, ClassVar
class Delivery(StrEnum):
    """What happened to the caller's input when an operation ended."""

    NOT_ADMITTED = "not_admitted"
    ADMITTED = "admitted"
    UNCERTAIN = "uncertain"


class WardianError(Exception):
    """Base of every error wardian raises on purpose."""

    code: ClassVar[str] = "internal_error"
    delivery: ClassVar[Delivery] = Delivery.NOT_ADMITTED

    def __init__(self, message: str, *, field: str | None = None, allowed: str | None = None,
                 **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.allowed = allowed
        self.details = details

    def to_data(self) -> dict[str, Any]:
        """The structured form used on every wire (app JSON-RPC `data`, MCP `structuredContent.error`)."""
        data: dict[str, Any] = {"code": self.code, "message": self.message, "delivery": str(self.delivery)}
        if self.field is not None:
            data["field"] = self.field
        if self.allowed is not None:
            data["allowed"] = self.allowed
        data.update(self.details)
        return data


class InternalError(WardianError):
    """A bug or an unexpected failure inside the app; the operation did not complete."""

    code = "internal_error"


# --- caller's fault -------------------------------------------------------------------------------------


class RequestError(WardianError):
    """The request was wrong; nothing was changed. Fix the input before trying again."""

    code = "invalid_request"


class InvalidArguments(RequestError):
    code = "invalid_arguments"


class InvalidTarget(RequestError):
    code = "invalid_target"


class UnknownTarget(RequestError):
    code = "unknown_target"


class AmbiguousTarget(RequestError):
    code = "ambiguous_target"


class BroadcastNotAllowed(RequestError):
    code = "broadcast_not_allowed"


class EmptyMessage(RequestError):
    code = "empty_message"


class MessageTooLarge(RequestError):
    code = "message_too_large"


class InvalidText(RequestError):
    code = "invalid_text"


class InvalidLimit(RequestError):
    code = "invalid_limit"


class InvalidTimeout(RequestError):
    code = "invalid_timeout"


class InvalidCursor(RequestError):
    code = "invalid_cursor"


class StaleCursor(RequestError):
    code = "stale_cursor"


class InvalidStatus(RequestError):
    code = "invalid_status"


class UnknownRequest(RequestError):
    code = "unknown_request"


class NotATask(RequestError):
    code = "not_a_task"


class NotRecipient(RequestError):
    code = "not_recipient"


class AlreadyCompleted(RequestError):
    code = "already_completed"


class DeadlineExceeded(AlreadyCompleted):
    """The task's deadline passed and the app ended it (`failed`, reason deadline_exceeded): a reply is too late."""

    code = "deadline_exceeded"


class TaskDepthExceeded(RequestError):
    code = "task_depth_exceeded"


class ChainBudgetExceeded(RequestError):
    code = "chain_budget_exceeded"


class MissingSession(RequestError):
    code = "missing_session"


class UnknownSession(RequestError):
    code = "unknown_session"


class SessionHomeMismatch(RequestError):
    code = "session_home_mismatch"


class Unauthenticated(RequestError):
    code = "unauthenticated"


class StaleSession(RequestError):
    """A managed session of an earlier runtime generation: the agent was started again since."""

    code = "stale_session"


class NotActive(RequestError):
    code = "not_active"


class Unsupported(RequestError):
    code = "unsupported"


class RetiredOperation(RequestError):
    code = "retired_operation"


class InvalidAgentName(RequestError):
    code = "invalid_agent_name"


class InvalidProvider(RequestError):
    code = "invalid_provider"


class RegistrationConflict(RequestError):
    """`[mcp_servers.wardian]` exists and is not a registration of this home's wardian; nothing was changed."""

    code = "registration_conflict"


class CliNotFound(RequestError):
    """The `wardian` executable to register cannot be found; nothing was changed."""

    code = "cli_not_found"


class NotSignedIn(RequestError):
    """The agent has no credential its provider accepts: nothing was started. The message names the fix
    (`wardian auth login PROVIDER`)."""

    code = "not_signed_in"


class UnknownCredential(RequestError):
    """No credential is stored under the provider and name given (`wardian auth logout`); nothing was changed."""

    code = "unknown_credential"


class InvalidTeamFile(RequestError):
    """The team file (`wardian.toml`) is not valid: the message lists every problem as `FILE:LINE: field: what is
    allowed` (`problems` holds them); nothing was started or changed."""

    code = "invalid_team_file"


class UnknownAgent(RequestError):
    code = "unknown_agent"


class NotAGitRepository(RequestError):
    """A worktree was asked for an agent whose repository is not a git work tree; nothing was created."""

    code = "not_a_git_repository"


class BranchCheckedOut(RequestError):
    """The agent's branch is checked out in another worktree (`where`); nothing was created."""

    code = "branch_checked_out"


class WorktreePathTaken(RequestError):
    """The agent's worktree path exists and is not that worktree (or another agent works there); nothing created."""

    code = "worktree_path_taken"


class WorktreeDirty(RequestError):
    """The worktree holds changes (`changed` lists them): it was not removed, nor was anything else."""

    code = "worktree_dirty"


class GitNotFound(RequestError):
    """No `git` executable on the app's PATH; nothing was created."""

    code = "git_not_found"


class GitFailed(RequestError):
    """git refused or did not answer in time (its message says why); nothing wardian did was kept."""

    code = "git_failed"


class UnknownApproval(RequestError):
    """No approval of this home has that `apr_…` id."""

    code = "unknown_approval"


class ApprovalEnded(RequestError):
    """The approval already ended (answered, expired or withdrawn); nothing changed. The error names its status."""

    code = "approval_ended"


class MethodNotFound(RequestError):
    code = "method_not_found"


# --- definitely not admitted; may be offered again -------------------------------------------------------


class Rejected(WardianError):
    """The provider definitely did not admit the work; the app may offer it again."""

    code = "rejected"


class StaleTurn(Rejected):
    code = "stale_turn"


class WriterFenceChanged(Rejected):
    code = "writer_fence_changed"


class ProviderUnavailable(Rejected):
    """The provider connection failed before the request was written: certainly not admitted."""

    code = "provider_unavailable"


class ConversationGone(Rejected):
    """The provider has no such conversation (any more): nothing was accepted. The provider has replaced it with a
    fresh one by the time this is raised, so the work can be offered again there."""

    code = "conversation_gone"


class ProviderBusy(Rejected):
    """The provider refused the request because it is overloaded, before accepting anything: offer it again shortly."""

    code = "provider_busy"


class ProviderRefused(Rejected):
    """The provider refused the request as it was made (invalid for it) before accepting anything: certainly not
    admitted, and offering the same request again cannot help."""

    code = "provider_refused"


# --- outcome unknown: never replay -----------------------------------------------------------------------


class DeliveryUncertain(WardianError):
    """The request may or may not have taken effect. Do not send it again automatically."""

    code = "uncertain"
    delivery = Delivery.UNCERTAIN


# --- transport: nothing was written ----------------------------------------------------------------------


class TransportError(WardianError):
    """The request was never written to the app, so it certainly had no effect."""

    code = "transport_error"


class AppNotRunning(TransportError):
    code = "app_not_running"


class AppIncompatible(TransportError):
    code = "app_incompatible"


class UntrustedSocket(TransportError):
    """The home's `run/` or socket is not this user's alone, or another user listens on it: nothing was sent (no
    session secret, no text). The message names the path and its owner (`path`, `owner_uid`, `owner`).

    Not `AppNotRunning`: starting an app there is no fix. `owner_uid` is whoever owns `path` or listens on it (None
    when that could not be read); `expected_uid` is the caller's effective uid, root's included."""

    code = "untrusted_socket"


class AppBusy(TransportError):
    """The app holds as many control connections as it allows, each with a request in flight, and read nothing of
    this request: it certainly had no effect; call again shortly."""

    code = "app_busy"


# --- storage ---------------------------------------------------------------------------------------------


class StorageError(WardianError):
    """The store refused the change; it was rolled back and nothing was admitted."""

    code = "storage_unavailable"


class StorageFull(StorageError):
    code = "storage_full"


class StorageUnavailable(StorageError):
    code = "storage_unavailable"


class StoreCorrupt(StorageError):
    code = "store_corrupt"


# --- provider ----------------------------------------------------------------------------------------------


class ProviderError(WardianError):
    """The provider (Codex app-server) answered a request with an error."""

    code = "provider_error"


class AppServerError(ProviderError):
    """A JSON-RPC error response from `codex app-server` (`rpc_code`, message as Codex wrote it)."""

    code = "app_server_error"


# --- the home --------------------------------------------------------------------------------------------


class HomeError(WardianError):
    """The home cannot host a running app."""

    code = "home_error"


class AlreadyRunning(HomeError):
    code = "already_running"


class InsecureRuntimeDir(HomeError):
    code = "insecure_runtime_dir"


class InsecureHome(HomeError):
    """The home is open to other users and no app made it so; the message names the path and the fix."""

    code = "insecure_home"


class ForeignHome(InsecureHome):
    """The home is a folder wardian did not make and that holds other files (`/`, `/etc`, a person's own home);
    nothing in it was changed. The message names the path, some of what it holds, and the fix."""

    code = "foreign_home"


class HomePathTooLong(HomeError):
    code = "home_path_too_long"


class UnsupportedFilesystem(HomeError):
    code = "unsupported_filesystem"


class AddressInUse(HomeError):
    """The address the app was asked to listen on (the web console's) is taken by another program; nothing was
    started. The message names the address and how to choose another."""

    code = "address_in_use"


def _all_subclasses(cls: type[WardianError]) -> list[type[WardianError]]:
    out: list[type[WardianError]] = []
    for sub in cls.__subclasses__():
        out.append(sub)
        out.extend(_all_subclasses(sub))
    return out


def error_class_for(code: str) -> type[WardianError]:
    """The most specific error class whose code is `code` (InternalError when unknown)."""
    return _BY_CODE.get(code, InternalError)


def from_data(data: dict[str, Any]) -> WardianError:
    """Rebuild an error from its wire form (the inverse of `WardianError.to_data`)."""
    known = {"code", "message", "delivery", "field", "allowed"}
    cls = error_class_for(str(data.get("code", "internal_error")))
    err = cls(str(data.get("message", "")), field=data.get("field"), allowed=data.get("allowed"),
              **{k: v for k, v in data.items() if k not in known})
    return err


_BY_CODE: dict[str, type[WardianError]] = {}
for _cls in [WardianError, *_all_subclasses(WardianError)]:
    # The most derived class wins for a shared code (e.g. StorageError and StorageUnavailable).
    if _cls.code not in _BY_CODE or issubclass(_cls, _BY_CODE[_cls.code]):
        _BY_CODE[_cls.code] = _cls
