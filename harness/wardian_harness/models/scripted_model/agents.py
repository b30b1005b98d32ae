"""One agent's script queue and request log."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING
from urllib.parse import quote

from wardian_harness.models.scripted_model.requests import RecordedRequest, key_fingerprint
from wardian_harness.models.scripted_model.steps import Step

if TYPE_CHECKING:
    from wardian_harness.models.scripted_model.model import ScriptedModel


class AgentScript:
    """One agent's script queue and request log; get one from `ScriptedModel.agent`."""

    def __init__(self, model: ScriptedModel, name: str) -> None:
        self.name = name
        self._model = model
        self._steps: deque[Step] = deque()
        self._log: list[RecordedRequest] = []
        self._titles: list[RecordedRequest] = []
        self._required: str | None = None
        self._cond = threading.Condition()

    def __repr__(self) -> str:
        return f"AgentScript({self.name!r}, pending={len(self._steps)}, requests={len(self._log)})"

    @property
    def base_url(self) -> str:
        """The provider `base_url` for this agent; Codex POSTs to `{base_url}/responses`."""
        return f"{self._model.url}/agents/{quote(self.name, safe='')}/v1"

    def add(self, *steps: Step) -> AgentScript:
        """Append steps to the script (consumed one per model request) and return self."""
        with self._cond:
            self._steps.extend(steps)
        return self

    def require_key(self, key: str | None) -> AgentScript:
        """From now on answer every request of this agent that does not carry exactly `key` (`Authorization: Bearer
        <key>` or `x-api-key: <key>`, whatever the dialect) with HTTP 401 in its dialect's error form, consuming no
        step; None lifts the requirement. Only the key's fingerprint is kept. Returns self."""
        with self._cond:
            self._required = None if key is None else key_fingerprint(key)
        return self

    @property
    def required_key(self) -> str | None:
        """The fingerprint of the key this agent's requests must carry (`require_key`), or None."""
        with self._cond:
            return self._required

    @property
    def unauthorized_requests(self) -> list[RecordedRequest]:
        """Requests answered 401 because they lacked the required key (in `requests` too, in order)."""
        return [r for r in self.requests if r.unauthorized]

    @property
    def pending(self) -> int:
        """How many steps are still queued."""
        with self._cond:
            return len(self._steps)

    @property
    def requests(self) -> list[RecordedRequest]:
        """A snapshot of the request log, oldest first."""
        with self._cond:
            return list(self._log)

    @property
    def last_request(self) -> RecordedRequest:
        """The newest request.

        Raises:
            LookupError: no request has arrived yet.
        """
        with self._cond:
            if not self._log:
                raise LookupError(f"agent {self.name!r} has received no model request")
            return self._log[-1]

    @property
    def exhausted_requests(self) -> list[RecordedRequest]:
        """Requests answered by the default message because the script had run out."""
        return [r for r in self.requests if r.exhausted]

    def wait_for_requests(self, count: int, timeout_s: float = 30.0) -> list[RecordedRequest]:
        """Block until at least `count` requests have been recorded and return the log.

        Raises:
            TimeoutError: fewer than `count` requests arrived within `timeout_s`.
        """
        with self._cond:
            if not self._cond.wait_for(lambda: len(self._log) >= count, timeout_s):
                raise TimeoutError(f"agent {self.name!r}: {len(self._log)} of {count} requests after {timeout_s}s")
            return list(self._log)

    def _next_step(self) -> Step | None:
        with self._cond:
            return self._steps.popleft() if self._steps else None

    def _put_back(self, step: Step) -> None:
        """Make `step` the next one again (a dialect answered its request with a step of its own first)."""
        with self._cond:
            self._steps.appendleft(step)

    @property
    def title_requests(self) -> list[RecordedRequest]:
        """Codex's title-generation requests, answered with TITLE_TEXT; not in `requests`, no step consumed."""
        with self._cond:
            return list(self._titles)

    def _record_title(self, make: Callable[[int], RecordedRequest]) -> RecordedRequest:
        with self._cond:
            recorded = make(len(self._titles))
            self._titles.append(recorded)
            return recorded

    def _record(self, make: Callable[[int], RecordedRequest]) -> RecordedRequest:
        with self._cond:
            recorded = make(len(self._log))
            self._log.append(recorded)
            self._cond.notify_all()
            return recorded


