"""Lazy package attributes (PEP 562): a public name or a submodule is imported when first used.

``import interpretable_zoo`` then loads none of JAX, NumPyro, ArviZ, scikit-learn or pandas; each is
imported by the first attribute that needs it.
"""

import importlib
import importlib.util
import pkgutil
import sys
from collections.abc import Iterable, Mapping


def lazy_attributes(package: str, exports: Mapping[str, Iterable[str]]):
    """``__getattr__`` and ``__dir__`` for the module ``package``.

    ``exports`` maps a submodule (relative to ``package``, e.g. ``".bundled"``) to the public names it
    defines; every submodule of ``package`` (e.g. ``models.bcm``) is an attribute as well. A resolved
    attribute is stored in the package, so it is looked up only once.
    """
    module = sys.modules[package]
    source = {name: submodule for submodule, names in exports.items() for name in names}

    def __getattr__(name: str):
        if name in source:
            value = getattr(importlib.import_module(source[name], package), name)
        elif name.isidentifier() and not name.startswith("__") and importlib.util.find_spec(f"{package}.{name}"):
            value = importlib.import_module(f"{package}.{name}")
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        setattr(module, name, value)
        return value

    def __dir__() -> list[str]:
        submodules = (info.name for info in pkgutil.iter_modules(module.__path__))
        return sorted({*vars(module), *getattr(module, "__all__", ()), *source, *submodules})

    return __getattr__, __dir__
