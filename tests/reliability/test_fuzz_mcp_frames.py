"""P3's fuzz target without Atheris [CI]: its one-input function (tests/reliability/mcp_frames.py) over the seed
corpus, random bytes and randomly mutated seeds, so the harness the nightly fuzz run uses cannot rot; and proof that
it catches what it is for."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest

from tests.reliability import mcp_frames
from tests.reliability.mcp_frames import FrameFault, Target, seed_inputs
from tests.reliability.world import seeded_random
from wardian.mcp.server import StdioServer

RANDOM_INPUTS = 200
MUTATED_INPUTS = 200


@pytest.fixture(scope="module")
def target() -> Iterator[Target]:
    target = Target()
    yield target
    target.close()


def mutate(rng: random.Random, data: bytes) -> bytes:
    """A few of libFuzzer's simplest mutations: flip, insert, delete or duplicate bytes."""
    out = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        at = rng.randrange(len(out) + 1)
        op = rng.randrange(4)
        if op == 0 and at < len(out):
            out[at] ^= 1 << rng.randrange(8)
        elif op == 1:
            out[at:at] = bytes([rng.choice(b'{}[]",:\n\\0 -"')])
        elif op == 2:
            del out[at:at + rng.randint(1, 8)]
        else:
            out[at:at] = out[at:at + rng.randint(1, 32)]
    return bytes(out)


def test_the_seed_corpus_meets_the_p3_criteria(target: Target) -> None:
    """P3: the M2 lines and the well-formed sessions of the seed corpus."""
    for seed in seed_inputs():
        target.one_input(seed)


def test_random_and_mutated_inputs_meet_the_p3_criteria(target: Target) -> None:
    """P3 at CI size: random byte strings and mutated seeds (WARDIAN_RELIABILITY_SEED replays)."""
    rng, _ = seeded_random("p3-ci")
    seeds = [s for s in seed_inputs() if len(s) < 65_536]
    for _ in range(RANDOM_INPUTS):
        target.one_input(rng.randbytes(rng.randrange(300)))
    for _ in range(MUTATED_INPUTS):
        target.one_input(mutate(rng, rng.choice(seeds)))


class _AnswersPingTwice(StdioServer):
    def deliver(self, line: bytes) -> None:
        super().deliver(line)
        if b'"ping"' in line:
            super().deliver(line)


class _SwallowsToolCalls(StdioServer):
    def deliver(self, line: bytes) -> None:
        if b"tools/call" not in line:
            super().deliver(line)


class _WritesHalfLines(StdioServer):
    def __init__(self, write: Any, environ: Any) -> None:
        def halves(data: bytes) -> None:
            write(data[:5])
            write(data[5:])

        super().__init__(halves, environ)


@pytest.mark.parametrize(("server", "fault"), [
    (_AnswersPingTwice, "responses nothing asked for"), (_SwallowsToolCalls, "requests left unanswered"),
    (_WritesHalfLines, "not exactly one line")], ids=["twice", "unanswered", "half-lines"])
def test_the_target_catches_a_server_that_breaks_a_criterion(monkeypatch: pytest.MonkeyPatch, target: Target,
                                                              server: type[StdioServer], fault: str) -> None:
    """The oracle is not vacuous: a doubled answer, a lost request and a split line each fail the input."""
    monkeypatch.setattr(mcp_frames, "StdioServer", server)
    monkeypatch.setattr(mcp_frames, "ANSWER_TIMEOUT_S", 0.5)
    session = next(s for s in seed_inputs() if s.count(b"tools/call") > 3 and b'"ping"' in s)  # every tool
    with pytest.raises(FrameFault, match=fault):
        target.one_input(session)
