"""Every exception class floodmark defines derives from ``FloodmarkError`` (issue 25: one
hierarchy, so ``except FloodmarkError`` tells floodmark's own refusals from bugs), and every
class named ``Corrupt*`` from ``CorruptDataError``. Private control-flow signals are the only
exceptions (listed here by name, so a new one is a decision, not an accident)."""

from __future__ import annotations

import ast
from pathlib import Path

import floodmark
from floodmark.errors import CorruptDataError, FloodmarkError, KafkaError

SRC = Path(floodmark.__file__).parent
CONTROL_FLOW = {"_Stopped", "_Exited", "Crashed"}  # raised and caught inside one module
BUILTIN_BASES = {"Exception", "BaseException", "RuntimeError", "ValueError", "OSError",
                 "ConnectionError", "KeyError", "LookupError", "TypeError", "TimeoutError"}


def _classes_on_builtin_exceptions() -> list[str]:
    found = []
    for path in SRC.rglob("*.py"):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.ClassDef) or node.name in CONTROL_FLOW:
                continue
            bases = [b.id for b in node.bases if isinstance(b, ast.Name)]
            if bases and all(b in BUILTIN_BASES for b in bases):
                found.append(f"{path.relative_to(SRC)}:{node.lineno} {node.name}")
    return found


def test_no_exception_class_skips_the_base() -> None:
    loose = [c for c in _classes_on_builtin_exceptions() if not c.endswith(" FloodmarkError")]
    assert loose == [], f"exception classes not under FloodmarkError: {loose}"


def test_corrupt_classes_share_one_base() -> None:
    from floodmark.controller.quorum.state_file import CorruptQuorumStateError
    from floodmark.controller.snapshot import CorruptSnapshotError
    from floodmark.records import CorruptRecordError
    from floodmark.spark.decode import CorruptBatchError
    from floodmark.storage.checkpoints import CorruptCheckpointError

    for cls in (CorruptQuorumStateError, CorruptSnapshotError, CorruptRecordError,
                CorruptBatchError, CorruptCheckpointError):
        assert issubclass(cls, CorruptDataError), cls
    assert issubclass(CorruptDataError, FloodmarkError)
    assert issubclass(KafkaError, FloodmarkError)
    # the builtin bases callers already catch stay: a corrupt record is still a ValueError
    assert issubclass(CorruptRecordError, ValueError)
