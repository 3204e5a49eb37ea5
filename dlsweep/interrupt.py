"""Ctrl-C (SIGINT) in the command line: an immediate exit with status 130 and one line on stderr,
at any moment, also while XLA compiles and while JAX imports.

Python runs a signal handler only between bytecodes of the main thread, so a KeyboardInterrupt
waits until a compile (C++, tens of seconds) returns, and one raised from inside JAX's compile
leaves the interpreter to crash at exit (SIGSEGV, status -11). Instead the signal wakes a thread
(`signal.set_wakeup_fd`; XLA releases the GIL while it compiles) that exits at once, skipping the
interpreter's teardown. Nothing is lost: every file of a run folder is written to a temporary
and renamed into place, the next run sweeps the temporaries of a writer that is gone, and the
folder's locks are the kernel's, released with the process.

This module imports nothing heavy, so the command line can arm it before it imports JAX.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading

EXIT_STATUS = 128 + signal.SIGINT      # what a shell reports for a command ended by Ctrl-C


@contextlib.contextmanager
def exits_at_once(message: str):
    """Within the block, SIGINT prints `message` on stderr and ends the process with status 130.
    Only the main thread can own signals; elsewhere the block changes nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)          # set_wakeup_fd writes from the C signal handler
    handler = signal.signal(signal.SIGINT, _leave_to_watcher)
    wakeup = signal.set_wakeup_fd(wake_write)
    watcher = threading.Thread(target=_watch, args=(wake_read, message), name="dlsweep-interrupt", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        signal.set_wakeup_fd(wakeup)
        signal.signal(signal.SIGINT, handler)
        os.close(wake_write)                    # the watcher reads end of file and returns
        watcher.join()
        os.close(wake_read)


def _leave_to_watcher(signum, frame) -> None:
    """The Python-level handler: a no-op (the watcher thread has already acted on the signal);
    one must be set for the signal to reach the wakeup file descriptor."""


def _watch(wake_read: int, message: str) -> None:
    """Wait for SIGINT's byte on the wakeup pipe, then exit: the line, stdout's buffer flushed
    (what was printed stays printed), status 130."""
    while chunk := os.read(wake_read, 64):
        if signal.SIGINT in chunk:
            line = ("\n" if os.isatty(2) else "") + message + "\n"      # after a progress bar, on a line of its own
            os.write(2, line.encode())
            with contextlib.suppress(Exception):
                sys.stdout.flush()
            os._exit(EXIT_STATUS)
