"""Which Codex CLI versions wardian drives, and what each may do (seed: "Codex configuration").

- Eligible: stable 0.154.0 or newer, and the explicitly tested pre-release 0.154.0-alpha.6. Any other
  pre-release is refused: the seed names one exception, not a range.
- Structured steering (`turn/steer` fenced by `expectedTurnId` with `additionalContext`): stable 0.159.2 or
  newer. Older eligible versions keep idle task delivery (`turn/start`) and information delivery
  (`thread/inject_items`).
- Eligibility is never evidence of delivery: every delivery still needs the provider's acknowledgement.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from wardian import errors

_VERSION_RE = re.compile(r"(\d+)\.(\d+)\.(\d+)(?:-([0-9A-Za-z.-]+))?")

MIN_STABLE = (0, 154, 0)
ALPHA_EXCEPTION = "0.154.0-alpha.6"
MIN_STEERING = (0, 159, 2)


@dataclass(frozen=True, slots=True, order=True)
class CodexVersion:
    major: int
    minor: int
    patch: int
    prerelease: str | None = None

    @classmethod
    def parse(cls, text: str) -> CodexVersion:
        """Parse `codex --version` output (`codex-cli 0.171.0`) or a bare version.

        Raises:
            Unsupported: no version in the text.
        """
        match = _VERSION_RE.search(text)
        if match is None:
            raise errors.Unsupported(f"cannot read a Codex version from {text.strip()[:80]!r}")
        return cls(int(match[1]), int(match[2]), int(match[3]), match[4])

    @property
    def triple(self) -> tuple[int, int, int]:
        return (self.major, self.minor, self.patch)

    def __str__(self) -> str:
        base = f"{self.major}.{self.minor}.{self.patch}"
        return f"{base}-{self.prerelease}" if self.prerelease else base


@dataclass(frozen=True, slots=True)
class Capabilities:
    version: CodexVersion
    idle_delivery: bool
    information_delivery: bool
    structured_steering: bool


def capabilities(version: CodexVersion) -> Capabilities:
    """What wardian may ask of this Codex version.

    Raises:
        Unsupported: the version is not eligible (the message says which versions are).
    """
    eligible = str(version) == ALPHA_EXCEPTION if version.prerelease is not None else version.triple >= MIN_STABLE
    if not eligible:
        raise errors.Unsupported(
            f"Codex {version} is not supported; use stable Codex {'.'.join(map(str, MIN_STABLE))} or newer "
            f"(or the tested {ALPHA_EXCEPTION})", allowed=f">= {'.'.join(map(str, MIN_STABLE))} stable, "
            f"{ALPHA_EXCEPTION}")
    steering = version.prerelease is None and version.triple >= MIN_STEERING
    return Capabilities(version=version, idle_delivery=True, information_delivery=True,
                        structured_steering=steering)
