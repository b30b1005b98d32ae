"""`wardian console`: a one-time login URL of the running app's web console; the command's parser. Its handler is
`wardian.cli.console_login`'s, named by where it is: the private login page and the browser it opens are no other
command's, nor the whole parser's that `--help` builds (the console itself is served by `app run --console`,
`wardian.cli.app_run`)."""

from __future__ import annotations

from wardian.cli.common import Commands


def register(commands: Commands) -> None:
    p = commands.single("console", "wardian.cli.console_login:cmd_console",
                        help_="print (and open) a one-time login URL of the web console",
                        description="print a fresh one-time login URL of the running app's web console and open it "
                        "in a browser, through a private page in the home's run/ (the URL is never in the browser's "
                        "arguments); the app must run with --console")
    p.add_argument("--no-open", dest="no_open", action="store_true",
                   help="only print the URL (for a browser elsewhere, or one that cannot read the home)")
