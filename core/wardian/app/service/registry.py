"""The table of the functions that serve the app's methods: each resource module registers its own with
`@handlers.serves(name)`; `wardian.app.service.app` completes it once all of them are imported."""

from __future__ import annotations

from typing import TYPE_CHECKING

from wardian.protocol.methods import Handlers

if TYPE_CHECKING:
    from wardian.app.service.app import AppService

handlers: Handlers[AppService] = Handlers()
