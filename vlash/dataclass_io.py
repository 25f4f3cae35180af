"""Build a dataclass from an untrusted mapping (a JSON manifest, a YAML profile) with one clear error, and read
the one comment per field that documents it (`field_comments`: the help of the flags vlash.cli.flags makes from a
config).

Unknown keys, missing required fields and constructor type errors all become `error(...)` naming the
source, so every file format vlash reads fails the same way.
"""

from __future__ import annotations

import ast
import inspect
import io
import re
import textwrap
import tokenize
from dataclasses import MISSING, fields
from functools import cache
from typing import Any, TypeVar

T = TypeVar("T")


def dataclass_from_mapping(cls: type[T], doc: Any, source: str, what: str, error: type[Exception]) -> T:
    """`cls(**doc)` after checking that doc is a mapping with only known keys and every required field."""
    if not isinstance(doc, dict):
        raise error(f"{source}: {what} must be a mapping, got {type(doc).__name__}")
    known = {f.name for f in fields(cls)}
    unknown = sorted(str(k) for k in set(doc) - known)
    if unknown:
        raise error(f"{source}: unknown {what} keys {unknown}; known: {sorted(known)}")
    required = {f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING}
    missing = sorted(required - set(doc))
    if missing:
        raise error(f"{source}: {what} is missing {missing}")
    try:
        return cls(**doc)
    except TypeError as exc:
        raise error(f"{source}: {exc}") from exc


@cache
def field_comments(cls: type) -> dict[str, str]:
    """Each field's `# comment` in `cls`'s source (the house style: one per field), as one line of text: the
    comment block right above the field and the comment at the end of its line, joined. Section headers (`# ---`)
    and lint pragmas (`# fmt: skip`, `# noqa`) are left out; a field without a comment is absent, and so is every
    field of a class whose source is not installed (only its .pyc)."""
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return {}
    lines = source.splitlines()
    comments = {
        token.start[0]: _comment_text(token.string)
        for token in tokenize.generate_tokens(io.StringIO(source).readline)
        if token.type == tokenize.COMMENT
    }
    found = {}
    for node in ast.parse(source).body[0].body:
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        above, line = [], node.lineno - 1
        while line in comments and lines[line - 1].lstrip().startswith("#"):
            above.insert(0, comments[line])
            line -= 1
        trailing = [comments[n] for n in range(node.lineno, node.end_lineno + 1) if n in comments]
        text = " ".join(part for part in (*above, *trailing) if part)
        if text:
            found[node.target.id] = text
    return found


PRAGMA = r"(fmt: ?\w+|noqa\b.*|type: ?ignore.*)"  # a comment for a tool, not a reader


def _comment_text(comment: str) -> str:
    """The text of one `# comment` token, without a trailing pragma; "" for a section header or a pragma alone."""
    text = re.sub(rf"\s*#\s*{PRAGMA}$", "", comment).lstrip("#").strip()
    return "" if text.startswith("---") or re.fullmatch(PRAGMA, text) else text
