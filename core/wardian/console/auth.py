"""Login, sessions and CSRF of the web console (docs/guide/console.md).

- A login URL carries a one-time token (256 random bits) minted over the control socket (`console/login`), so only
  the home's owner gets one. It works once, within `LOGIN_TTL_MS`; redeeming it opens a session.
- A session is a cookie (256 random bits; HttpOnly, SameSite=Strict, path /) valid for `SESSION_TTL_MS` or until
  logout or the app stops. Each session has its CSRF token, which every state-changing request must carry.
- Only SHA-256 hashes of tokens and cookies are kept, looked up by hash and compared in constant time; no secret is
  ever logged.
- Both tables are bounded: the oldest entries go first, so nobody can make the app hold logins without bound.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass

from wardian.limits import LOGIN_TTL_MS
from wardian.model import now_ms

SESSION_TTL_MS = 12 * 60 * 60 * 1000
MAX_LOGINS = 32
MAX_SESSIONS = 64
LOGIN_PREFIX = "wcl1_"
SESSION_PREFIX = "wcs1_"


def _secret(prefix: str) -> str:
    return prefix + base64.urlsafe_b64encode(secrets.token_bytes(32)).rstrip(b"=").decode("ascii")


def _digest(value: str) -> bytes:
    return hashlib.sha256(value.encode("utf-8", "surrogatepass")).digest()


@dataclass(frozen=True, slots=True)
class ConsoleSession:
    csrf: str
    created_at: int
    expires_at: int

    def csrf_matches(self, given: str | None) -> bool:
        return given is not None and hmac.compare_digest(given.encode("utf-8", "surrogatepass"),
                                                         self.csrf.encode("ascii"))


class ConsoleAuth:
    """The console's logins and sessions, in memory (they end with the app)."""

    def __init__(self, clock: Callable[[], int] = now_ms) -> None:
        self._clock = clock
        self._logins: dict[bytes, int] = {}  # token hash -> expires_at
        self._sessions: dict[bytes, ConsoleSession] = {}  # cookie hash -> session

    def mint_login(self) -> tuple[str, int]:
        """A new one-time login token and when it expires."""
        self._expire()
        token = _secret(LOGIN_PREFIX)
        expires = self._clock() + LOGIN_TTL_MS
        self._logins[_digest(token)] = expires
        while len(self._logins) > MAX_LOGINS:
            del self._logins[next(iter(self._logins))]
        return token, expires

    def redeem(self, token: str | None) -> tuple[str, ConsoleSession] | None:
        """Spend a login token (once) for a new session: (cookie value, session), or None for an unknown, used or
        expired token."""
        if not token or len(token) > 200:
            return None
        self._expire()
        if self._logins.pop(_digest(token), None) is None:
            return None
        cookie = _secret(SESSION_PREFIX)
        now = self._clock()
        session = ConsoleSession(csrf=secrets.token_urlsafe(32), created_at=now, expires_at=now + SESSION_TTL_MS)
        self._sessions[_digest(cookie)] = session
        while len(self._sessions) > MAX_SESSIONS:
            del self._sessions[next(iter(self._sessions))]
        return cookie, session

    def session(self, cookie: str | None) -> ConsoleSession | None:
        if not cookie or len(cookie) > 200:
            return None
        session = self._sessions.get(_digest(cookie))
        if session is None:
            return None
        if session.expires_at <= self._clock():
            self._sessions.pop(_digest(cookie), None)
            return None
        return session

    def end(self, cookie: str | None) -> None:
        if cookie:
            self._sessions.pop(_digest(cookie), None)

    def _expire(self) -> None:
        now = self._clock()
        for key in [k for k, expires in self._logins.items() if expires <= now]:
            del self._logins[key]
        for key in [k for k, s in self._sessions.items() if s.expires_at <= now]:
            del self._sessions[key]
