"""Package faces (issue 25 §4, ``floodmark.faces``): every package's ``__init__.py`` states its
public names in ``__all__``; each name resolves, to the object its module defines; a lazily
loaded name is not loaded before it is used; no face name is also the name of one of its
package's modules (unless it is that module), which the import system would rebind. Other
packages import only faces: import-linter's ``protected`` contracts (test_layers.py)."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import subprocess
import sys
import types
from pathlib import Path

import pytest

import floodmark
from floodmark.faces import face

PACKAGES = sorted(m.name for m in pkgutil.iter_modules(floodmark.__path__) if m.ispkg)


def _init(package: str) -> Path:
    return Path(floodmark.__file__).parent / package / "__init__.py"


def test_every_package_has_a_face() -> None:
    assert len(PACKAGES) > 10
    for package in PACKAGES:
        module = importlib.import_module(f"floodmark.{package}")
        assert isinstance(getattr(module, "__all__", None), list), package
        assert ast.get_docstring(ast.parse(_init(package).read_text())), package


@pytest.mark.parametrize("package", PACKAGES)
def test_every_face_name_resolves_to_its_definition(package: str) -> None:
    module = importlib.import_module(f"floodmark.{package}")
    submodules = {m.name for m in pkgutil.iter_modules(module.__path__)}
    # a name the face imports up front is bound after its module loads (``floodmark.cli.main``
    # the function, from the module of that name): the import system cannot rebind it later
    eager = {alias.asname or alias.name
             for node in ast.parse(_init(package).read_text()).body
             if isinstance(node, ast.ImportFrom) for alias in node.names}
    for name in module.__all__:
        value = getattr(module, name)
        if isinstance(value, types.ModuleType):
            assert value.__name__.startswith(f"floodmark.{package}."), (package, name)
            continue
        assert name not in submodules or name in eager, \
            f"floodmark.{package}.{name} names a module and a value"
        home = getattr(value, "__module__", None)
        if isinstance(home, str) and home.startswith(f"floodmark.{package}."):
            assert getattr(sys.modules[home], getattr(value, "__name__", name), value) is value


def test_a_lazy_name_is_loaded_on_first_use_only() -> None:
    """``import floodmark.replication`` loads none of the replication core; asking for
    ``Partition`` loads its module. In a fresh interpreter: this one has loaded everything."""
    code = ("import sys, floodmark.replication as r\n"
            "assert 'floodmark.replication.partition' not in sys.modules\n"
            "p = r.Partition\n"
            "assert 'floodmark.replication.partition' in sys.modules\n"
            "assert p.__name__ == 'Partition' and r.__dict__['Partition'] is p\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]


def test_an_unknown_name_is_an_attribute_error(tmp_path: Path) -> None:
    init = tmp_path / "__init__.py"
    init.write_text("from typing import TYPE_CHECKING\n"
                    "if TYPE_CHECKING:\n"
                    "    from json.decoder import JSONDecoder\n"
                    "    from json import decoder\n")
    package = types.ModuleType("fake_face_pkg")
    sys.modules["fake_face_pkg"] = package
    try:
        getter = face("fake_face_pkg", str(init))
        import json.decoder

        assert getter("JSONDecoder") is json.decoder.JSONDecoder
        assert getter("decoder") is json.decoder
        assert package.JSONDecoder is json.decoder.JSONDecoder  # kept: no second lookup
        with pytest.raises(AttributeError, match="no attribute 'Missing'"):
            getter("Missing")
    finally:
        del sys.modules["fake_face_pkg"]
