"""The request log's record, and the readers of a request body that depend on its dialect."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from wardian_harness.models.scripted_model.dialects import dialect_of
from wardian_harness.models.scripted_model.reading import FunctionCallOutput, developer_texts, role_texts, user_texts
from wardian_harness.models.scripted_model.steps import CHAT_TITLE_PROMPT, TITLE_PROMPT, JsonDict


def function_call_outputs(body: Mapping[str, Any], path: str | None = None) -> list[FunctionCallOutput]:
    """Every tool result in a request, in order, named after its matching call: the Responses dialect's
    `function_call_output` items, or the chat dialect's `role: tool` messages (namespace `mcp__<server>` for an
    OpenCode `<server>_<tool>` function), or the Messages dialect's `tool_result` blocks. `path`, the request's
    path, names the dialect when given."""
    return dialect_of(body, path).tool_outputs(body)


def is_title_request(body: Mapping[str, Any]) -> bool:
    """Whether a request is a provider's title helper (answered without consuming a script step)."""
    instructions = body.get("instructions")
    texts = [*user_texts(body), *developer_texts(body), instructions if isinstance(instructions, str) else "",
             *role_texts(body, "system")]
    return any(TITLE_PROMPT in t or CHAT_TITLE_PROMPT in t for t in texts)


def offered_tools(body: Mapping[str, Any], namespace: str = "mcp__wardian",
                  path: str | None = None) -> dict[str, JsonDict]:
    """The function tools offered inside `namespace` (e.g. "mcp__wardian"), by tool name; {} when absent. In the
    chat dialect, OpenCode's `wardian_<tool>` functions (the server name before the first underscore); in the
    Messages dialect, Claude Code's `mcp__wardian__<tool>` tools."""
    return dialect_of(body, path).offered_tools(body, namespace)


KEY_HEADERS = ("authorization", "x-api-key", "x-goog-api-key")
"""The headers a model request carries its key in (`Authorization: Bearer K` for OpenAI-style APIs, `x-api-key: K`
for Anthropic's); never stored."""
UNAUTHORIZED = "unauthorized"
"""`answered_by` of a request answered 401 because it did not carry the agent's required key."""


def key_fingerprint(key: str) -> str:
    """What the request log keeps of a key: a short digest, so an assertion that compares keys never prints one."""
    return "key-sha256:" + hashlib.sha256(key.encode()).hexdigest()[:16]


def carried_keys(headers: Mapping[str, str]) -> list[str]:
    """The keys a request carries, whatever the dialect: a Bearer `Authorization`, then `x-api-key`, then Gemini's
    `x-goog-api-key` (names lower-cased)."""
    keys: list[str] = []
    scheme, _, value = headers.get("authorization", "").strip().partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        keys.append(value.strip())
    for name in ("x-api-key", "x-goog-api-key"):
        if headers.get(name, "").strip():
            keys.append(headers[name].strip())
    return keys


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """One model request as the server received it (its key headers removed; `key` is a fingerprint)."""

    agent: str
    index: int  # 0-based position in this agent's log
    path: str
    headers: Mapping[str, str]  # lower-cased names, without authorization and x-api-key
    has_authorization: bool
    body: JsonDict
    received_at_ms: int  # Unix ms
    answered_by: str  # repr of the step that answered, "exhausted", or UNAUTHORIZED
    key: str | None = None
    """`key_fingerprint` of the key the request carried (the required one when it carried several), None without."""
    received_at_ns: int = 0
    """The same reading as `received_at_ms` in Unix ns (a benchmark's resolution)."""

    @property
    def unauthorized(self) -> bool:
        """Whether the request was answered 401: it lacked the agent's required key (no step was consumed)."""
        return self.answered_by == UNAUTHORIZED

    def carried(self, key: str) -> bool:
        """Whether the request carried exactly `key` (compared by fingerprint: a failing assertion prints no key)."""
        return self.key == key_fingerprint(key)

    @property
    def exhausted(self) -> bool:
        """Whether the script had run out, so the default message answered."""
        return self.answered_by == "exhausted"

    @property
    def turn_metadata(self) -> JsonDict:
        """The parsed `x-codex-turn-metadata` header ({} when absent or unreadable)."""
        try:
            value = json.loads(self.headers.get("x-codex-turn-metadata", ""))
        except ValueError:
            return {}
        return value if isinstance(value, dict) else {}

    @property
    def turn_id(self) -> str | None:
        """The Codex turn this request samples for, from `x-codex-turn-metadata`."""
        value = self.turn_metadata.get("turn_id")
        return value if isinstance(value, str) else None

    def user_texts(self) -> list[str]:
        """See `user_texts`."""
        return user_texts(self.body)

    def developer_texts(self) -> list[str]:
        """See `developer_texts`."""
        return developer_texts(self.body)

    def function_call_outputs(self) -> list[FunctionCallOutput]:
        """See `function_call_outputs`."""
        return function_call_outputs(self.body, self.path)

    def offered_tools(self, namespace: str = "mcp__wardian") -> dict[str, JsonDict]:
        """See `offered_tools`."""
        return offered_tools(self.body, namespace, self.path)

