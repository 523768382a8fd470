"""ScheduleError: what a primitive raises when its preconditions do not hold."""
from __future__ import annotations


class ScheduleError(ValueError):
    """A schedule primitive refused a request; the schedule is unchanged.

    ``primitive`` is the primitive's name, ``subject`` the block or loop it was applied to, and
    ``reason`` why it cannot be done.
    """

    def __init__(self, primitive: str, subject: str, reason: str) -> None:
        self.primitive = primitive
        self.subject = subject
        self.reason = reason
        super().__init__(f"ScheduleError in {primitive} on {subject}: {reason}")
