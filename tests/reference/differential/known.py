"""Known differences: the allow-list. Each entry names a scenario and field path (``fnmatch``
pattern over ``scenario:path``) and says why the difference is kept; the test fails on every
difference no entry matches, and on an entry that matches nothing (a fixed difference must leave
the list). Reasons say where the fix would go when the difference is a floodmark gap."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass

from tests.reference.differential.compare import Difference


@dataclass(frozen=True)
class Known:
    pattern: str
    reason: str

    def matches(self, d: Difference) -> bool:
        return fnmatch.fnmatchcase(d.key, self.pattern)


KNOWN: list[Known] = [
]


def explain(d: Difference) -> Known | None:
    return next((k for k in KNOWN if k.matches(d)), None)
