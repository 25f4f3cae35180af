"""Inference backends behind one interface (`vlash.engines.base.Engine`), registered by name.

Heavy backend imports happen inside each backend module; `create_engine` names the extra to install
when one is missing. The engine names import without torch; the interface imports it on first use.
"""

from vlash.engines.registry import available_engines
from vlash.lazy_exports import lazy_exports

__all__ = ["Engine", "available_engines", "create_engine", "register_engine"]
__getattr__ = lazy_exports(__name__, dict.fromkeys(("Engine", "create_engine", "register_engine"), ".base"))
