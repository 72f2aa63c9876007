"""The cyclic garbage collector held back while a round plans (`collector_paused`).

A round allocates many small containers that live until it ends (memos, plans, verdicts) beside
a snapshot of tens of thousands of objects. Each full collection the interpreter starts on its
own walks all of them, and at 5,000 nodes a round set off several: about a tenth of its CPU,
spent finding no garbage (a round's objects are freed by reference counting when it returns;
it builds no reference cycles it drops). So automatic collection waits while a round runs and
resumes when the last round running in the process returns; `gc.collect()` still works.

Rounds may run in several threads at once: the pause is counted, and the collector is switched
back on only when the last one ends and only if it was on when the first began.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class _Pauses:
    """How many rounds hold the collector back, and whether to switch it on after them."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.depth = 0
        self.resume = False

    def enter(self) -> None:
        with self.lock:
            if self.depth == 0:
                self.resume = gc.isenabled()
                gc.disable()
            self.depth += 1

    def leave(self) -> None:
        with self.lock:
            self.depth -= 1
            if self.depth == 0 and self.resume:
                gc.enable()


_PAUSES = _Pauses()


@contextmanager
def collector_paused() -> Iterator[None]:
    """No automatic cyclic collection inside; the collector's setting is restored after."""
    _PAUSES.enter()
    try:
        yield
    finally:
        _PAUSES.leave()
