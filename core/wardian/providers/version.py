"""Provider CLI versions (`codex-cli 0.171.0`, `0.154.0-alpha.6`): parsed once, ordered by semantic-versioning
precedence, so a pre-release sorts below its release; and the one version gate (`VersionGate`) every provider
states its eligible versions with, in its `compat` module.

Light on purpose (the stdlib and `wardian.errors`): `wardian init` reads each provider's gate without loading a
runtime (tests/cli/test_cold_start.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from wardian import errors

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


@dataclass(frozen=True, slots=True)
class VersionGate:
    """A provider's CLI and the versions of it wardian drives: every stable release from `minimum` on, and of the
    pre-releases only those named in `tested` (nothing says another keeps the provider's wire). Its errors are
    `Unsupported`, with the CLI's name as their `field` and the eligible versions as their `allowed`."""

    label: str
    """The CLI's name for people (`Claude Code`)."""
    command: str
    """Its executable's name (`claude`); also the field its errors name."""
    package: str
    """The npm package it is installed from (`@anthropic-ai/claude-code`)."""
    env_var: str
    """The variable that names another executable (`WARDIAN_CLAUDE`)."""
    minimum: Version
    tested: tuple[str, ...] = ()
    """Pre-releases verified one by one and accepted (Codex's `0.154.0-alpha.6`: contract rule VER-2)."""
    pinned: bool = True
    """The repository pins the CLI in package.json: `node_modules/.bin/<command>` is found before PATH."""

    @property
    def allowed(self) -> str:
        return ", ".join((f">= {self.minimum} (stable)", *self.tested))

    def _a(self) -> str:
        return f"{'an' if self.label[:1] in 'AEIOU' else 'a'} {self.label}"

    def parse(self, text: str) -> Version:
        """The version in the CLI's `--version` output. Raises: Unsupported (no version in it)."""
        try:
            return Version.parse(text)
        except ValueError:
            raise errors.Unsupported(
                f"cannot read {self._a()} version from {text.strip()[:80]!r}; set {self.env_var} to {self._a()} "
                f"{self.minimum} or newer", field=self.command, allowed=self.allowed) from None

    def check(self, version: Version) -> None:
        """Raises: Unsupported (older than `minimum`, or a pre-release not in `tested`; the message names the
        package and `env_var`)."""
        eligible = str(version) in self.tested if version.is_prerelease else version >= self.minimum
        if not eligible:
            also = f"; or the tested {', '.join(self.tested)}" if self.tested else ""
            raise errors.Unsupported(
                f"{self.label} {version} is not supported; install {self.package} {self.minimum} or newer (npm"
                f"{also}) or set {self.env_var} to one", field=self.command, allowed=self.allowed)
