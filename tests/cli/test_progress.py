"""Progress of long jobs where stdout/stderr is no terminal (a log, CI, nohup): plain lines, on a simulated clock."""

from __future__ import annotations

import io

from vlash.progress import ProgressLines, clock_text, progress
from vlash.train.progress import progress_bar


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_line_every_tenth_of_the_work_or_every_interval_with_elapsed_and_eta():
    clock, lines = FakeClock(), []
    report = ProgressLines("training", 1000, lines.append, every_s=30.0, clock=clock)
    clock.now += 5
    report.update(50, "loss 0.5")  # 5%, 5 s: nothing yet
    assert lines == []
    clock.now += 5
    report.update(100, "loss 0.4")  # 10%: a line
    assert lines == ["training 100/1000 (10%) elapsed 0:10 eta 1:30 loss 0.4"]
    clock.now += 31
    report.update(120)  # under the next tenth, but 31 s since the last line
    assert lines[-1] == "training 120/1000 (12%) elapsed 0:41 eta 5:01"
    clock.now += 1
    report.update(130)
    assert len(lines) == 2
    clock.now += 60
    report.update(1000, "loss 0.1")  # the end is always reported, once
    report.update(1000)
    assert lines[-1] == "training 1000/1000 (100%) elapsed 1:42 loss 0.1" and len(lines) == 3


def test_fractions_of_one_read_as_percentages():
    clock, lines = FakeClock(), []
    report = ProgressLines("vlash export:", 1.0, lines.append, counted=False, clock=clock)
    clock.now += 2
    report.update(0.5, "prefill graph")
    assert lines == ["vlash export: (50%) elapsed 0:02 eta 0:02 prefill graph"]


def test_clock_text():
    assert [clock_text(s) for s in (0, 42.4, 726, 3723)] == ["0:00", "0:42", "12:06", "1:02:03"]


def test_a_stream_that_is_not_a_terminal_gets_lines():
    stream = io.StringIO()
    with progress("vlash eval: reach episodes", 4, stream=stream) as update:
        for done in range(1, 5):
            update(done)
    text = stream.getvalue()
    assert "vlash eval: reach episodes 4/4 (100%)" in text and "\x1b[" not in text  # no terminal control codes


def test_training_reports_in_a_log(capsys):
    """The trainer's rich bars printed nothing while running when stderr was not a terminal."""
    with progress_bar("training", total=3) as advance:
        advance(1, "loss 0.3")
        assert "training 1/3 (33%)" in capsys.readouterr().err  # while it runs, not only at the end
        advance(2, "loss 0.2")
    assert "training 3/3 (100%)" in capsys.readouterr().err
    with progress_bar("training", total=3, enabled=False) as advance:
        advance(3, "")
    assert capsys.readouterr().err == ""
