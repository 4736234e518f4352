"""Independent fits in worker processes: the report's laws, each with its bootstraps; each
design form's pair of fits and each rechecked design cell; the null's and each alternative's
refits of a parametric-bootstrap test. A unit's numbers depend only on its inputs (every fit
and test is seeded by the caller's seed, not by what ran before it in the process), so a report
is the same for any number of workers; the tests compare one worker with two byte for byte.
The functions that take a ``map_units`` default to :func:`in_this_process`.

Workers are started by ``spawn``, not ``fork`` (a process that trained with JAX holds threads a
forked child would inherit mid-lock): each imports the package afresh and looks laws up by name,
so a caller hands units out only for laws a fresh process has (``laws.fresh_process_fits``), and
a script that does so needs the ``if __name__ == "__main__"`` guard spawn asks for.
"""
from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from typing import Callable, Iterable


#: Bootstraps per fit from which `report` hands its units to worker processes by default: below
#: it the fits take seconds, about what starting the workers (each importing numpy and scipy) costs.
PARALLEL_FROM_BOOTSTRAPS = 100


def available_cpus() -> int:
    """The CPUs this process may run on (its affinity where the OS says, else the count)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def in_this_process(fn: Callable, items: Iterable) -> list:
    """``[fn(item) for item in items]``: the ``map_units`` of one worker, this process."""
    return [fn(item) for item in items]


class Workers:
    """``with Workers(n) as workers``: :meth:`submit` hands out units of work; ``n`` ≤ 1 (or a
    single unit) computes each in this process when its result is asked for, so the order of
    the report's progress lines is the same either way. The processes start at the first
    submission of more than one unit and end with the ``with``; on an error or Ctrl-C they are
    stopped at once, not waited for."""

    def __init__(self, count: int):
        self.count = count
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

    def __exit__(self, exc_type, *exc) -> None:
        if self._pool is None:
            return
        pool, self._pool = self._pool, None
        if exc_type is None:
            pool.shutdown()
            return
        # a failed or interrupted report: units still running would hold it for minutes
        for process in list((getattr(pool, "_processes", None) or {}).values()):  # no public handle before 3.14
            process.terminate()
        pool.shutdown(wait=False, cancel_futures=True)
