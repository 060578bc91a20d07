"""The progress display's time left comes from measured progress (optfleet/progress.py), checked with a fake clock."""

from __future__ import annotations

import io

import pytest

from optfleet.progress import TimeLeft, progress_display

pytestmark = pytest.mark.unit


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now_s = 0.0

    def __call__(self) -> float:
        return self.now_s


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_four_quick_methods_then_a_long_one_without_steps_give_no_estimate():
    """The issue's case: a gap whose heuristics finish in 0.2 s and whose MILP then runs for 9 s said "about 1 s left"
    at 2 s; the MILP reports no steps, so after it has outrun the finished parts nothing is estimated."""
    left = TimeLeft(0.0)
    for method in range(4):
        left.update(method, 5, 0.05 * method)
    left.update(4, 5, 0.2)
    assert left.seconds_left(0.25) == pytest.approx(0.0)  # within the mean part cost: nothing is known to be slow yet
    assert left.seconds_left(2.0) is None
    assert left.seconds_left(8.0) is None


def test_a_part_that_reports_its_own_steps_is_extrapolated_from_them():
    left = TimeLeft(0.0)
    left.update(0, 2, 0.0)
    left.update(0.25, 2, 3.0)  # a quarter of the first part after 3 s: 12 s per part
    # the second part is not measured yet (a MILP's tables then quick baselines are unlike): no estimate of the run
    assert left.seconds_left(3.0) is None
    one = TimeLeft(0.0)
    one.update(0.25, 1, 3.0)  # a run of one part: its own steps are the whole estimate
    assert one.seconds_left(3.0) == pytest.approx(9.0)
    left.update(1.0, 2, 12.0)  # the first part took 12 s; the second one starts
    assert left.seconds_left(12.0) == pytest.approx(12.0)
    assert left.seconds_left(20.0) == pytest.approx(4.0)
    assert left.seconds_left(30.0) == pytest.approx(0.0)  # slower than the first, but not yet twice as slow
    assert left.seconds_left(37.0) is None  # past twice the measured part cost without a step of its own


def test_like_units_use_their_mean_measured_cost():
    left = TimeLeft(0.0)
    for done in range(1, 11):
        left.update(done, 100, 2.0 * done)  # a scenario every 2 s
    assert left.mean_part_s == pytest.approx(2.0)
    assert left.seconds_left(20.5) == pytest.approx(1.5 + 89 * 2.0)


def test_nothing_is_estimated_before_the_first_measurement():
    left = TimeLeft(0.0)
    left.update(0, 3, 0.0)
    assert left.seconds_left(5.0) is None
    left.update(0.001, 3, 5.0)  # a step too small to extrapolate from
    assert left.seconds_left(5.0) is None


def test_the_display_line_says_the_time_left_only_when_measured():
    clock = Clock()
    stream = Terminal()
    display = progress_display("gap", stream=stream, delay_s=0.0, clock=clock)
    for method in range(4):
        clock.now_s = 0.05 * method
        display(f"gap m{method}", method, 5)
    clock.now_s = 0.2
    display("gap milp", 4, 5)
    clock.now_s = 2.0
    line = display.line()
    assert line == "gap: 80 % after 2 s; gap milp"
    clock.now_s = 9.0
    display("gap done", 5, 5)
    assert stream.getvalue().rstrip().endswith("gap: 100 % after 9 s; gap done")


def test_the_display_line_of_like_units_shows_the_measured_time_left():
    clock = Clock()
    display = progress_display("sweep", stream=Terminal(), delay_s=0.0, unit="scenarios", clock=clock)
    for done in range(0, 31):
        clock.now_s = 0.8 * done
        display(f"{done} done", done, 100)
    assert display.line() == "sweep: [######--------------] 30 % 30/100 scenarios, 1.2/s, after 24 s, about 56 s left; 30 done"


def test_a_running_line_is_cut_to_the_terminals_width(monkeypatch: pytest.MonkeyPatch):
    """A line wider than the terminal wraps, and each redraw would then leave a row behind: it is cut, with an
    ellipsis; the final line (printed once, with its newline) is whole."""
    import os
    monkeypatch.setattr("shutil.get_terminal_size", lambda fallback=(120, 24): os.terminal_size((40, 24)))
    clock, out = Clock(), Terminal()
    display = progress_display("solve", stream=out, delay_s=0.0, clock=clock)
    label = "model 1 of at most 6: tables of w64, w128, w256 and 15 more"
    display(label, 0.5, 1)
    display._draw(final=False)
    drawn = out.getvalue().rsplit("\r\x1b[K", 1)[-1]
    assert len(drawn) == 39 and drawn.endswith("…") and drawn.startswith("solve: 50 %")
    display(label, 1, 1)
    assert out.getvalue().rstrip("\n").endswith(label)
