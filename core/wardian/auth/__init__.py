"""Sign-in: the home's credentials and how each provider's agents get them (docs/guide/sign-in.md).

`wardian.auth.model` holds the records every layer shares (stdlib only); the credential store, its checks and the
choice of an agent's credentials live beside it. It is provider neutral and imports no provider, client or app:
Codex's ChatGPT sign-in is `wardian.providers.codex`'s, and the `wardian auth` commands are the CLI's.
"""
