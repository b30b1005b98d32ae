"""Proof that a secret went nowhere it must not: every file under some folders (binary ones too: a SQLite store, its
WAL, a provider's caches) and every captured text (CLI output, a log, a page) searched for every secret.

A secret is searched as its UTF-8 bytes and as UTF-16 (little- and big-endian: JavaScript engines and some binary
formats keep strings so), in chunks that overlap by a secret's length, so a match across a chunk boundary is found.
A failure names the secret by its position and mask (`…3f9a`) and where it was found, never the secret itself: the
assertion message ends up in CI logs.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Leak", "assert_secrets_absent", "find_secrets"]

CHUNK = 1 << 20
MIN_SECRET_CHARS = 8
"""Shorter strings would match by chance (and are no secrets worth the name)."""


@dataclass(frozen=True, slots=True)
class Leak:
    secret: int
    """Its position in the `secrets` given."""
    mask: str
    where: str
    """A file path (and the byte offset), or `text[i]`."""

    def __str__(self) -> str:
        return f"secret #{self.secret} ({self.mask}) found in {self.where}"


def _mask(secret: str) -> str:
    return "…" + secret[-4:] if len(secret) >= 12 else "…"


def _patterns(secrets: Iterable[str]) -> list[tuple[int, str, tuple[bytes, ...]]]:
    out: list[tuple[int, str, tuple[bytes, ...]]] = []
    for i, secret in enumerate(secrets):
        if len(secret) < MIN_SECRET_CHARS:
            raise ValueError(f"secret #{i} is shorter than {MIN_SECRET_CHARS} characters: it would match by chance")
        out.append((i, _mask(secret), (secret.encode(), secret.encode("utf-16-le"), secret.encode("utf-16-be"))))
    return out


def _files(roots: Iterable[Path], exclude: set[Path]) -> Iterator[Path]:
    """Every regular file under the roots (a root may be a file), not following symlinks (a link's target is
    searched when it lies under a root itself)."""
    for root in roots:
        try:
            st = os.lstat(root)
        except FileNotFoundError:
            continue
        if stat.S_ISREG(st.st_mode):
            if root.absolute() not in exclude:
                yield root
        elif stat.S_ISDIR(st.st_mode):
            for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
                dirnames.sort()
                for name in sorted(filenames):
                    path = Path(dirpath, name)
                    if path.absolute() not in exclude and stat.S_ISREG(os.lstat(path).st_mode):
                        yield path


def _scan(path: Path, patterns: list[tuple[int, str, tuple[bytes, ...]]]) -> Iterator[Leak]:
    overlap = max((len(p) for _, _, ps in patterns for p in ps), default=1) - 1
    try:
        f = open(path, "rb")  # noqa: SIM115 (read in chunks below)
    except OSError:
        return  # removed meanwhile, or not readable by the owner either
    with f:
        offset, tail = 0, b""
        while chunk := f.read(CHUNK):
            data = tail + chunk
            for i, mask, forms in patterns:
                for form in forms:
                    at = data.find(form)
                    if at >= 0:
                        yield Leak(i, mask, f"{path} (byte {offset - len(tail) + at})")
            tail = data[-overlap:] if overlap else b""
            offset += len(chunk)


def find_secrets(paths: Iterable[Path], texts: Iterable[str | bytes], secrets: Iterable[str], *,
                 exclude: Iterable[Path] = ()) -> list[Leak]:
    """Where any of `secrets` occurs: in the files under `paths` (less the files in `exclude`) and in `texts`."""
    patterns = _patterns(secrets)
    skip = {Path(p).absolute() for p in exclude}
    leaks: list[Leak] = []
    seen: set[tuple[int, str]] = set()
    for path in _files([Path(p) for p in paths], skip):
        for leak in _scan(path, patterns):
            key = (leak.secret, str(path))
            if key not in seen:
                seen.add(key)
                leaks.append(leak)
    for n, text in enumerate(texts):
        data = text.encode("utf-8", "surrogateescape") if isinstance(text, str) else text
        leaks += [Leak(i, mask, f"text[{n}]") for i, mask, forms in patterns if any(f in data for f in forms)]
    return leaks


def assert_secrets_absent(paths: Iterable[Path], texts: Iterable[str | bytes], secrets: Iterable[str], *,
                          exclude: Iterable[Path] = ()) -> None:
    """Fail, naming where (never what), when any secret occurs in a file under `paths` or in one of `texts`.

    Raises: AssertionError.
    """
    secrets = list(secrets)
    assert secrets, "no secrets to look for: the check would prove nothing"
    leaks = find_secrets(paths, texts, secrets, exclude=exclude)
    assert not leaks, "secrets where they must not be:\n" + "\n".join(f"  {leak}" for leak in leaks)
