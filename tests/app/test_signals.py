"""Mailbox signals: subscribe-before-check and the wake reason (RCV-6: provider_context_available)."""

from __future__ import annotations

import anyio
import pytest

from wardian.app.signals import MAILBOX_ACTIVITY, PROVIDER_CONTEXT, MailboxSignals

pytestmark = pytest.mark.fast  # the fast tier (scripts/check test-fast)


@pytest.mark.anyio
async def test_a_signal_between_subscribe_and_wait_is_not_lost() -> None:
    """WAIT-2: a waiter that subscribed before looking sees a signal sent before it waits."""
    signals = MailboxSignals()
    with signals.subscribe("a") as waiter:
        signals.notify("a")
        with anyio.fail_after(1):
            await waiter.wait()
    assert waiter.reason == MAILBOX_ACTIVITY
    assert signals.waiting("a") == 0


@pytest.mark.anyio
async def test_provider_context_is_the_reason_unless_mailbox_activity_also_landed() -> None:
    """RCV-6: receive can return with wake_reason provider_context_available; a record that also landed wins."""
    signals = MailboxSignals()
    with signals.subscribe("a") as only_context, signals.subscribe("b") as both:
        signals.notify("a", PROVIDER_CONTEXT)
        signals.notify("b", PROVIDER_CONTEXT)
        signals.notify("b", MAILBOX_ACTIVITY)
    assert only_context.reason == PROVIDER_CONTEXT
    assert both.reason == MAILBOX_ACTIVITY


@pytest.mark.anyio
async def test_signals_are_per_recipient() -> None:
    signals = MailboxSignals()
    with signals.subscribe("a") as a, signals.subscribe("b") as b:
        signals.notify("b")
        assert not a.event.is_set()
        assert b.event.is_set()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
