"""A package's face: the names other packages may import from it (issue 25 §4).

Each package's ``__init__.py`` lists its public names once, as imports inside an
``if TYPE_CHECKING:`` block (what mypy reads) and in ``__all__``. At run time nothing is
imported up front: ``face`` reads that same block from the file and loads a name's module the
first time the name is asked for, so importing one small module of a package does not load the
whole package (a CLI command, a PySpark worker and a broker each load only what they use).
Import-linter's ``protected`` contracts (pyproject.toml) keep every other package on the face.
"""

from __future__ import annotations

import ast
import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _names(package: str, init_file: str) -> dict[str, tuple[str, str]]:
    """name -> (module, attribute; "" for a module exported as itself), from the
    ``if TYPE_CHECKING:`` imports of the package's ``__init__.py``."""
    tree = ast.parse(Path(init_file).read_text(encoding="utf-8"))
    out: dict[str, tuple[str, str]] = {}
    for node in tree.body:
        if not (isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"):
            continue
        for stmt in node.body:
            if not (isinstance(stmt, ast.ImportFrom) and stmt.module):
                continue
            for alias in stmt.names:
                out[alias.asname or alias.name] = (stmt.module, alias.name)
    return out


def face(package: str, init_file: str) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package``: loads a face name on first use and keeps it
    in the package's namespace (later lookups do not come here)."""
    table: dict[str, tuple[str, str]] | None = None

    def __getattr__(name: str) -> Any:
        nonlocal table
        if table is None:
            table = _names(package, init_file)
        where = table.get(name)
        if where is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, attribute = where
        namespace = vars(importlib.import_module(module)) if module != package else {}
        if attribute in namespace:
            value: Any = namespace[attribute]
        else:  # a submodule exported as itself (``from floodmark.sim import partition``)
            value = importlib.import_module(f"{module}.{attribute}")
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
