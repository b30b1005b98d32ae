"""The test account the ChatGPT stand-in signs in, and what its tokens and errors look like: JWTs whose claims Codex
reads without checking a signature, and OAuth errors in the shape Codex reads their codes from."""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any

__all__ = ["ACCOUNT_ID", "AUTH_CLAIMS", "CLIENT_ID", "EMAIL", "MODEL_PREFIX", "PLAN_TYPE", "make_jwt", "oauth_error"]

CLIENT_ID = "app_EMoamEEZ73f0CkXaXp7hrann"
"""Codex's OAuth client id, as it sends it on a refresh and a revoke."""
ACCOUNT_ID = "acct-wardian-test"
PLAN_TYPE = "plus"
EMAIL = "someone@example.test"
MODEL_PREFIX = "scripted-agent-"
"""The model name `codex_overrides` gives an agent: this prefix, then the agent's name (URL-quoted)."""
AUTH_CLAIMS = "https://api.openai.com/auth"
"""Where Codex reads the account, its plan and its user from a token's claims."""


def make_jwt(claims: Mapping[str, Any]) -> str:
    """An unsigned-looking JWT (Codex decodes the claims of its tokens without verifying them)."""
    def part(value: Mapping[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()
    return f"{part({'alg': 'HS256', 'typ': 'JWT'})}.{part(claims)}.{part({'sig': 'test'})}"


def oauth_error(code: str, message: str) -> dict[str, Any]:
    return {"error": {"code": code, "message": message}, "error_description": message}
