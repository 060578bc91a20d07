"""``python -m optfleet`` in a fresh process, without paying the interpreter's start and the imports each time.

One server process per test process imports what the commands need (scipy.stats and pandas most of it: 1 to 1.5 s
of each ``python -m optfleet`` here, the small commands themselves 0.03 to 0.2 s) and never makes a
``highspy.Highs``; each command runs in a child forked from it.  The child is a fresh process as far as the tests
look: no Highs yet (HiGHS prints its banner with a process's first one), its own descriptors (1 and 2 on files, 0
on /dev/null), its own working directory and, if asked, its own address-space limit; it runs ``optfleet.cli.main``
as ``python -m optfleet`` does and exits with its code (a crash or a kill ends it with the signal's negative code,
as a subprocess's ``returncode`` says).  Whatever the imports print reaches the server's stdout before its
``ready`` line, which :func:`run` checks, so output at import time still fails a test.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

SERVER = """
import importlib, importlib.util, json, os, resource, sys, traceback
import highspy, pyomo.environ  # imported only: the banner comes with the first Highs, made in a child
from optfleet.cli import main
from optfleet.registry import KINDS, kind

for module in ("optfleet.cli.commands", "optfleet.api", "optfleet.engine.sources", "optfleet.problems.fleet.heuristics", "pandas", "scipy.stats"):
    importlib.import_module(module)
for name in KINDS:
    kind(name)
ENTRY = importlib.util.find_spec("optfleet.__main__").origin  # argv[0] under python -m optfleet
print("ready", flush=True)

for line in sys.stdin:
    argv, cwd, out, err, memory_limit = json.loads(line)
    pid = os.fork()
    if pid == 0:
        try:
            os.chdir(cwd)
            os.dup2(os.open(os.devnull, os.O_RDONLY), 0)  # not the server's requests
            sys.stdin = open(0, closefd=False)
            os.dup2(os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), 1)
            os.dup2(os.open(err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), 2)
            if memory_limit is not None:
                resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))
            sys.argv = [ENTRY, *argv]
            code = main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:
            traceback.print_exc()
            code = 1
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)
    print(json.dumps(pid), flush=True)
    _, status = os.waitpid(pid, 0)
    print(json.dumps(os.waitstatus_to_exitcode(status)), flush=True)
"""


@dataclass(frozen=True)
class Finished:
    """A command's exit code (None: killed at its timeout), stdout and stderr."""

    returncode: int | None
    stdout: str
    stderr: str


class _Server:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.count = 0
        self.process = subprocess.Popen([sys.executable, "-c", SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        first = self._line(300)
        assert first == "ready\n", f"the fork server printed {first!r} before it was ready"

    def _line(self, timeout_s: float) -> str | None:
        ready, _, _ = select.select([self.process.stdout], [], [], timeout_s)
        if not ready:
            return None
        line = self.process.stdout.readline()
        assert line, f"the fork server ended (exit {self.process.wait()})"
        return line

    def run(self, argv: list[str], cwd: Path, timeout_s: float, memory_limit: int | None) -> Finished:
        self.count += 1
        out, err = self.folder / f"{self.count}.out", self.folder / f"{self.count}.err"
        self.process.stdin.write(json.dumps([argv, str(cwd), str(out), str(err), memory_limit]) + "\n")
        self.process.stdin.flush()
        pid = json.loads(self._line(60))
        answer = self._line(timeout_s)
        if answer is None:
            os.kill(pid, signal.SIGKILL)
            self._line(60)
        code = None if answer is None else json.loads(answer)
        return Finished(code, out.read_text(errors="replace"), err.read_text(errors="replace"))

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=60)
        shutil.rmtree(self.folder, ignore_errors=True)


_server: list[_Server] = []


def run(argv: list[str], cwd: Path, *, timeout_s: float = 300.0, memory_limit: int | None = None) -> Finished:
    """``python -m optfleet *argv`` run from ``cwd`` in a fresh (forked) process, killed after ``timeout_s``, its
    address space limited to ``memory_limit`` bytes if given."""
    if not _server:
        import tempfile

        _server.append(_Server(Path(tempfile.mkdtemp(prefix="optfleet-forked-"))))
        atexit.register(_server[0].close)
    return _server[0].run([str(a) for a in argv], cwd, timeout_s, memory_limit)
