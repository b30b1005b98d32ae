"""Which provider implementation serves which provider name (`wardian.model.PROVIDERS`)."""

from __future__ import annotations

from wardian.providers.acp.agents import GEMINI, GENERIC, QWEN
from wardian.providers.acp.provider import AcpProvider
from wardian.providers.base import Provider
from wardian.providers.claude.provider import ClaudeProvider
from wardian.providers.codex.provider import CodexProvider
from wardian.providers.opencode.provider import OpenCodeProvider
from wardian.providers.pi.provider import PiProvider

PROVIDERS: dict[str, Provider] = {"codex": CodexProvider(), "opencode": OpenCodeProvider(),
                                 "claude": ClaudeProvider(), "qwen": AcpProvider(QWEN),
                                 "gemini": AcpProvider(GEMINI), "pi": PiProvider(), "acp": AcpProvider(GENERIC)}
