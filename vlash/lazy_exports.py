"""Package attributes imported on first use (PEP 562), so that a package's light names (configs, names, limits)
import without torch: the command line checks its arguments with them before anything heavy loads."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any


def lazy_exports(package: str, exports: dict[str, str]) -> Callable[[str], Any]:
    """A module-level `__getattr__` for `package`: `exports` maps a name to the module that defines it (a name
    starting with "." is a submodule of `package`), imported when the name is first asked for and then kept on the
    package."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
