"""The stdin writer's lines (one malformed line ends Claude Code): every line is one JSON object on one line of
ASCII that decodes to the exact text given, whatever the text."""

from __future__ import annotations

import json
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from wardian.providers.claude.wire import control_error, control_line, user_line

pytestmark = pytest.mark.fast

TEXTS = st.text(st.characters(blacklist_categories=("Cs",)), max_size=2000)


@settings(max_examples=300, deadline=None)
@given(text=TEXTS, should_query=st.booleans())
def test_every_user_line_is_one_ascii_json_object_carrying_the_exact_text(text: str, should_query: bool) -> None:
    mid = str(uuid.uuid4())
    line = user_line(text, mid, should_query=should_query)
    assert line.endswith(b"\n")
    assert line.count(b"\n") == 1
    assert b"\r" not in line
    assert b"\x00" not in line
    assert line.isascii()
    message = json.loads(line)
    assert isinstance(message, dict)
    assert message["message"] == {"role": "user", "content": text}
    assert message["uuid"] == mid
    assert message.get("shouldQuery", True) is should_query


@given(error=TEXTS)
def test_control_lines_are_single_ascii_json_lines(error: str) -> None:
    for line in (control_line("wardian_1", {"subtype": "interrupt", "note": error}), control_error("r", error)):
        assert line.isascii()
        assert line.count(b"\n") == 1
        assert isinstance(json.loads(line), dict)


def test_a_64_kib_text_with_newlines_and_unicode_is_one_line() -> None:
    text = ("☃ line\u2028two\r\n\u0000" * 4096)[:65536]
    line = user_line(text, "u")
    assert line.count(b"\n") == 1
    assert json.loads(line)["message"]["content"] == text


def test_a_lone_surrogate_the_app_refuses_earlier_would_still_make_a_valid_line() -> None:
    line = user_line("a\udc80b", "u")
    assert line.isascii()
    assert json.loads(line)["message"]["content"] == "a\udc80b"
