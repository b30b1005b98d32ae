"""`wardian.mcp.server` in process: the stdin line splitter (`_stdio`) and what one connection leaves behind
(regressions found with the P3 fuzz target, tests/reliability/mcp_frames.py)."""

from __future__ import annotations

import gc
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wardian.mcp import _stdio
from wardian.mcp._frames import leading_id
from wardian.mcp._stdio import LineSplitter
from wardian.mcp.server import StdioServer

pytestmark = pytest.mark.fast  # the fast tier (scripts/check test-fast)

CAP = 16  # a small line cap, so hypothesis reaches over-long lines


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    splitter = LineSplitter()
    lines: list[bytes] = []
    for start, end in zip([0, *cuts], [*cuts, len(data)], strict=True):
        lines += splitter.feed(data[start:end])
    return lines + splitter.end()


@settings(max_examples=300, deadline=None)
@given(data=st.lists(st.sampled_from([b"a", b"bc", b"\n", b"x" * 7, b"\r", b"{}"]), max_size=40).map(b"".join),
       cut_at=st.lists(st.integers(0, 300), max_size=12))
def test_any_read_sizes_give_the_same_lines(data: bytes, cut_at: list[int]) -> None:
    """Whatever the reads, each line within the cap comes out whole and in order; a longer one comes out as more than
    the cap from its start (so it is refused as too long), and then the next lines again."""
    cuts = sorted({c for c in cut_at if c <= len(data)})
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_stdio, "MAX_MCP_FRAME_BYTES", CAP)
        got = split(data, cuts)
    expected = data.split(b"\n")
    if expected[-1] == b"":
        expected.pop()
    assert len(got) == len(expected)
    for line, want in zip(got, expected, strict=True):
        if len(want) <= CAP:
            assert line == want
        else:
            assert len(line) > CAP
            assert want.startswith(line)


def test_a_long_line_read_a_byte_at_a_time_is_searched_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each byte is searched for a newline once: a host writing a long line in small pieces cannot make the server
    rescan its buffer (quadratic time before; found while writing the P3 target)."""
    searched: list[int] = []

    class Counting(bytearray):
        def find(self, sub: Any, start: Any = 0, *args: Any) -> int:
            searched.append(len(self) - start)
            return super().find(sub, start, *args)

    splitter = LineSplitter()
    monkeypatch.setattr(splitter, "_buf", Counting())
    for _ in range(1000):
        assert splitter.feed(b"a") == []
    assert splitter.feed(b"\n") == [b"a" * 1000]
    assert sum(searched) == 1001


@pytest.mark.parametrize("lines", [
    [],  # stdin ends at once: EOF reaches the SDK thread before it attaches
    [b'{"jsonrpc":"2.0","id":1,"method":"ping"}'],
    [b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},'
     b'"clientInfo":{"name":"t","version":"1"}}}', b'{"jsonrpc":"2.0","id":2,"method":"tools/list"}'],
], ids=["eof", "ping", "handshake"])
def test_a_connection_leaves_no_stream_open(monkeypatch: pytest.MonkeyPatch, lines: list[bytes]) -> None:
    """Regression (P3 fuzz target): each connection left both ends of its SDK inbox open, a ResourceWarning per
    connection once a process served more than one."""
    unraisable: list[Any] = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    written: list[bytes] = []
    connection: StdioServer | None = None
    for _ in range(2):
        connection = StdioServer(written.append, {})
        connection.start()
        for line in lines:
            connection.deliver(line)
        connection.finish()
        connection.sdk.join(30)
        assert not connection.sdk.is_alive()
    connection = None  # the last reference: its objects are freed (and any leak reported) by this collection
    gc.collect()
    assert [str(u.exc_value) for u in unraisable] == []


@pytest.mark.parametrize(("line", "expected"), [
    (b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x"', 7),
    (b' { "jsonrpc" : "2.0" , "id" : "req-\\u00e9" , "params"', "req-\u00e9"),
    (b'{"method":"ping","jsonrpc":"2.0","id":-3}', -3),
    (b'{"jsonrpc":"2.0","method":"ping","params":{"x":1},"id":7}', None),  # a nested value first: not read past it
    (b'{"jsonrpc":"2.0","id":1.5,"method":"ping"}', None),
    (b'{"jsonrpc":"2.0","id":true,"method":"ping"}', None),
    (b'{"jsonrpc":"2.0","id":null,"method":"ping"}', None),
    (b'{"jsonrpc":"2.0","method":"ping"', None),
    (b'[{"jsonrpc":"2.0","id":1}]', None),
    (b'{"jsonrpc":"2.0" "id":1}', None),
    (b"\xff\xfe", None),
])
def test_the_leading_id_is_read_only_from_plain_members_at_the_line_s_start(line: bytes, expected: object) -> None:
    """An oversize line is answered with its request's id when the members before the id are plain scalars."""
    assert leading_id(line) == expected
