"""Stdout belongs to optfleet: whatever a solver prints at the file-descriptor level stays off it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import pytest

from optfleet.solvers.console import solver_console

import forked
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
def test_every_json_command_prints_exactly_one_json_document(argv):
    """Each command in a fresh process (forked.py: forked from a server that has done the imports and made no Highs)."""
    finished = forked.run(list(argv), REPO)
    assert finished.returncode == 0, finished.stderr
    json.loads(finished.stdout)  # the whole of stdout, nothing before or after


def test_text_output_starts_with_optfleet_own_header():
    finished = _run("gap", FLEET, "--methods", "milp,sweep")
    assert finished.returncode == 0, finished.stderr
    assert finished.stdout.startswith("instance toy:")
