"""The web console: live agents, live exchange, request views and the operator's actions, served by the app.

Nothing here runs unless the app was started with `--console`: only then is `wardian.console.server` (Starlette,
uvicorn, Jinja2) imported, so the app without a console and the CLI's cold start never load them. `address` and
`auth` use the standard library only. `server` serves the application `web` assembles from `pages/` (one module per
page) and `presenters/` (what the templates render).
"""

__all__: list[str] = []
