"""The console's templates and static files: the Jinja2 environment every page renders with, and the digest that
versions the static files' URLs."""

from __future__ import annotations

import hashlib
from pathlib import Path

import jinja2

from wardian import __version__
from wardian.console.presenters import records
from wardian.model import OPERATOR_UUID

HERE = Path(__file__).resolve().parent
TEMPLATES = HERE / "templates"
STATIC = HERE / "static"


def asset_version() -> str:
    """A digest of the static files, so a browser never runs a stale script against a newer app."""
    digest = hashlib.sha256()
    for path in sorted(STATIC.iterdir()):
        digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()[:12]


def environment() -> jinja2.Environment:
    """Autoescaped (text from agents is data), strict about undefined names, with the presenters the templates call."""
    # Templates are package data: never changed while the app runs, so never checked for changes.
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), autoescape=True, auto_reload=False,
                             extensions=["jinja2.ext.do"], undefined=jinja2.StrictUndefined, trim_blocks=True,
                             lstrip_blocks=True)
    env.globals.update(when=records.when, clock=records.clock, after=records.after, party=records.party,
                       facts=records.facts, task_state=records.task_state, OPERATOR_UUID=OPERATOR_UUID,
                       asset_version=asset_version(), version=__version__)
    return env
