"""Provider CLI versions (`codex-cli 0.171.0`, `0.154.0-alpha.6`): parsed once, ordered by semantic-versioning
precedence, so a pre-release sorts below its release. Which versions a provider accepts is that provider's gate."""

from __future__ import annotations

import re
from dataclasses import dataclass

_VERSION = re.compile(
    r"(?P<major>0|[1-9]\d*)\.(?P<minor>0|[1-9]\d*)\.(?P<patch>0|[1-9]\d*)"
    r"(?:-(?P<pre>[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?(?:\+[0-9A-Za-z.-]+)?")


@dataclass(frozen=True, slots=True)
class Version:
    """A semantic version; compares by precedence (`0.154.0-alpha.6 < 0.154.0 < 0.159.2`)."""

    major: int
    minor: int
    patch: int
    prerelease: tuple[int | str, ...] = ()

    @classmethod
    def parse(cls, text: str) -> Version:
        """Read `0.171.0`, `v0.171.0`, `codex-cli 0.154.0-alpha.6` or a whole `--version` output.

        Raises:
            ValueError: no version in `text`.
        """
        match = _VERSION.search(text)
        if match is None:
            raise ValueError(f"no version in {text.strip()[:80]!r}")
        pre = match["pre"]
        prerelease = tuple(int(p) if p.isdigit() else p for p in pre.split(".")) if pre else ()
        return cls(int(match["major"]), int(match["minor"]), int(match["patch"]), prerelease)

    def __str__(self) -> str:
        core = f"{self.major}.{self.minor}.{self.patch}"
        return f"{core}-{'.'.join(map(str, self.prerelease))}" if self.prerelease else core

    @property
    def is_prerelease(self) -> bool:
        return bool(self.prerelease)

    @property
    def triple(self) -> tuple[int, int, int]:
        return (self.major, self.minor, self.patch)

    def _key(self) -> tuple[int, int, int, int, tuple[tuple[int, int, str], ...]]:
        # semver.org, rule 11: a release outranks its pre-releases; numeric identifiers sort below alphanumeric ones,
        # numerically among themselves; a longer identifier list wins when all shared ones are equal.
        ids = tuple((0, p, "") if isinstance(p, int) else (1, 0, p) for p in self.prerelease)
        return (self.major, self.minor, self.patch, 0 if self.prerelease else 1, ids)

    def __lt__(self, other: Version) -> bool:
        return self._key() < other._key()

    def __le__(self, other: Version) -> bool:
        return self._key() <= other._key()

    def __gt__(self, other: Version) -> bool:
        return self._key() > other._key()

    def __ge__(self, other: Version) -> bool:
        return self._key() >= other._key()
