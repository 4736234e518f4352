"""Progress of long work, on stderr: a tqdm bar on a terminal, plain lines in a log (a file or
a pipe would fill with a bar's redraws). The one owner of that decision, :func:`on_terminal`:
the training progress line (train/records.py) and the stages of the analysis commands
(`report`, `fit`, a sweep's analysis) both ask it. Nothing here writes to stdout, so a
command's ``--json`` output there stays pure JSON."""
from __future__ import annotations

import sys
import time


def on_terminal(stream) -> bool:
    """Whether ``stream`` is a terminal (a bar is drawn) rather than a log (plain lines)."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed capture stream
        return False


class Stages:
    """The named stages of one command. On a terminal a tqdm bar over the stages, the current
    one as its postfix; in a log one line as each stage starts, ``WHAT: [i/n] TEXT (at T s)``
    (T: seconds since the start), and one at the end with the elapsed time. ``enabled=False`` shows nothing. Stages may be added as
    they become known (:meth:`expect`)."""

    def __init__(self, what: str, total: int = 0, stream=None, enabled: bool = True):
        # sys.stderr when called, not when imported (a test runner may have replaced it since)
        self.stream = sys.stderr if stream is None else stream
        self.what, self.total, self.enabled = what, total, enabled
        self.started, self.done, self.bar = 0, False, None
        self.t0 = time.perf_counter()
        if enabled and on_terminal(self.stream):
            from tqdm import tqdm

            self.bar = tqdm(total=total, desc=what, file=self.stream, unit="stage", dynamic_ncols=True,
                            bar_format="{desc}: {n}/{total} {bar} [{elapsed}] {postfix}")

    def expect(self, more: int) -> None:
        """``more`` stages beyond those counted so far."""
        if not self.enabled:
            return
        self.total += more
        if self.bar is not None:
            self.bar.total = self.total
            self.bar.refresh()

    def stage(self, text: str) -> None:
        """A stage starts (the previous one, if any, has finished)."""
        if not self.enabled:
            return
        self.started += 1
        self.total = max(self.total, self.started)
        if self.bar is not None:
            self.bar.total = self.total
            self.bar.set_postfix_str(text, refresh=False)
            self.bar.update(self.started - 1 - self.bar.n)
        else:
            self.stream.write(f"{self.what}: [{self.started}/{self.total}] {text} "
                              f"(at {time.perf_counter() - self.t0:.0f} s)\n")
            self.stream.flush()

    def close(self) -> None:
        """Every stage has finished."""
        if not self.enabled or self.done:
            return
        self.done = True
        if self.bar is not None:
            self.bar.set_postfix_str("done", refresh=False)
            self.bar.update(self.total - self.bar.n)
            self.bar.close()
        else:
            self.stream.write(f"{self.what}: done in {time.perf_counter() - self.t0:.0f} s\n")
            self.stream.flush()

    def __enter__(self) -> "Stages":
        return self

    def __exit__(self, *exc) -> None:
        if exc[0] is None:
            self.close()
        elif self.bar is not None:  # an error: the bar stops where it was
            self.bar.close()


#: shows nothing: for callers that report no progress
SILENT = Stages("", enabled=False)
