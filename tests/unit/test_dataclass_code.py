"""floodmark.dataclass_code: a floodmark process loads the code of @dataclass's methods that an
earlier process compiled, and the classes it makes are the ones ``dataclasses`` makes alone."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from floodmark import dataclass_code

# A process that makes dataclasses with the cache at PATH and prints what they do; the same
# text runs with and without the cache, and the two outputs must be equal.
_PROBE = """
import dataclasses, sys
from typing import ClassVar
if sys.argv[1] != "-":
    from floodmark import dataclass_code
    cache = dataclass_code.install(__import__("pathlib").Path(sys.argv[1]))

@dataclasses.dataclass(frozen=True, slots=True)
class Point:
    x: int
    y: int = 2
    tags: tuple[str, ...] = ()
    ORIGIN: ClassVar[int] = 0

@dataclasses.dataclass(order=True)
class Box:
    size: int
    items: list[int] = dataclasses.field(default_factory=list)

p = Point(1)
try:
    p.x = 5
    frozen = "no"
except dataclasses.FrozenInstanceError:
    frozen = "yes"
b = Box(3)
b.items.append(1)
print(repr(p), p == Point(1, 2), hash(p) == hash(Point(1)), frozen, repr(b), Box(1) < Box(2),
      Point.__init__.__annotations__, Box.__eq__.__code__.co_filename, Point.__match_args__)
if sys.argv[1] != "-":
    print("compiled", cache.compiled, "loaded", cache.loaded)
"""


def _run(cache: str, env: dict[str, str] | None = None) -> list[str]:
    """The probe's output lines; by default where Python may write bytecode."""
    if env is None:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    out = subprocess.run([sys.executable, "-c", _PROBE, cache], capture_output=True, text=True,
                         timeout=60, check=True, env=env)
    return out.stdout.splitlines()


def test_a_second_process_loads_what_the_first_compiled_and_makes_the_same_classes(
        tmp_path: Path) -> None:
    path = tmp_path / "code.marshal"
    (alone,) = _run("-")
    first, first_counts = _run(str(path))
    assert path.is_file()
    second, second_counts = _run(str(path))
    assert first == alone and second == alone  # the same behaviour, annotations not stringized
    compiled, loaded = int(first_counts.split()[1]), int(first_counts.split()[3])
    assert compiled > 6 and loaded == 0
    assert second_counts == f"compiled 0 loaded {compiled}"


def test_an_unreadable_or_foreign_file_is_compiled_over(tmp_path: Path) -> None:
    path = tmp_path / "code.marshal"
    for content in (b"", b"garbage", dataclass_code.MAGIC + b"\x00broken",
                    b"\x00\x00\r\n" + b"x" * 40):  # another interpreter's magic number
        path.write_bytes(content)
        _out, counts = _run(str(path))
        assert counts.startswith("compiled ") and counts.endswith(" loaded 0"), content
    _out, counts = _run(str(path))  # the last run rewrote the file
    assert counts.startswith("compiled 0 ")


def test_nothing_is_written_where_python_writes_no_bytecode(tmp_path: Path) -> None:
    path = tmp_path / "code.marshal"
    _run(str(path), env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    assert not path.exists()


def test_install_is_idempotent_and_the_file_lives_beside_the_bytecode(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delattr(dataclasses, "exec", raising=False)
    monkeypatch.setattr(dataclass_code.atexit, "register", lambda _f: None)
    cache = dataclass_code.install(tmp_path / "c")
    try:
        assert dataclass_code.install() is cache
        assert dataclasses.exec is cache  # type: ignore[attr-defined]
    finally:
        monkeypatch.delattr(dataclasses, "exec")
    assert dataclass_code.cache_path().parent.name == "__pycache__"
    assert sys.implementation.cache_tag in dataclass_code.cache_path().name
    assert dataclass_code.cache_path("tests") not in (dataclass_code.cache_path(), None)


@pytest.mark.parametrize(("argv", "installed"), [
    (["python", "-m", "floodmark.cli", "broker"], "CodeCache"),
    (["python", "-c", "import floodmark"], "NoneType"),  # a program that imports floodmark
])
def test_a_floodmark_process_installs_it(argv: list[str], installed: str) -> None:
    probe = subprocess.run(
        [sys.executable, "-c", f"import sys; sys.orig_argv = {argv!r}; import floodmark, "
         "dataclasses; print(type(vars(dataclasses).get('exec')).__name__)"],
        capture_output=True, text=True, timeout=60, check=True)
    assert probe.stdout.strip() == installed
