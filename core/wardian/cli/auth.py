"""`wardian auth login|status|logout`: the home's credentials, the way `gh auth` and `codex login` keep theirs
(docs/guide/sign-in.md); the group's parsers.

The handlers are `wardian.cli.credentials`'s, named by where they are: the credential store they open is no other
command's, nor the whole parser's that `--help` builds.
"""

from __future__ import annotations

from wardian.auth.model import DEFAULT_NAME
from wardian.cli.common import Commands


def register(commands: Commands) -> None:
    auth = commands.group("auth", "sign agents in: the home's credentials (no app needed)")
    p = commands.add(auth, "login", "wardian.cli.credentials:cmd_auth_login",
                     "store a credential: an API key or token read from standard input, or Codex's ChatGPT sign-in")
    p.add_argument("provider", metavar="PROVIDER", help="codex, opencode, claude, qwen, gemini or pi")
    how = p.add_mutually_exclusive_group()
    how.add_argument("--with-api-key", dest="with_api_key", action="store_true",
                     help="read an API key from standard input (codex, opencode, claude, qwen, gemini, pi)")
    how.add_argument("--with-oauth-token", dest="with_oauth_token", action="store_true",
                     help="read a token from `claude setup-token` from standard input (claude)")
    how.add_argument("--from-codex-home", dest="from_codex_home", default=None, metavar="DIR",
                     help="import the API-key login of a Codex home (DIR/auth.json, only read); a ChatGPT login "
                     "there is refused (codex)")
    p.add_argument("--provider", dest="provider_id", default=None, metavar="ID",
                   help="the model provider the key is for: openai, anthropic, or one of your opencode.json "
                   "(opencode) or of the agent's Pi models.json (pi); required for both")
    p.add_argument("--name", default=DEFAULT_NAME,
                   help="the credential's name, to keep a second one of the same provider; agents choose it with "
                   "`agent add|start --auth NAME`")
    p.add_argument("--browser", action="store_true",
                   help="Codex ChatGPT sign-in: open the sign-in page in a browser on this machine instead of "
                   "printing a device code")
    commands.add(auth, "status", "wardian.cli.credentials:cmd_auth_status",
                 "list the stored credentials: provider, name, kind, mask, where kept, which agents use each")
    p = commands.add(auth, "logout", "wardian.cli.credentials:cmd_auth_logout",
                     "forget a stored credential (exit 4 when there is none)")
    p.add_argument("provider", metavar="PROVIDER", help="codex, opencode, claude, qwen, gemini or pi")
    p.add_argument("--name", default=DEFAULT_NAME, help="the credential's name")
    p.add_argument("--provider", dest="provider_id", default=None, metavar="ID",
                   help="opencode, pi: only the key for this model provider (default: every one under the name)")
