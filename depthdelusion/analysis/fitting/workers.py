"""Independent fits in worker processes: the report's laws, each with its bootstraps; each
design form's pair of fits and each rechecked design cell; the null's and each alternative's
refits of a parametric-bootstrap test. A unit's numbers depend only on its inputs (every fit
and test is seeded by the caller's seed, not by what ran before it in the process), so a report
is the same for any number of workers; the tests compare one worker with two byte for byte.
The functions that take a ``map`` default to :func:`in_this_process`.

Workers are started by ``spawn``, not ``fork``: the sweep's closing report runs in the process
that trained with JAX, whose threads a forked child would inherit mid-lock.
"""
from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from typing import Callable, Iterable


def available_cpus() -> int:
    """The CPUs this process may run on (its affinity where the OS says, else the count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def in_this_process(fn: Callable, items: Iterable) -> list:
    """``[fn(item) for item in items]``: the ``map`` of one worker, this process."""
    return [fn(item) for item in items]


class Workers:
    """``with Workers(n) as workers``: :meth:`submit` hands out units of work; ``n`` ≤ 1 (or a
    single unit) computes each in this process when its result is asked for, so the order of
    the report's progress lines is the same either way. The processes start at the first
    submission of more than one unit and end with the ``with``."""

    def __init__(self, count: int | None):
        self.count = available_cpus() if count is None else int(count)
        self._pool = None

    def submit(self, fn: Callable, items: Iterable) -> list[Callable[[], object]]:
        """``fn(item)`` for every item: one callable per item, in order, returning its result."""
        items = list(items)
        if self.count <= 1 or len(items) <= 1:
            return [lambda item=item: fn(item) for item in items]
        if self._pool is None:
            self._pool = ProcessPoolExecutor(self.count, mp_context=multiprocessing.get_context("spawn"))
        return [future.result for future in [self._pool.submit(fn, item) for item in items]]

    def map(self, fn: Callable, items: Iterable) -> list:
        """``[fn(item) for item in items]``, the items spread over the workers."""
        return [result() for result in self.submit(fn, items)]

    def __enter__(self) -> "Workers":
        return self

    def __exit__(self, *exc) -> None:
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None
