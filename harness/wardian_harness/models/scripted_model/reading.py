"""Readers of a model request's body that hold in both dialects: the texts of a role, and the shape of a tool
result. (The tool results and offered tools themselves are read per dialect: `requests`.)"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


def content_texts(item: Mapping[str, Any]) -> list[str]:
    content = item.get("content")
    if isinstance(content, str):
        return [content]
    if not isinstance(content, list):
        return []
    return [part["text"] for part in content if isinstance(part, dict) and isinstance(part.get("text"), str)]


def role_texts(body: Mapping[str, Any], role: str) -> list[str]:
    texts: list[str] = []
    for item in body.get("input") or body.get("messages") or []:
        if isinstance(item, dict) and item.get("type", "message") == "message" and item.get("role") == role:
            texts.extend(content_texts(item))
    return texts


def user_texts(body: Mapping[str, Any]) -> list[str]:
    """Every `input_text` of every user message in a request's `input`, in order (replayed history included)."""
    return role_texts(body, "user")


def developer_texts(body: Mapping[str, Any]) -> list[str]:
    """Every text of every developer message in a request's `input`, in order."""
    return role_texts(body, "developer")


@dataclass(frozen=True, slots=True)
class FunctionCallOutput:
    """A tool result Codex sent back to the model; `text` joins the parts of a list-form (failed) output."""

    call_id: str | None
    text: str
    raw: Any
    name: str | None = None
    namespace: str | None = None
