"""``Throttle``: run a render function at most once per interval, coalescing requests.

Live widgets must not send a message per event: a tuning run can report hundreds of batches a
second from the database replay, and every trait change is an IOPub message (Jupyter drops
output past its rate limit). The pattern (ecosystem.md section 3.4): callers only say "the
state changed" (:meth:`Throttle.request`); the render function reads the *current* state, so
any number of requests between two renders cost one render, and the last state is always
rendered:

- a request long enough after the previous render renders at once, in the caller's thread
  (leading edge: the first batch shows without delay);
- otherwise a timer renders once ``interval`` after the previous render (trailing edge);
- :meth:`flush` renders synchronously if anything is pending (the end of a run).

Renders never overlap (one lock), so the render function need not be re-entrant. An exception
in a render is kept in ``last_error`` and does not propagate into the tuner.
"""
from __future__ import annotations

import threading
import time
from typing import Callable

__all__ = ["Throttle"]


class Throttle:
    """Coalescing rate limiter for ``render()`` (see the module docstring).

    ``renders`` counts completed calls of ``render``; ``interval`` is in seconds (0 renders
    on every request).
    """

    def __init__(self, render: Callable[[], None], interval: float = 0.25) -> None:
        if interval < 0:
            raise ValueError(f"Throttle: interval must be >= 0 seconds, got {interval!r}")
        self._render = render
        self.interval = float(interval)
        self._state_lock = threading.Lock()   # guards the fields below
        self._render_lock = threading.Lock()  # one render at a time
        self._pending = False
        self._timer: threading.Timer | None = None
        self._last = -float("inf")
        self.renders = 0
        self.last_error: BaseException | None = None
        self._closed = False

    @property
    def pending(self) -> bool:
        """Whether a request has not been rendered yet."""
        with self._state_lock:
            return self._pending

    def request(self) -> None:
        """Note that the state changed; render now or schedule one trailing render."""
        with self._state_lock:
            self._pending = True
            if self._closed:
                return
            wait = self._last + self.interval - time.monotonic()
            if wait > 0:
                if self._timer is None:
                    self._timer = threading.Timer(wait, self._on_timer)
                    self._timer.daemon = True
                    self._timer.start()
                return
        self._run()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until nothing is pending and no render runs (the trailing render is done);
        False if ``timeout`` seconds passed first."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if not self.pending:
                # Taking the render lock waits out a render that is still running.
                if self._render_lock.acquire(timeout=-1 if deadline is None
                                             else max(0.0, deadline - time.monotonic())):
                    self._render_lock.release()
                    if not self.pending:
                        return True
            if deadline is not None and time.monotonic() >= deadline:
                return False
            time.sleep(0.005)

    def flush(self) -> None:
        """Render now if a request is pending (cancels the trailing timer)."""
        with self._state_lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
        self._run()

    def close(self) -> None:
        """Render what is pending, then stop scheduling timers (requests are still noted)."""
        self.flush()
        with self._state_lock:
            self._closed = True

    def _on_timer(self) -> None:
        with self._state_lock:
            self._timer = None
        self._run()

    def _run(self) -> None:
        with self._render_lock:
            with self._state_lock:
                if not self._pending:
                    return
                # Cleared before rendering, and the interval counts from the render's start:
                # a request during the render schedules one trailing render.
                self._pending = False
                self._last = time.monotonic()
            try:
                self._render()
            except Exception as err:  # a display problem must not end a tuning run
                self.last_error = err
            finally:
                with self._state_lock:
                    self.renders += 1
