"""The two kinds of token a store hands out and reads back: receive cursors and session tokens.

A cursor names an exact (start, end] id range of one recipient's mailbox, MAC-protected with the store's key and
bound to its epoch, so a forged, another recipient's or a recreated store's cursor is refused.

A session token is `wsn1_<home tag>_<session id>_<secret>`; only a SHA-256 of the 256-bit secret is kept
(`wardian.store.sessions` reads the session and checks the secret).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import struct

from wardian import errors

CURSOR_PREFIX = "cur1_"
SESSION_PREFIX = "wsn1"
_CURSOR_STRUCT = struct.Struct(">8sQQQ")  # epoch, recipient agent id, start (exclusive), end (inclusive)
_MAC_BYTES = 16
_MAX_ID_DIGITS = 18  # a session id is a BIGINT (at most 19 digits); 18 never overflows it
_MAX_REMEMBERED_TOKENS = 1024


class CursorCodec:
    """Cursors of one store (its epoch and cursor key)."""

    def __init__(self, epoch: bytes, key: bytes) -> None:
        self._epoch = epoch
        self._key = key

    def _mac(self, payload: bytes) -> bytes:
        return hmac.new(self._key, payload, hashlib.sha256).digest()[:_MAC_BYTES]

    def encode(self, recipient_id: int, start: int, end: int) -> str:
        payload = _CURSOR_STRUCT.pack(self._epoch, recipient_id, start, end)
        return CURSOR_PREFIX + base64.urlsafe_b64encode(payload + self._mac(payload)).rstrip(b"=").decode("ascii")

    def decode(self, cursor: str, recipient_id: int, field: str) -> tuple[int, int]:
        """The (start, end] id range of a batch this store returned to `recipient_id`.

        Raises:
            InvalidCursor: malformed, truncated, a bad MAC, or another recipient's cursor.
            StaleCursor: a cursor of a previous store (the database was recreated).
        """
        invalid = errors.InvalidCursor(
            f"{field} is not a cursor this mailbox returned; pass a cursor from an earlier receive of "
            "this same caller, or omit it", field=field)
        if not cursor.startswith(CURSOR_PREFIX):
            raise invalid
        body = cursor[len(CURSOR_PREFIX):]
        try:
            raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
        except (ValueError, TypeError):
            raise invalid from None
        if len(raw) != _CURSOR_STRUCT.size + _MAC_BYTES:
            raise invalid
        payload, mac = raw[:_CURSOR_STRUCT.size], raw[_CURSOR_STRUCT.size:]
        epoch, owner, start, end = _CURSOR_STRUCT.unpack(payload)
        if epoch != self._epoch:
            raise errors.StaleCursor(
                f"{field} comes from an earlier store of this home; receive again without a cursor", field=field)
        if not hmac.compare_digest(mac, self._mac(payload)) or owner != recipient_id or start >= end:
            raise invalid
        return start, end


class TokenDigests:
    """The session id a token names and the SHA-256 of its secret, after its form and home are checked.

    A pure function of the token, so it is remembered per exact token (its digest is still compared with the
    session's hash on every call, in constant time, and the session looked up as the roster has it now): the
    split, base64 and SHA-256 were a few µs of every send. One per caller thread (the store's, the wait reader's).
    """

    def __init__(self, home_tag: str) -> None:
        self._home_tag = home_tag
        self._known: dict[str, tuple[int, bytes]] = {}

    def of(self, token: str) -> tuple[int, bytes]:
        """Raises: UnknownSession (not a session token), SessionHomeMismatch (another home's)."""
        known = self._known.get(token)
        if known is not None:
            return known
        parts = token.split("_")
        # ASCII digits only (`str.isdigit` also takes "²", which `int` refuses), and no more than a BIGINT holds.
        if (len(parts) < 3 or parts[0] != SESSION_PREFIX or not parts[2].isascii() or not parts[2].isdigit()
                or len(parts[2]) > _MAX_ID_DIGITS):
            raise errors.UnknownSession(
                "WARDIAN_SESSION_ID is not a wardian session of this home; print a valid one with "
                "`wardian agent env NAME`")
        if not parts[1].isascii() or not hmac.compare_digest(parts[1], self._home_tag):  # it refuses other text
            raise errors.SessionHomeMismatch(
                "WARDIAN_SESSION_ID belongs to another WARDIAN_HOME; set the matching WARDIAN_HOME or "
                "print this home's session with `wardian agent env NAME`")
        secret_text = "_".join(parts[3:])
        try:
            secret = base64.urlsafe_b64decode(secret_text + "=" * (-len(secret_text) % 4))
        except (ValueError, TypeError):
            secret = b""
        known = (int(parts[2]), hashlib.sha256(secret).digest())
        if len(self._known) >= _MAX_REMEMBERED_TOKENS:
            self._known.clear()  # tokens that match nothing must not grow it without bound
        self._known[token] = known
        return known
