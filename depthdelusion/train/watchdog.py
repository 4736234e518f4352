"""Fail fast across the hosts of a slice, and end a run whose step has stopped advancing.

A multi-host run is one SPMD program. If one host raises (a GCS 503 while reading its data shard)
while the others wait in the step's collectives, nothing tells them: measured with two gloo
processes (jax 0.10.2), the raising process sat for 300 s in `jax.distributed.shutdown`'s barrier
(shutdown_timeout_seconds) and its peer waited in the collective until then; on a TPU slice the
peers bill for the whole time. And a sweep that catches the error on one host moves that host on
to the next run while the others are still in the previous one.

So on more than one process:
- a host that fails posts its error under `depthdelusion/failed/<process>` in the coordination
  service's key-value store (the one jax.distributed already runs) and exits at once with
  `os._exit`, skipping the shutdown barrier;
- every host runs a `Watchdog` thread that polls that key every `poll_s` seconds and exits
  (status 1) as soon as another host has failed.
On any number of processes the watchdog also ends the run (every host, status 1, all threads'
stacks printed) when its step has not advanced for `stall_s` seconds (train.watchdog_minutes): a
hung collective, a stuck data read or a dead peer on ICI would otherwise bill until someone looks.
Time the process spent suspended (SIGSTOP/SIGCONT, a laptop's sleep, a paused VM) is not a stall:
the monotonic clock runs on through it, so a gap between two of the watchdog's own polls of more
than `SUSPENDED_GAP_S` (and 10 polls) is taken off the idle time. Measured on 2026-12-02: a
sweep paused with SIGSTOP for the 20 min of a CI run was ended at once on SIGCONT, 49 min
"without a step".
A supervisor (tpu/babysit.sh) re-runs the same command, which resumes from the last checkpoint.
"""
from __future__ import annotations

import faulthandler
import os
import sys
import threading
import time
from typing import NoReturn

import jax

FAILED_PREFIX = "depthdelusion/failed/"
EXIT_FAILED = 1
# A poll due every few seconds that comes a minute late: the process was not running. A loaded
# machine delays a thread's wake by seconds, not a minute.
SUSPENDED_GAP_S = 60.0


def _client():
    """jax.distributed's coordination client; None in a single-process run."""
    if jax.process_count() < 2:
        return None
    from jax._src import distributed

    return distributed.global_state.client


def _exit(text: str) -> NoReturn:
    sys.stdout.flush()
    sys.stderr.write(text + "\n")
    sys.stderr.flush()
    os._exit(EXIT_FAILED)


def end_every_host(message: str) -> NoReturn:
    """Tell the other hosts (their watchdogs exit within `poll_s`) and exit now with status 1."""
    client = _client()
    if client is not None:
        try:
            client.key_value_set(f"{FAILED_PREFIX}{jax.process_index()}", message[:2000])
        except Exception:  # noqa: BLE001 - the coordination service may be gone already
            pass
    _exit(f"process {jax.process_index()} of {jax.process_count()} failed, ending every host: {message}")


class Watchdog:
    """A daemon thread: exits the process when another host failed (multi-host) or when no
    `beat()` came for `stall_s` seconds (0 = never). Use as a context manager around the loop."""

    def __init__(self, stall_s: float, poll_s: float = 2.0):
        self.stall_s, self.poll_s = float(stall_s), float(poll_s)
        self.client = _client()
        self.step: int | None = None
        self.last = time.monotonic()
        self.suspended_s = 0.0  # time suspended since the last beat: not idle
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="depthdelusion-watchdog", daemon=True)

    def __enter__(self) -> Watchdog:
        if self.client is not None or self.stall_s > 0:
            self.last = time.monotonic()
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stopped.set()

    def beat(self, step: int) -> None:
        self.step, self.last, self.suspended_s = step, time.monotonic(), 0.0

    def _watch(self) -> None:
        woke = time.monotonic()
        while not self._stopped.wait(self.poll_s):
            previous, woke = woke, time.monotonic()
            if woke - previous > max(SUSPENDED_GAP_S, 10 * self.poll_s):
                self.suspended_s += woke - previous - self.poll_s
            if self.client is not None:
                try:
                    failed = self.client.key_value_dir_get(FAILED_PREFIX)
                except Exception:  # noqa: BLE001 - service gone: jax's own heartbeat ends us
                    failed = []
                if failed:
                    key, message = failed[0]
                    _exit(f"process {jax.process_index()}: process {key.rsplit('/', 1)[-1]} failed "
                          f"({message}); ending this host too")
            idle = time.monotonic() - self.last - self.suspended_s
            if self.stall_s > 0 and idle > self.stall_s and not self._stopped.is_set():
                faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
                end_every_host(f"watchdog: the step has not advanced past {self.step} for {idle:.0f} s "
                               f"(train.watchdog_minutes = {self.stall_s / 60:g})")
