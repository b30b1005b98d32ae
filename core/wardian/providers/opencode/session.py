"""What the app observes of the agent's one OpenCode session: the facts `/event` announces (user messages, the
assistant messages answering each, busy and idle), and a loop's outcome read from its last answer.

A turn is one loop: it starts with a user message (a task we sent: its msg_ id is the turn id) and ends at
`session.idle`; its outcome is read from the assistant messages answering that user message (`parentID`): the last
one's text is the final answer, `MessageAbortedError` an interruption, any other error a failure (one that says the
provider has no key for the agent, or refused it, marks the credentials rejected).
"""

from __future__ import annotations

from typing import Any, Literal

from wardian import usage
from wardian.providers.base import OutcomeStatus, TurnOutcome
from wardian.usage import TokenUsage, total

SEEN_USER_MESSAGES = 1024  # user message ids remembered from /event, for lookups
UNKNOWN_ROOT = "unknown"  # the root of a loop seen busy before any of its user messages

Signal = Literal["busy", "idle"]


class SessionEvents:
    """The session's facts from `/event`, as they come."""

    def __init__(self) -> None:
        self.answers: dict[str, list[str]] = {}  # loop root (user msg id) -> its assistant message ids, in order
        self.last_user: str | None = None
        self.users_seen: dict[str, None] = {}  # the latest SEEN_USER_MESSAGES user message ids on /event, in order
        self.tokens: dict[str, TokenUsage] = {}  # assistant message id -> its tokens, as last reported

    def take(self, event: dict[str, Any], session_id: str | None) -> Signal | None:
        """Take one event of `/event`: "busy" when the session's loop runs, "idle" when it may have ended."""
        kind = event.get("type")
        props = event.get("properties") or {}
        if not isinstance(props, dict) or props.get("sessionID") not in (None, session_id):
            return None
        if kind == "message.updated":
            info = props.get("info") or {}
            if info.get("sessionID") == session_id:
                self._message(info)
        elif kind == "session.status" and props.get("sessionID") == session_id:
            state = (props.get("status") or {}).get("type")
            if state in ("busy", "idle"):
                return "busy" if state == "busy" else "idle"
        elif kind == "session.idle" and props.get("sessionID") == session_id:
            return "idle"
        return None

    def _message(self, info: dict[str, Any]) -> None:
        if info.get("role") == "user":
            self.last_user = str(info.get("id"))
            self.users_seen[self.last_user] = None
            if len(self.users_seen) > SEEN_USER_MESSAGES:
                del self.users_seen[next(iter(self.users_seen))]
        elif info.get("role") == "assistant" and info.get("parentID"):
            answers = self.answers.setdefault(str(info["parentID"]), [])
            if info.get("id") not in answers:
                answers.append(str(info.get("id")))
            self.took(info)

    def took(self, info: dict[str, Any]) -> None:
        """Keep an assistant message's tokens (each update reports them whole; the last one counts)."""
        tokens = tokens_of(info)
        if tokens is not None:
            self.tokens[str(info.get("id"))] = tokens

    def usage(self, root: str) -> TokenUsage | None:
        """The tokens of loop `root`: the sum over the assistant messages answering it (None when one of them
        reported none), forgotten once read."""
        ids = self.answers.get(root) or []
        found = [self.tokens.pop(i, None) for i in ids]
        return None if not found or None in found else total(found)

    def found(self, root: str, messages: Any) -> list[str]:
        """The assistant messages answering `root` among the session's `messages` (read when events may have been
        missed), remembered when there are any."""
        infos = [m["info"] for m in messages if isinstance(m, dict)
                 and (m.get("info") or {}).get("role") == "assistant" and m["info"].get("parentID") == root]
        found = [str(info["id"]) for info in infos]
        for info in infos:
            self.took(info)
        if found:
            self.answers[root] = found
        return found


def tokens_of(info: dict[str, Any]) -> TokenUsage | None:
    """An assistant message's `tokens`. OpenCode keeps `input` without the cache's reads and writes and `output`
    without `reasoning` (it subtracts them from what the model's API reported): wardian's counts add them back."""
    tokens = info.get("tokens")
    if not isinstance(tokens, dict):
        return None
    raw_cache = tokens.get("cache")
    cache: dict[str, Any] = raw_cache if isinstance(raw_cache, dict) else {}
    fresh, output = usage.count(tokens.get("input")), usage.count(tokens.get("output"))
    if fresh is None or output is None:
        return None
    read, written = usage.count(cache.get("read")) or 0, usage.count(cache.get("write")) or 0
    return TokenUsage(fresh + read + written, output + (usage.count(tokens.get("reasoning")) or 0), read)


def credentials_rejected(error: dict[str, Any]) -> bool:
    """Whether a message's error says the provider has no key or refused it: `ProviderAuthError` (no key: no
    request was sent), or `APIError` with status 401. OpenCode 1.18.33 does not retry either (a 401 is
    `isRetryable: false`), so the loop has already ended with it."""
    data = error.get("data")
    status = data.get("statusCode") if isinstance(data, dict) else None
    return error.get("name") == "ProviderAuthError" or (error.get("name") == "APIError" and status == 401)


def outcome_of(root: str, message: Any, tokens: TokenUsage | None = None) -> TurnOutcome:
    """The outcome of loop `root` from its last assistant message (`{info, parts}`), with the loop's `tokens`."""
    info = message.get("info") or {} if isinstance(message, dict) else {}
    error = info.get("error")
    if isinstance(error, dict):
        name = str(error.get("name") or "")
        detail = (error.get("data") or {}).get("message") if isinstance(error.get("data"), dict) else None
        if name == "MessageAbortedError":
            return TurnOutcome(root, OutcomeStatus.INTERRUPTED, usage=tokens)
        return TurnOutcome(root, OutcomeStatus.FAILED, error=f"{name}: {detail}" if detail else name or "error",
                           credentials_rejected=credentials_rejected(error), usage=tokens)
    parts = message.get("parts") or [] if isinstance(message, dict) else []
    texts = [str(p.get("text") or "") for p in parts if isinstance(p, dict) and p.get("type") == "text"
             and not p.get("synthetic")]
    return TurnOutcome(root, OutcomeStatus.DONE, final_text="".join(texts), usage=tokens)
