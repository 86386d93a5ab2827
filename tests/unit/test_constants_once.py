"""Kafka's protocol sentinels live in ``floodmark.constants`` only (issue 25): no other module
assigns one of its names at module level, so ``ACKS_ALL`` or ``READ_COMMITTED`` cannot drift."""

from __future__ import annotations

import ast
from pathlib import Path

import floodmark
from floodmark import constants

SRC = Path(floodmark.__file__).parent
NAMES = {n for n in vars(constants) if n.isupper()}


def test_each_sentinel_is_defined_once() -> None:
    assert {"ACKS_ALL", "NO_LEADER", "READ_COMMITTED", "EARLIEST_TIMESTAMP"} <= NAMES
    again = []
    for path in SRC.rglob("*.py"):
        if path == Path(constants.__file__):
            continue
        for node in ast.parse(path.read_text(), str(path)).body:
            targets = (node.targets if isinstance(node, ast.Assign)
                       else [node.target] if isinstance(node, ast.AnnAssign) else [])
            for t in targets:
                for name in ([t] if isinstance(t, ast.Name) else
                             [e for e in t.elts if isinstance(e, ast.Name)]
                             if isinstance(t, ast.Tuple) else []):
                    if name.id in NAMES and isinstance(node.value, ast.Constant | ast.UnaryOp):
                        again.append(f"{path.relative_to(SRC)}:{node.lineno} {name.id}")
    assert again == [], f"defined again outside floodmark.constants: {again}"
