"""Interrupt the main thread when a run of generated code outlasts its timeout.

One timer thread per kernel serves every run (see `_TimerThread`); the main thread takes
the interrupt as a KeyboardInterrupt while the run lasts, and absorbs a late one after.
"""

from __future__ import annotations

import logging
import math
import os
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import FrameType

log = logging.getLogger(__name__)

#: Seconds between further SIGINTs after the timeout, in case the code swallowed one.
REFIRE_S = 1.0


class _TimerThread:
    """One thread that fires every run's timeout, started once per kernel.

    Starting a thread per run, and waking it when the run ends, each make the main thread
    wait for another thread to be scheduled: on a busy machine, the slowest part of a short
    step. This thread sleeps until the earliest deadline of the alarms it holds; a run that
    ends disarms its alarm without waking it, and it drops disarmed alarms when it wakes.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._alarms: list[Alarm] = []
        self._thread: threading.Thread | None = None
        self._wake_at = math.inf  # when the thread looks at its alarms next

    def add(self, alarm: Alarm) -> None:
        """Fire `alarm` at its deadline, unless it is disarmed by then."""
        with self._cond:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._serve, daemon=True,
                                                name="jupyter-ci-timeout")
                self._alarms, self._wake_at = [], math.inf
                self._thread.start()
            self._alarms.append(alarm)
            if alarm.due < self._wake_at:  # sooner than the thread would look
                self._cond.notify()

    def reset(self) -> None:
        """Forget the thread and its lock (in a forked child, where neither survives)."""
        self._cond, self._alarms = threading.Condition(), []
        self._thread, self._wake_at = None, math.inf

    def _serve(self) -> None:
        with self._cond:
            while True:
                now = time.monotonic()
                self._alarms = [alarm for alarm in self._alarms if alarm.armed]
                for alarm in self._alarms:
                    if alarm.due <= now:
                        alarm.fire(now)
                self._wake_at = min((alarm.due for alarm in self._alarms), default=math.inf)
                self._cond.wait(None if self._wake_at == math.inf else self._wake_at - now)


_TIMERS = _TimerThread()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_TIMERS.reset)


@dataclass
class Alarm:
    """Interrupt the main thread with SIGINT after a timeout, never after the cell ended."""

    timeout: float
    sent: int = 0  # SIGINTs the timer sent
    late: bool = False  # a SIGINT arrived after the cell ended
    _armed: bool = True
    #: When the timer thread interrupts the main thread next (monotonic seconds).
    due: float = math.inf
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            # Python runs signal handlers on the main thread only (ipykernel subshells run
            # cells elsewhere): there the timeout is not enforced.
            log.warning("not on the main thread: the timeout cannot be enforced")
            self._armed = False  # and the timer must not interrupt the main thread instead

    @contextmanager
    def installed(self) -> Iterator[None]:
        """Let SIGINT raise KeyboardInterrupt in the cell; take any late signal at the end."""
        if not self._armed:
            yield
            return
        # The C default_int_handler (ipykernel's choice too) adds no frame to tracebacks.
        previous = signal.signal(signal.SIGINT, signal.default_int_handler)
        try:
            yield
        finally:
            try:
                self._disarm()
            finally:
                # None: a handler not set from Python, which cannot be put back from here.
                restore = signal.default_int_handler if previous is None else previous
                signal.signal(signal.SIGINT, restore)
        if self.late and not self.sent:
            raise KeyboardInterrupt  # not ours: the user pressed Stop just after the cell

    def start(self) -> None:
        """Start the timer."""
        self.due = time.monotonic() + self.timeout
        if self._armed:  # an unarmed alarm never fires: nothing to wait for
            _TIMERS.add(self)

    def stop(self) -> None:
        """From now on, absorb SIGINTs instead of raising: the cell has ended."""
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, self._absorb)

    @property
    def armed(self) -> bool:
        """Tell whether the alarm can still fire."""
        return self._armed

    def fire(self, now: float) -> None:
        """Interrupt the main thread (on the timer thread, at the deadline), unless disarmed."""
        target = threading.main_thread().ident
        with self._lock:  # _disarm takes it too: no signal is sent after _disarm
            if not self._armed or target is None:
                return
            self.sent += 1
            # pthread_kill, not os.kill: only a signal aimed at the main thread makes a
            # blocking call there (time.sleep, select, wait) return with EINTR.
            signal.pthread_kill(target, signal.SIGINT)
            # Keep interrupting, as a user would: `except:` in a retry loop swallows one.
            self.due = now + REFIRE_S

    def _absorb(self, signum: int, frame: FrameType | None) -> None:
        self.late = True

    def _disarm(self) -> None:
        self.stop()
        with self._lock:
            self._armed = False
            sent = self.sent
        if not sent:
            # No signal of ours can be pending (another SIGINT is sent to the process, which
            # takes it at once): spare the wait below, which lets other threads in.
            return
        # A signal sent just before is pending or delivered: consume a pending one, and
        # unblocking runs the Python handler (_absorb) of a delivered one, before run() ends.
        sigint = {signal.SIGINT}
        signal.pthread_sigmask(signal.SIG_BLOCK, sigint)
        try:
            if signal.sigtimedwait(sigint, 0) is not None:
                self.late = True
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, sigint)
