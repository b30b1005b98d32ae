"""The opt-in timing record of messages written to Claude Code (`WARDIAN_CLAUDE_TIMINGS`, read by
`scripts/bench.py --only claude`; docs/benchmarks.md): off by default, one line per acknowledged message when on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from wardian.providers.claude.timings import ENV, Timings

pytestmark = pytest.mark.fast


def test_each_acknowledged_message_gets_one_line_of_uuid_and_clock_readings(tmp_path: Path) -> None:
    path = tmp_path / "timings.jsonl"
    timings = Timings("worker0", str(path))
    timings.written("u1")
    timings.written("u2")
    timings.queued("u1")
    timings.queued("u1")  # a second queued (a duplicate uuid's answer) records nothing more
    timings.queued("never-written")
    (record,) = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert set(record) == {"agent", "uuid", "written_ns", "queued_ns"}
    assert (record["agent"], record["uuid"]) == ("worker0", "u1")
    assert 0 < record["written_ns"] <= record["queued_ns"]


def test_it_is_on_only_when_the_apps_environment_names_the_file(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "timings.jsonl"
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(ENV, raising=False)
    off = Timings.from_env("worker0")
    off.written("u1")
    off.queued("u1")
    assert list(tmp_path.iterdir()) == []
    monkeypatch.setenv(ENV, str(path))
    on = Timings.from_env("worker0")
    on.written("u1")
    on.queued("u1")
    assert [json.loads(line)["uuid"] for line in path.read_text(encoding="utf-8").splitlines()] == ["u1"]


def test_a_file_that_cannot_be_written_never_disturbs_delivery(tmp_path: Path) -> None:
    timings = Timings("worker0", str(tmp_path / "missing-dir" / "timings.jsonl"))
    timings.written("u1")
    timings.queued("u1")  # no exception: the record is turned off
    timings.written("u2")
    timings.queued("u2")
    assert not (tmp_path / "missing-dir").exists()
