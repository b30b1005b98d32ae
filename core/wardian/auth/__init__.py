"""Sign-in: the home's credentials and how each provider's agents get them (docs/guide/sign-in.md).

`wardian.auth.model` holds the records every layer shares (stdlib only); the credential store and the commands that
fill it live beside it.
"""
