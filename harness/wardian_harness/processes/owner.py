"""A process named by its pid and its start time, so that a record on disk names that process and no later one under
the same number: what the reapers of the harness (`wardian_harness.hosts.postgres.reap_orphans`,
`wardian_harness.processes.app_records`) decide by."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psutil

__all__ = ["Owner"]

# psutil computes a start time from the boot time, which the kernel may report a little differently to two readers
# (clock adjustments move /proc/stat's btime): within this, the same process. A pid reused that soon after its owner
# started is not a case to guard against; the cost of one would only be a cluster or an app reaped a session later.
START_TOLERANCE_S = 1.0


@dataclass(frozen=True)
class Owner:
    """A process named by its pid and its start time (a cluster's owner or its server, an app or the process that
    started it): the pid of a process that has exited is given to the next ones, and only the start time tells it from a
    later process under that number."""

    pid: int
    started: float

    @classmethod
    def of(cls, pid: int) -> Owner:
        """The running process `pid`.

        Raises:
            psutil.NoSuchProcess: there is none.
        """
        return cls(pid, psutil.Process(pid).create_time())

    def alive(self) -> bool:
        """Whether this very process still runs; a zombie (killed, not yet waited for by its parent) is gone. A process
        that may not be inspected counts as alive: nothing is ever reaped on a guess."""
        try:
            proc = psutil.Process(self.pid)
            return abs(proc.create_time() - self.started) < START_TOLERANCE_S and proc.status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:  # ZombieProcess included
            return False
        except psutil.AccessDenied:
            return True

    def as_json(self) -> dict[str, Any]:
        return {"pid": self.pid, "started": self.started}

    @classmethod
    def from_json(cls, value: Any) -> Owner | None:
        if not isinstance(value, dict):
            return None
        pid, started = value.get("pid"), value.get("started")
        if isinstance(pid, int) and pid > 0 and isinstance(started, int | float):
            return cls(pid, float(started))
        return None
