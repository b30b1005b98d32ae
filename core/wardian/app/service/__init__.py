"""The app's service: `AppService` runs the app's methods, one module per resource (messages, tasks, mailbox,
agents, operator, story) holding the functions that serve them."""

from __future__ import annotations

from wardian.app.service.app import HANDLERS, AppService, ConsoleLogins
from wardian.app.service.messages import admit_as

__all__ = ["HANDLERS", "AppService", "ConsoleLogins", "admit_as"]
