"""Collection of the docstring examples (``--doctest-modules`` over ``src/tightdp``): a module
whose optional dependency is not installed has its examples skipped rather than failing to
import (the extras that provide them are listed in pyproject.toml)."""

from __future__ import annotations

import importlib.util

#: module file -> the optional package its import or its examples need
_OPTIONAL = {
    "src/tightdp/integrations/opacus.py": "opacus",
    "src/tightdp/integrations/dp_accounting.py": "dp_accounting",
    "src/tightdp/integrations/jax_privacy.py": "jax_privacy",
}

collect_ignore = [path for path, package in _OPTIONAL.items()
                  if importlib.util.find_spec(package) is None]
