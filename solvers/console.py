"""Keep every solver's console output off stdout: stdout belongs to optfleet (one JSON document with ``--json``).

Solvers written in C or C++ print with ``printf`` or ``std::cout`` to file
descriptor 1, below Python: HiGHS 1.16 prints its banner there when the first
``highspy.Highs`` of a process is created, whatever ``output_flag`` says, and a
Python-level ``sys.stdout`` redirect does not see it.  :func:`solver_console`
therefore points descriptor 1 itself somewhere else for the duration of a solver
session: to a temporary file (the default; the session's text is returned and
goes into the ``SolveReport`` log) or to stderr (``to_stderr=True``, for a log
streamed live).  Python's own ``sys.stdout`` and the C library's buffers are
flushed on the way in and out, so nothing written before the block lands in
the file and nothing written inside it reaches stdout later.

Descriptor 1 belongs to the whole process, so the redirect is shared: the
first session in (of any thread) installs it and the last one out restores
stdout; a session that starts while another holds a redirect to the other
target uses that one (its output still never reaches stdout).  A session's
``text`` is what the shared file received while it ran: with sessions running
at once in several threads it may hold some of the others' output too.  Where
descriptor 1 is not open, there is nothing to protect and nothing is done.
"""

from __future__ import annotations

import ctypes
import os
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO

STDOUT_FD = 1
STDERR_FD = 2


@dataclass
class ConsoleCapture:
    """What a solver wrote to the console during one :func:`solver_console` block (filled in on exit)."""

    text: str = ""


@dataclass
class _Redirect:
    saved_stdout_fd: int
    sink: IO[bytes] | None  # the temporary file, or None when descriptor 1 points at stderr
    users: int = 0


_lock = threading.Lock()
_active: _Redirect | None = None


@contextmanager
def solver_console(*, to_stderr: bool = False) -> Iterator[ConsoleCapture]:
    """Send whatever is written to descriptor 1 inside the block to a temporary file (its text is in the
    yielded capture after the block) or, with ``to_stderr``, to stderr; restore stdout afterwards."""
    capture = ConsoleCapture()
    redirect, start = _enter(to_stderr)
    try:
        yield capture
    finally:
        capture.text = _leave(redirect, start)


def _enter(to_stderr: bool) -> tuple[_Redirect | None, int]:
    global _active
    with _lock:
        if _active is None:
            try:
                saved = os.dup(STDOUT_FD)
            except OSError:  # descriptor 1 is closed: nothing can reach stdout
                return None, 0
            _flush_all()
            # append mode: writes through descriptor 1 always go to the end, whatever offset a reader moved
            sink = None if to_stderr else tempfile.TemporaryFile(mode="a+b", prefix="optfleet-console-")
            os.dup2(STDERR_FD if sink is None else sink.fileno(), STDOUT_FD)
            _active = _Redirect(saved, sink)
        _active.users += 1
        _flush_all()
        start = 0 if _active.sink is None else os.fstat(_active.sink.fileno()).st_size
        return _active, start


def _leave(redirect: _Redirect | None, start: int) -> str:
    global _active
    if redirect is None:
        return ""
    with _lock:
        _flush_all()
        text = ""
        if redirect.sink is not None:
            text = _read_from(redirect.sink.fileno(), start).decode("utf-8", errors="replace")
        redirect.users -= 1
        if redirect.users == 0:
            os.dup2(redirect.saved_stdout_fd, STDOUT_FD)
            os.close(redirect.saved_stdout_fd)
            if redirect.sink is not None:
                redirect.sink.close()
            _active = None
        return text


def _read_from(fd: int, start: int) -> bytes:
    """The bytes of the file ``fd`` from offset ``start`` to its end.  ``pread`` leaves the file offset alone:
    that offset is shared with descriptor 1, which other threads may be writing through."""
    end = os.fstat(fd).st_size
    chunks, offset = [], start
    while offset < end:
        if hasattr(os, "pread"):
            chunk = os.pread(fd, end - offset, offset)
        else:  # no pread (Windows): seek and read; a concurrent write may make this read short
            os.lseek(fd, offset, os.SEEK_SET)
            chunk = os.read(fd, end - offset)
        if not chunk:
            break
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def _flush_all() -> None:
    """Flush Python's stdout and every C stdio stream, so buffered text lands where descriptor 1 points now."""
    try:
        sys.stdout.flush()
    except (AttributeError, OSError, ValueError):  # no stdout, or a closed one
        pass
    _C_FFLUSH(None)


def _c_fflush():
    """The C library's ``fflush`` (``fflush(NULL)`` flushes every open output stream), or a no-op where the
    library cannot be loaded."""
    try:
        library = ctypes.CDLL(None) if os.name != "nt" else ctypes.cdll.msvcrt
        fflush = library.fflush
    except (OSError, AttributeError):
        return lambda stream: 0
    fflush.argtypes = [ctypes.c_void_p]
    return fflush


_C_FFLUSH = _c_fflush()
