"""Questions a robot driver asks on the terminal while it connects (LeRobot's calibration: `input()` prompts).

    with TerminalPrompts() as prompts:
        robot.connect()            # may call input("Press ENTER to use provided calibration file ...")
    prompts.unanswered             # True: it asked and standard input had no answer (closed, at its end, unreadable)

Without a terminal (systemd, nohup, `< /dev/null`) `input()` fails: EOFError at the end of input, OSError on
nohup's unreadable stdin, RuntimeError when there is no sys.stdin at all. Inside the block sys.stdin is watched, so a
failed read is known to be a question nobody answered (not some other EOFError or OSError of the driver), and a
missing sys.stdin reads as the end of input. sys.stdout is watched too: `input()` writes its prompt without a
newline when no terminal echoes the answer's, so the block ends that line; what is printed next (the status line,
an error) starts a line of its own. On a terminal (stdin and stdout both ttys) `input()` reads and echoes through the
terminal itself, as without the block.
"""

from __future__ import annotations

import sys
from typing import Any, TextIO


class _WatchedStdin:
    """sys.stdin, noting a read that got no answer (end of input, an unreadable stream, no stream)."""

    def __init__(self, stream: TextIO | None) -> None:
        self.stream, self.unanswered = stream, False

    def readline(self, *args: Any) -> str:
        if self.stream is None:  # no standard input at all (`<&-`): input() would raise RuntimeError
            self.unanswered = True
            raise EOFError("no standard input")
        try:
            line = self.stream.readline(*args)
        except OSError:  # nohup's stdin: a file opened for writing only
            self.unanswered = True
            raise
        self.unanswered = self.unanswered or not line
        return line

    def __getattr__(self, name: str) -> Any:
        if self.stream is None:
            raise AttributeError(name)
        return getattr(self.stream, name)


class _WatchedStdout:
    """sys.stdout, remembering whether the last thing written ended its line."""

    def __init__(self, stream: TextIO) -> None:
        self.stream, self.line_open = stream, False

    def write(self, text: str) -> int:
        if text:
            self.line_open = not text.endswith("\n")
        return self.stream.write(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


class TerminalPrompts:
    """Watches sys.stdin and sys.stdout for the length of a block (see the module doc); both are put back after it,
    and a prompt left without its newline gets one."""

    def __init__(self) -> None:
        self.unanswered = False
        self._stdin: _WatchedStdin | None = None
        self._stdout: _WatchedStdout | None = None

    def __enter__(self) -> TerminalPrompts:
        self._stdin, self._stdout = _WatchedStdin(sys.stdin), _WatchedStdout(sys.stdout)
        sys.stdin, sys.stdout = self._stdin, self._stdout  # type: ignore[assignment]
        return self

    def __exit__(self, *exc: object) -> None:
        stdin, stdout = self._stdin, self._stdout
        if sys.stdin is stdin:
            sys.stdin = stdin.stream  # type: ignore[assignment]
        if sys.stdout is stdout:
            sys.stdout = stdout.stream
        self.unanswered = stdin.unanswered
        if stdout.line_open:  # a prompt nobody's Enter ended: what comes next starts its own line
            stdout.stream.write("\n")
            stdout.stream.flush()
