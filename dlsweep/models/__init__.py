"""Model families: each a module of this package that defines its `FAMILY` (`models.family.Family`:
the model behind the contract of `dlsweep.model`, its `[task]` schema, data, targets, baseline
and theory hook). `FAMILIES` is every such module's family, found by name, so adding a family is
adding its module; a model from the user's own file gets its family from `models.user`.
"""

from __future__ import annotations

import importlib
import pkgutil

from dlsweep.models.family import Family


def _families() -> dict[str, Family]:
    """The FAMILY of every module of this package that defines one, by name."""
    found = {}
    for module in pkgutil.iter_modules(__path__):
        family = getattr(importlib.import_module(f"{__name__}.{module.name}"), "FAMILY", None)
        if isinstance(family, Family):
            found[family.name] = family
    return found


FAMILIES: dict[str, Family] = _families()
