"""The request log's record, and the readers of a request body that depend on its dialect."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from wardian_harness.scripted_model.dialects import dialect_of
from wardian_harness.scripted_model.reading import FunctionCallOutput, developer_texts, role_texts, user_texts
from wardian_harness.scripted_model.steps import CHAT_TITLE_PROMPT, TITLE_PROMPT, JsonDict


def function_call_outputs(body: Mapping[str, Any]) -> list[FunctionCallOutput]:
    """Every tool result in a request, in order, named after its matching call: the Responses dialect's
    `function_call_output` items, or the chat dialect's `role: tool` messages (namespace `mcp__<server>` for an
    OpenCode `<server>_<tool>` function)."""
    return dialect_of(body).tool_outputs(body)


def is_title_request(body: Mapping[str, Any]) -> bool:
    """Whether a request is a provider's title helper (answered without consuming a script step)."""
    instructions = body.get("instructions")
    texts = [*user_texts(body), *developer_texts(body), instructions if isinstance(instructions, str) else "",
             *role_texts(body, "system")]
    return any(TITLE_PROMPT in t or CHAT_TITLE_PROMPT in t for t in texts)


def offered_tools(body: Mapping[str, Any], namespace: str = "mcp__wardian") -> dict[str, JsonDict]:
    """The function tools offered inside `namespace` (e.g. "mcp__wardian"), by tool name; {} when absent. In the
    chat dialect, OpenCode's `wardian_<tool>` functions (the server name before the first underscore)."""
    return dialect_of(body).offered_tools(body, namespace)


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """One model request as the server received it (Authorization removed)."""

    agent: str
    index: int  # 0-based position in this agent's log
    path: str
    headers: Mapping[str, str]  # lower-cased names, without authorization
    has_authorization: bool
    body: JsonDict
    received_at_ms: int  # Unix ms
    answered_by: str  # repr of the step that answered, or "exhausted"

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
        return function_call_outputs(self.body)

    def offered_tools(self, namespace: str = "mcp__wardian") -> dict[str, JsonDict]:
        """See `offered_tools`."""
        return offered_tools(self.body, namespace)

