"""The compiled code of the methods ``@dataclass`` writes, kept between floodmark processes.

A broker, a controller or a CLI command spends most of its start-up CPU importing modules, and
about a third of that compiling source text: ``dataclasses`` writes every ``__init__``,
``__repr__``, ``__eq__``, ``__hash__`` and frozen ``__setattr__`` as a string and compiles it
with ``exec`` (a broker creates some 170 dataclasses, about 930 methods: 0.1 s of CPU at
each start), and Python's bytecode cache does not cover code made that way. The test suite
starts hundreds of such processes. So a floodmark process (``floodmark/__init__.py``) installs
this: ``dataclasses``' ``exec`` compiles each text once and keeps its code object, keyed by the
text itself, in a file beside floodmark's bytecode (``__pycache__/``); the next process loads
the code objects instead of compiling. The file holds one table per module (the module whose
globals the text runs in), each marshalled apart behind an index, and is mapped into memory, so
a process reads and unpacks only the tables of the modules whose dataclasses it makes (a CLI
command does not pay for the broker's, nor for the file's size).

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
import mmap
import os
import struct
import sys
from pathlib import Path
from types import CodeType
from typing import Any

MAGIC = importlib.util.MAGIC_NUMBER
MAX_FILE_BYTES = 32 * 1024 * 1024  # beyond this (texts of sources long gone), start over
_FORMAT = 3
_INDEX_SIZE = struct.Struct(">Q")

Table = dict[str, CodeType]  # method text -> its code


def cache_path(user: str = "") -> Path:
    """Where the code objects are kept: beside this module's bytecode (``__pycache__`` of the
    package, or under ``sys.pycache_prefix``); ``user``: a file of its own for other programs
    (the test suite's processes), so floodmark's own stays small."""
    pyc = Path(importlib.util.cache_from_source(__file__))
    kind = f".{user}" if user else ""
    return pyc.with_name(f"dataclass_code{kind}.{sys.implementation.cache_tag}.marshal")


def _load(path: Path) -> dict[str, memoryview]:
    """module name -> its table, still marshalled. The file (the magic number, the index's
    size, the index ``{module: (offset, size)}``, then the tables) is mapped, not read: a
    process reads the pages of the modules whose dataclasses it makes, however large the file
    grows."""
    try:
        with open(path, "rb") as fh:
            mapped = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):  # ValueError: an empty file cannot be mapped
        return {}
    view = memoryview(mapped)
    head = len(MAGIC) + _INDEX_SIZE.size
    if view[:len(MAGIC)] != MAGIC or len(view) > MAX_FILE_BYTES or len(view) < head:
        return {}
    (size,) = _INDEX_SIZE.unpack(view[len(MAGIC):head])
    try:
        version, index = marshal.loads(view[head:head + size])
    except (EOFError, ValueError, TypeError):
        return {}
    if version != _FORMAT or not isinstance(index, dict):
        return {}
    start = head + size
    return {module: view[start + offset:start + offset + length]
            for module, (offset, length) in index.items()}


def _table(blob: bytes | memoryview | None) -> Table:
    if blob is None:
        return {}
    try:
        table = marshal.loads(blob)
    except (EOFError, ValueError, TypeError):
        return {}
    return table if isinstance(table, dict) else {}


def _save(path: Path, new: dict[str, Table]) -> None:
    blobs: dict[str, bytes | memoryview] = dict(_load(path))  # what others added meanwhile
    for module, entries in new.items():
        table = _table(blobs.get(module))
        table.update(entries)
        blobs[module] = marshal.dumps(table)
    index: dict[str, tuple[int, int]] = {}
    offset = 0
    for module, blob in blobs.items():
        index[module] = (offset, len(blob))
        offset += len(blob)
    head = marshal.dumps((_FORMAT, index))
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as fh:
            fh.write(MAGIC + _INDEX_SIZE.pack(len(head)) + head)
            for blob in blobs.values():
                fh.write(blob)
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)


class CodeCache:
    """``dataclasses``' ``exec``: the code of a text seen before is loaded, not compiled.
    Kept per module (the one whose globals the text runs in)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.blobs = _load(path)
        self.tables: dict[str, Table] = {}
        self.new: dict[str, Table] = {}
        self.compiled = 0
        self.loaded = 0

    def __call__(self, source: Any, globals_: dict[str, Any] | None = None,
                 locals_: dict[str, Any] | None = None, /) -> None:
        if not isinstance(source, str):
            exec(source, globals_, locals_)  # what dataclasses would run
            return
        module = str((globals_ or {}).get("__name__", ""))
        table = self.tables.get(module)
        if table is None:
            table = self.tables[module] = _table(self.blobs.pop(module, None))
        code = table.get(source)
        if code is None:
            # as dataclasses' own exec(text) compiles it: no __future__ flags of this module
            code = compile(source, "<string>", "exec", dont_inherit=True)
            table[source] = code
            self.new.setdefault(module, {})[source] = code
            self.compiled += 1
        else:
            self.loaded += 1
        exec(code, globals_, locals_)  # the code dataclasses wrote

    def save(self) -> None:
        """Add what this process compiled to the file (nothing where Python writes no
        bytecode)."""
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

