"""The web console (#16): live agents, live exchange, request views and the operator's actions, served by the app.

Nothing here runs unless the app was started with `--console`: `wardian.app.run` imports `wardian.console.server`
(Starlette, uvicorn, Jinja2) only then, so the app without a console and the CLI's cold start never load them.
`address` and `auth` use the standard library only.
"""

__all__: list[str] = []
