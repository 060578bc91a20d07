"""Stdout belongs to optfleet: whatever a solver prints at the file-descriptor level stays off it."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import threading

import pytest

from optfleet.solvers.console import solver_console

from support import REPO

pytestmark = pytest.mark.solved

CLI = [sys.executable, "-m", "optfleet"]


CAPTURE_SCRIPT = """
import ctypes, os
from optfleet.solvers.console import solver_console
print("before")
with solver_console() as console:
    os.write(1, b"raw descriptor write\\n")
    ctypes.CDLL(None).printf(b"buffered C stdio write\\n")  # held in the C library's buffer: stdout is a pipe
    print("python print inside")
print("after")
print(repr(console.text))
"""


def test_descriptor_level_c_stdio_and_python_output_is_captured_not_printed():
    finished = subprocess.run([sys.executable, "-c", CAPTURE_SCRIPT], capture_output=True, text=True, timeout=60, check=True)
    assert finished.stdout.splitlines() == [
        "before", "after", repr("raw descriptor write\nbuffered C stdio write\npython print inside\n"),
    ]


def test_to_stderr_sends_console_output_to_stderr(capfd):
    with solver_console(to_stderr=True) as console:
        os.write(1, b"streamed log line\n")
    captured = capfd.readouterr()
    assert captured.out == "" and "streamed log line" in captured.err and console.text == ""


def test_nested_and_concurrent_sessions_restore_stdout(capfd):
    errors = []

    def worker(label: str) -> None:
        try:
            for _ in range(50):
                with solver_console():
                    with solver_console() as inner:
                        os.write(1, f"{label}\n".encode())
                    assert f"{label}\n" in inner.text
        except AssertionError as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(f"thread {i}",)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    print("stdout is back", flush=True)
    assert not errors
    assert capfd.readouterr().out == "stdout is back\n"


def _run(*argv: str) -> subprocess.CompletedProcess:
    """The CLI in a fresh process: the first ``highspy.Highs`` of a process is where HiGHS prints its banner."""
    return subprocess.run([*CLI, *argv], cwd=REPO, capture_output=True, text=True, timeout=300, check=False)


# A process that has imported what every command needs and never made a ``highspy.Highs``, and forks one child per
# command: each child is a fresh process as far as HiGHS and stdout go (no Highs yet, its own descriptors 1 and 2, on
# files), runs ``optfleet.cli.main`` as ``python -m optfleet`` does and exits with its code.  The interpreter's start
# and the imports (1 to 1.5 s of each ``python -m optfleet`` of these tests here, the commands themselves 0.03 to
# 0.2 s) are paid once per test process.  Whatever the imports print reaches the server's own stdout, which must
# hold nothing but its answers (``_Forked.close``).  test_text_output_starts_with_optfleet_own_header and the
# capture test above still start a process of their own.
FORK_SERVER = """
import importlib, importlib.util, json, os, sys, traceback
import highspy, pyomo.environ  # imported only: the banner comes with the first Highs, made in a child
from optfleet.cli import main
from optfleet.registry import KINDS, kind

# what the commands import (scipy.stats and pandas most of it), so that no child imports it again
for module in ("optfleet.cli.commands", "optfleet.api", "optfleet.engine.sources", "optfleet.problems.fleet.heuristics", "pandas", "scipy.stats"):
    importlib.import_module(module)
for name in KINDS:
    kind(name)
ENTRY = importlib.util.find_spec("optfleet.__main__").origin  # argv[0] under python -m optfleet

for line in sys.stdin:
    argv, out, err = json.loads(line)
    sys.stdout.flush()
    pid = os.fork()
    if pid == 0:
        os.dup2(os.open(out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), 1)
        os.dup2(os.open(err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), 2)
        sys.argv = [ENTRY, *argv]
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:
            traceback.print_exc()
            code = 1
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    print(json.dumps(os.waitstatus_to_exitcode(status)), flush=True)
"""


class _Forked:
    """The fork server of :data:`FORK_SERVER`, started in ``REPO``."""

    def __init__(self, folder) -> None:
        self.folder = folder
        self.count = 0
        self.server = subprocess.Popen([sys.executable, "-c", FORK_SERVER], cwd=REPO, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, text=True)

    def run(self, *argv: str) -> subprocess.CompletedProcess:
        """``python -m optfleet *argv`` as a child of the server: its exit code, stdout and stderr."""
        self.count += 1
        out, err = self.folder / f"{self.count}.out", self.folder / f"{self.count}.err"
        self.server.stdin.write(json.dumps([list(argv), str(out), str(err)]) + "\n")
        self.server.stdin.flush()
        ready, _, _ = select.select([self.server.stdout], [], [], 300)
        assert ready, f"no answer within 300 s: {argv}"
        answer = self.server.stdout.readline()
        assert answer, f"the fork server ended: {self.server.stderr.read()}"
        return subprocess.CompletedProcess([*CLI, *argv], json.loads(answer), out.read_text(), err.read_text())

    def close(self) -> None:
        rest, errors = self.server.communicate(timeout=60)
        assert self.server.returncode == 0, errors
        assert rest == "", f"printed on stdout outside any command: {rest!r}"


@pytest.fixture(scope="module")
def forked(tmp_path_factory):
    server = _Forked(tmp_path_factory.mktemp("forked"))
    yield server
    server.close()


FLEET = "instances/fleet/toy.yaml"
PROFILED = "instances/profiled/melange_example.yaml"
CACHING = "instances/caching/tiny.yaml"


@pytest.mark.parametrize(
    "argv",
    [
        ("solve", FLEET, "--method", "milp", "--json"),
        ("gap", FLEET, "--json"),
        ("simulate", FLEET, "--method", "milp", "--requests", "2000", "--reps", "1", "--json"),
        ("validate", FLEET, "--json"),
        ("solve", PROFILED, "--json"),
        ("gap", PROFILED, "--json"),
        ("validate", PROFILED, "--json"),
        ("solve", CACHING, "--json"),
        ("gap", CACHING, "--json"),
        ("validate", CACHING, "--json"),
        ("catalog", "--json"),
    ],
    ids=lambda argv: " ".join(argv[:2]).replace("instances/", ""),
)
def test_every_json_command_prints_exactly_one_json_document(argv, forked):
    finished = forked.run(*argv)
    assert finished.returncode == 0, finished.stderr
    json.loads(finished.stdout)  # the whole of stdout, nothing before or after


def test_text_output_starts_with_optfleet_own_header():
    finished = _run("gap", FLEET, "--methods", "milp,sweep")
    assert finished.returncode == 0, finished.stderr
    assert finished.stdout.startswith("instance toy:")
