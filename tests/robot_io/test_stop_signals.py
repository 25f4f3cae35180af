"""Stop signals are handled only inside the block and the handlers found before it come back however it ends;
the first signal asks for a stop, a second one interrupts."""

from __future__ import annotations

import os
import signal

import pytest

from robot_io.stop_signals import STOP_SIGNALS, StopRequest, handle_stop_signals


def handlers() -> dict[int, object]:
    return {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}


def test_the_handlers_found_before_come_back_even_when_the_block_raises():
    before = handlers()
    with pytest.raises(RuntimeError), handle_stop_signals(lambda signum: None):
        assert handlers() != before
        raise RuntimeError("the run failed")
    assert handlers() == before


def test_the_first_signal_asks_for_a_stop_and_a_second_interrupts():
    before = handlers()  # pytest's; SIG_IGN for SIGINT when the suite was started in the background (`cmd &`)
    stop = StopRequest()
    assert stop.name == "" and stop.exit_code == 0 and not stop.event.is_set()
    with handle_stop_signals(stop):
        os.kill(os.getpid(), signal.SIGTERM)  # delivered to this (main) thread before kill returns to Python code
        assert stop.event.is_set() and stop.name == "SIGTERM" and stop.exit_code == 143
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
    assert handlers() == before  # back


def test_ctrl_c_is_named_and_exits_130():
    stop = StopRequest()
    stop(signal.SIGINT)
    assert stop.name == "SIGINT (Ctrl-C)" and stop.exit_code == 130
