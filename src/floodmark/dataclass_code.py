"""The compiled code of the methods ``@dataclass`` writes, kept between floodmark processes.

A broker, a controller or a CLI command spends most of its start-up CPU importing modules, and
about a third of that compiling source text: ``dataclasses`` writes every ``__init__``,
``__repr__``, ``__eq__``, ``__hash__`` and frozen ``__setattr__`` as a string and compiles it
with ``exec`` (a broker creates some 170 dataclasses, about 930 methods: 0.1 s of CPU at
each start), and Python's bytecode cache does not cover code made that way. The test suite
starts hundreds of such processes. So a floodmark process (``floodmark/__init__.py``) installs
this: ``dataclasses``' ``exec`` compiles each text once and keeps its code object, keyed by the
text itself, in a file beside floodmark's bytecode (``__pycache__/``); the next process loads
the code objects instead of compiling.

The code a text compiles to depends on nothing but the text, the interpreter (the file names
its magic number and is ignored under another) and the compiler's flags (none: the text is
compiled as ``dataclasses`` itself would, inheriting no ``__future__`` import), so a loaded
code object is the one ``exec`` would have compiled. A process adds what it compiled to the
file when it exits normally (``atexit``), merged with what others added meanwhile, written to
a temporary file and renamed into place; it writes nothing where Python writes no bytecode
(``PYTHONDONTWRITEBYTECODE``, a read-only install). Any failure to read or write the file only
means compiling as before.
"""

from __future__ import annotations

import atexit
import dataclasses
import importlib.util
import marshal
import os
import sys
from pathlib import Path
from types import CodeType
from typing import Any

MAGIC = importlib.util.MAGIC_NUMBER
MAX_ENTRIES = 20_000  # beyond this (texts of sources long gone), the file starts over
_FORMAT = 1


def cache_path() -> Path:
    """Where the code objects are kept: beside this module's bytecode (``__pycache__`` of the
    package, or under ``sys.pycache_prefix``)."""
    pyc = Path(importlib.util.cache_from_source(__file__))
    return pyc.with_name(f"dataclass_code.{sys.implementation.cache_tag}.marshal")


def _load(path: Path) -> dict[str, CodeType]:
    try:
        data = path.read_bytes()
    except OSError:
        return {}
    if data[:len(MAGIC)] != MAGIC:
        return {}
    try:
        version, table = marshal.loads(data[len(MAGIC):])
    except (EOFError, ValueError, TypeError):
        return {}
    if version != _FORMAT or not isinstance(table, dict):
        return {}
    return table


def _save(path: Path, new: dict[str, CodeType]) -> None:
    table = _load(path)
    if len(table) + len(new) > MAX_ENTRIES:
        table = {}
    table.update(new)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(MAGIC + marshal.dumps((_FORMAT, table)))
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)


class CodeCache:
    """``dataclasses``' ``exec``: the code of a text seen before is loaded, not compiled."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.known = _load(path)
        self.new: dict[str, CodeType] = {}

    def __call__(self, source: Any, globals_: dict[str, Any] | None = None,
                 locals_: dict[str, Any] | None = None, /) -> None:
        if not isinstance(source, str):
            exec(source, globals_, locals_)  # what dataclasses would run
            return
        code = self.known.get(source)
        if code is None:
            # as dataclasses' own exec(text) compiles it: no __future__ flags of this module
            code = compile(source, "<string>", "exec", dont_inherit=True)
            self.known[source] = code
            self.new[source] = code
        exec(code, globals_, locals_)  # the code dataclasses wrote

    def save(self) -> None:
        if self.new and not sys.dont_write_bytecode:
            _save(self.path, self.new)
            self.new = {}


def install(path: Path | None = None) -> CodeCache:
    """From now on, ``@dataclass`` in this process compiles each method text once across
    processes (see the module's docstring); ``path``: the file (default ``cache_path()``).
    Idempotent: a second call returns the cache in place."""
    installed = vars(dataclasses).get("exec")
    if isinstance(installed, CodeCache):
        return installed
    cache = CodeCache(cache_path() if path is None else path)
    dataclasses.exec = cache  # type: ignore[attr-defined]
    atexit.register(cache.save)
    return cache


if __name__ == "__main__":  # python -m floodmark.dataclass_code: the file, and is it in use here?
    _installed = type(vars(dataclasses).get("exec")).__name__ == CodeCache.__name__
    print(f"{cache_path()}: {len(_load(cache_path()))} code objects; "
          f"installed in this process: {'yes' if _installed else 'no'}")
