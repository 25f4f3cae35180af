"""Checks a command runs on its arguments before it loads anything heavy: a model load takes 10-30 s, and an
error found after it (a port in use, an output path blocked by a file) wastes that time. Each raises a
one-line ConfigError naming the flag.

Output directories follow one rule in every command (`check_output_dir`): nothing a user owns is deleted. A missing
or empty one is written; one holding the kind of vlash output the command writes, and nothing but the files its
vlash_files.json lists (vlash.atomic), is replaced only with `--overwrite`; anything else (the user's files, even
one among vlash's, another kind of output, an output of an older vlash that listed no files) is refused even with
it."""

from __future__ import annotations

import argparse
import os
import socket
from dataclasses import dataclass
from pathlib import Path

from vlash.atomic import check_replaceable
from vlash.cli.flags import ConfigFlags
from vlash.errors import ConfigError
from vlash.output_kinds import OutputKind, output_kind


class BadValue(argparse.ArgumentTypeError, ValueError):
    """A flag's value its parse refuses: argparse (the tools) and tyro (the commands) both say its text."""


def _int_at_least(text: str, low: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise BadValue(f"expected an integer >= {low}, got {text!r}") from None
    if value < low:
        raise BadValue(f"expected an integer >= {low}, got {value}")
    return value


def positive_int(text: str) -> int:
    """A flag's parse (tyro's "parse" metadata, or an argparse type): an int >= 1."""
    return _int_at_least(text, 1)


def non_negative_int(text: str) -> int:
    """A flag's parse (tyro's "parse" metadata, or an argparse type): an int >= 0."""
    return _int_at_least(text, 0)


def check_output_file(path: Path | None, flag: str) -> None:
    """A file the command writes at its end (its folders are created then): it must not be a directory, and the
    folders must be creatable now (no file in their way, the nearest existing one writable)."""
    if path is None:
        return
    if path.is_dir():
        raise ConfigError(f"{flag} {str(path)!r} is a directory; give a file name")
    _check_creatable(path.parent, path, flag)


def check_output_dir(path: Path, flag: str, kind: OutputKind, overwrite: bool) -> None:
    """A directory the command writes whole (replaced atomically at its end): missing or empty, or with
    `overwrite` a vlash output of the `kind` the command writes that holds only the files vlash listed there
    (`check_replaceable`); anything else is the user's and is refused. Not a file; its parent creatable now."""
    check_output_folder(path, flag)
    if not path.is_dir() or not any(path.iterdir()):
        return
    found = output_kind(path)
    if found is None:
        raise ConfigError(
            f"{flag} {str(path)!r} holds files vlash did not write ({_listing(path)}); they are never replaced, "
            f"even with --overwrite: give a new or empty {flag}"
        )
    if found is not kind:
        raise ConfigError(
            f"{flag} {str(path)!r} holds {found.value}, not {kind.value}; it is not replaced, even with "
            f"--overwrite: give a new or empty {flag}"
        )
    check_replaceable(path, flag)
    if not overwrite:
        raise ConfigError(f"{flag} {str(path)!r} already holds {kind.value}; pass --overwrite to replace it")


def check_output_folder(path: Path, flag: str) -> None:
    """A folder the command creates or writes into: not a file, its parent creatable now."""
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{flag} {str(path)!r} is a file, not a directory")
    _check_creatable(path.absolute().parent, path, flag)


def _listing(path: Path, shown: int = 3) -> str:
    """E.g. "notes.txt, data/ and 4 more": the first few entries of a directory."""
    names = sorted(f"{p.name}/" if p.is_dir() else p.name for p in path.iterdir())
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return ", ".join(names[:shown]) + more


def _check_creatable(folder: Path, target: Path, flag: str) -> None:
    existing = folder.absolute()
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise ConfigError(f"{flag} {str(target)!r}: {str(existing)!r} is a file, not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(f"{flag} {str(target)!r}: folder {str(existing)!r} is not writable")


@dataclass(frozen=True)
class OverwriteOption:
    """Replacing an output."""

    overwrite: bool = False  # (its help: `overwrite_flags`)


def overwrite_flags(*kinds: OutputKind, where: str = "--out", title: str = "output") -> ConfigFlags:
    """--overwrite: replace an output directory that holds the kind of output the command writes there
    (`check_output_dir`)."""
    text = (f"replace {where} when it holds {' or '.join(k.value for k in kinds)} and nothing else (only the files "
            "vlash listed there are ever replaced)")  # fmt: skip
    return ConfigFlags(OverwriteOption, "overwrite", title=title, help={"overwrite": text})


def check_zmq_bind(endpoint: str, flag: str = "--bind") -> None:
    """Bind a tcp:// endpoint's address once and let it go, as the server will: a port in use or an address that
    is not this machine's fails now, not after the model loaded. Port 0 (a free one) and endpoints that name an
    interface (eth0) rather than an address are left to ZeroMQ."""
    from vlash.server.config import TCP_ENDPOINT  # extra: server; the server's own reading of an endpoint

    match = TCP_ENDPOINT.fullmatch(endpoint)
    if match is None or match["port"] == "*" or int(match["port"]) == 0:
        return
    host = match["host"].strip("[]")
    host = "0.0.0.0" if host == "*" else host
    _probe(host, int(match["port"]), f"{flag} {endpoint}", unresolved_ok=True)


def check_tcp_port(host: str, port: int, flag: str) -> None:
    """Bind (host, port) once and let it go (port 0 picks a free one later, nothing to check)."""
    if port != 0:
        _probe(host, port, f"{flag} {port} on {host}", unresolved_ok=False)


def _probe(host: str, port: int, what: str, unresolved_ok: bool) -> None:
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        if unresolved_ok:
            return
        raise ConfigError(f"{what}: cannot resolve {host!r} ({exc.strerror})") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:  # closed at once: the port is free again for the server
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as servers do: TIME_WAIT is not "in use"
        try:
            probe.bind(address)
        except OSError as exc:
            raise ConfigError(f"{what}: cannot listen there ({exc.strerror}); is another server using it?") from None
