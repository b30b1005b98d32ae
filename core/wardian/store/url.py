"""Which store an app serves: the embedded SQLite file of its home, or a shared PostgreSQL database.

`--store URL` (or `WARDIAN_STORE`) names the shared store as a libpq URL, `postgresql://[USER@]HOST[:PORT]/DB[?…]`
(a Unix-socket directory as `?host=/path`). A password never travels in it: a URL that carries one is refused, and
libpq reads the password from PGPASSFILE, PGSERVICE or PGPASSWORD. No credential is ever printed or logged: what the
app shows of a URL is `redact_url`'s form. Stdlib only: checking a URL loads no database driver.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit

from wardian import errors

SCHEMES = ("postgresql", "postgres")
ALLOWED = (
    "a postgresql://[USER@]HOST[:PORT]/DATABASE[?PARAM=VALUE&…] URL without a password (libpq reads it from "
    "PGPASSFILE, PGSERVICE or PGPASSWORD); no --store for the home's own SQLite file"
)
# Query parameters that would put a secret into the URL or the process list.
_SECRET_PARAMS = ("password", "sslpassword")


def check_store_url(url: str) -> str:
    """Return `url` when it names a PostgreSQL database without a password.

    Raises:
        InvalidArguments: not a postgresql:// URL, unparsable, or carrying a password (the message never repeats it).
    """
    try:
        parts = urlsplit(url)
        params = parse_qsl(parts.query, keep_blank_values=True)
        _ = parts.port  # raises on a bad port
    except ValueError:
        raise errors.InvalidArguments("--store is not a URL that can be read", field="store", allowed=ALLOWED) from None
    if parts.scheme not in SCHEMES:
        raise errors.InvalidArguments(
            f"--store must be a PostgreSQL URL (scheme {' or '.join(SCHEMES)}), not {parts.scheme or 'a plain path'!r}",
            field="store",
            allowed=ALLOWED,
        )
    if parts.password is not None or any(k.lower() in _SECRET_PARAMS for k, _ in params):
        raise errors.InvalidArguments(
            "--store must not carry a password (it would show in the process list and in shell history); put it in "
            "a PGPASSFILE (0600) or a PGSERVICE entry, or set PGPASSWORD, and give the URL without it",
            field="store",
            allowed=ALLOWED,
        )
    if not parts.path.strip("/") and not any(k == "dbname" for k, _ in params):
        raise errors.InvalidArguments("--store names no database (…/DATABASE)", field="store", allowed=ALLOWED)
    return url


def redact_url(url: str) -> str:
    """The URL without user information or query: what the app may show (host, port, database)."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "postgresql://…"
    socket_dir = next((v for k, v in parse_qsl(parts.query) if k == "host"), "")
    where = host or (f"(socket {socket_dir})" if socket_dir else "")
    return f"{parts.scheme}://{where}{port}{parts.path}"
