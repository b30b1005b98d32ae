"""The receive cursor codec.

A cursor names an exact (start, end] id range of one recipient's mailbox, MAC-protected with the store's key and
bound to its epoch, so a forged, another recipient's or a recreated store's cursor is refused.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import struct

from wardian import errors

CURSOR_PREFIX = "cur1_"
_CURSOR_STRUCT = struct.Struct(">8sQQQ")  # epoch, recipient agent id, start (exclusive), end (inclusive)
_MAC_BYTES = 16


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
