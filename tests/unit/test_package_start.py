"""A floodmark process and a PySpark Python worker hide Hypothesis (kio would register its
strategies at every start); a program that imports floodmark, pytest included, keeps it. A
floodmark process also ends without the interpreter's last garbage collections."""

from __future__ import annotations

import subprocess
import sys

import pytest

import floodmark


@pytest.mark.parametrize(("argv", "hidden"), [
    (["python", "-m", "floodmark.cli", "broker"], True),
    (["python", "-u", "-m", "floodmark.broker.cluster_member", "--node-id", "1"], True),
    (["python", "/srv/venv/bin/floodmark", "cluster", "up"], True),
    (["python", "-m", "pytest", "-m", "not slow"], False),
    (["python", "-c", "import floodmark"], False),
    (["python", "/srv/venv/bin/floodmark-other"], False),
    (["python"], False),
    (["python", "-m"], False),
])
def test_only_a_floodmark_command_hides_hypothesis(monkeypatch: pytest.MonkeyPatch,
                                                   argv: list[str], hidden: bool) -> None:
    monkeypatch.setattr(sys, "orig_argv", argv)
    assert floodmark._started_as_floodmark() is hidden


def test_this_test_run_keeps_hypothesis() -> None:
    import kio.static._phantom as phantom

    assert phantom.hypothesis is not None


@pytest.mark.parametrize(("argv", "hidden"), [
    (["/srv/venv/bin/python", "-m", "pyspark.daemon"], True),
    (["python3", "-m", "pyspark.worker"], True),
    (["python3", "-m", "pyspark.sql.streaming.python_streaming_source_runner"], True),
    (["python", "-m", "pyspark"], False),
    (["python", "app.py"], False),
    (["python", "-m", "pytest", "tests/spark"], False),
    (["python", "-m"], False),
])
def test_a_pyspark_worker_hides_hypothesis(monkeypatch: pytest.MonkeyPatch, argv: list[str],
                                           hidden: bool) -> None:
    monkeypatch.setattr(sys, "orig_argv", argv)
    assert floodmark._started_as_pyspark_worker() is hidden


# Garbage in a reference cycle when the program ends: the interpreter's last collections find
# it (and the object's __del__ runs) unless every object was frozen first.
_CYCLE_AT_EXIT = """
import subprocess
import sys
sys.orig_argv = {argv!r}
import floodmark
class Cycle:
    def __del__(self):
        print("collected at exit")
c = Cycle()
c.me = c
del c
print("end of program")
"""


@pytest.mark.parametrize(("argv", "collected"), [
    (["python", "-m", "floodmark.cli", "topic", "list"], False),
    (["python", "-m", "floodmark.broker.cluster_member"], False),
    (["python", "-c", "import floodmark"], True),  # a program that imports floodmark: untouched
])
def test_a_floodmark_process_skips_the_last_collections_at_exit(argv: list[str],
                                                                collected: bool) -> None:
    out = subprocess.run([sys.executable, "-c", _CYCLE_AT_EXIT.format(argv=argv)],
                         capture_output=True, text=True, timeout=60, check=True)
    lines = out.stdout.splitlines()
    assert lines[0] == "end of program"
    assert ("collected at exit" in lines) is collected
