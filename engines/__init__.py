"""Inference backends behind one interface (`vlash.engines.base.Engine`), registered by name.

Heavy backend imports happen inside each backend module; `create_engine` names the extra to install
when one is missing.
"""

from vlash.engines.base import Engine, available_engines, create_engine, register_engine

__all__ = ["Engine", "available_engines", "create_engine", "register_engine"]
