"""Progress of long work (depthdelusion/progress.py): one decision, terminal or log, for the
training line and the analysis commands' stages; a bar on a terminal, plain lines in a log."""
import fcntl
import io
import os
import pty
import re
import struct
import termios

from depthdelusion.progress import Stages, on_terminal
from depthdelusion.train.records import Progress


def test_a_pipe_or_a_file_is_a_log_and_a_pty_is_a_terminal(tmp_path):
    read_end, write_end = os.pipe()
    primary, secondary = pty.openpty()
    with os.fdopen(write_end, "w") as pipe, open(tmp_path / "log", "w") as log, \
            os.fdopen(secondary, "w") as tty:
        assert not on_terminal(pipe) and not on_terminal(log) and not on_terminal(io.StringIO())
        assert on_terminal(tty)
        # the training progress line asks the same question
        assert Progress(10, stream=tty).tty and not Progress(10, stream=log).tty
    os.close(read_end)
    os.close(primary)


def _everything_written(primary: int) -> str:
    """All a closed pty's other end wrote: one read returns only what the kernel has moved to the
    primary so far (it moves the secondary's writes asynchronously), so read to the end, which
    Linux signals with EIO once the secondary is closed and drained."""
    chunks = []
    while True:
        try:
            chunk = os.read(primary, 65536)
        except OSError:  # EIO: the secondary is closed and everything was read
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(primary)
    return b"".join(chunks).decode()


def test_stages_on_a_terminal_draw_a_bar_and_write_no_log_lines():
    primary, secondary = pty.openpty()
    fcntl.ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))  # 100 columns
    with os.fdopen(secondary, "w") as tty:
        with Stages("report", 3, stream=tty) as progress:
            for text in ("fitting kaplan", "tests", "figures"):
                progress.stage(text)
    drawn = _everything_written(primary)
    assert "\r" in drawn and "report: 3/3" in drawn and "done" in drawn
    assert "[1/3]" not in drawn  # the log form


def test_stages_in_a_log_are_one_line_each_and_may_be_counted_as_they_come():
    log = io.StringIO()
    progress = Stages("fit", stream=log)
    progress.expect(2)
    progress.stage("search")
    progress.expect(1)
    progress.stage("bootstrap")
    progress.stage("diagnostics")
    progress.close()
    lines = log.getvalue().splitlines()
    assert [re.sub(r" \(at \d+ s\)$", "", line) for line in lines[:3]] == [
        "fit: [1/2] search", "fit: [2/3] bootstrap", "fit: [3/3] diagnostics"]
    assert lines[3].startswith("fit: done in ") and len(lines) == 4
    quiet = io.StringIO()
    with Stages("fit", stream=quiet, enabled=False) as off:
        off.stage("search")
    assert quiet.getvalue() == ""
