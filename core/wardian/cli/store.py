"""`wardian store migrate`: the shared PostgreSQL store's schema, outside of any app."""

from __future__ import annotations

import argparse

from wardian import errors
from wardian.cli.common import Commands, store_arg
from wardian.cli.exits import EXIT_OK
from wardian.cli.output import dump, out
from wardian.home import ENV_STORE


def register(commands: Commands) -> None:
    store = commands.group("store", "the shared PostgreSQL store")
    p = commands.add(store, "migrate", cmd_store_migrate,
                     "create or upgrade the shared store's schema (apps also do it at start, under the same lock)")
    p.add_argument("--store", default=None, metavar="URL", help=f"the shared store (default ${ENV_STORE})")


def cmd_store_migrate(args: argparse.Namespace) -> int:
    # The app's stack (~200 ms; psycopg once it connects): this command's, not the whole parser's (`--help`).
    from wardian.app.run import migrate_shared_store, redact_url

    url = store_arg(args)
    if url is None:
        raise errors.InvalidArguments(f"give the shared store: --store URL or ${ENV_STORE}", field="store",
                                      allowed="postgresql://[USER@]HOST[:PORT]/DB[?…] without a password")
    before, after = migrate_shared_store(url)
    if args.json:
        out(dump({"store": redact_url(url), "from_version": before, "version": after}))
    elif before == after:
        out(f"the shared store {redact_url(url)} is at schema version {after}; nothing to do")
    else:
        out(f"migrated the shared store {redact_url(url)} from schema version {before} to {after}")
    return EXIT_OK
