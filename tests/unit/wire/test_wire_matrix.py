"""docs/wire.md's compatibility matrix says what ``SUPPORTED`` serves (and ``SHARE_GROUP``, served
with ``group.share.enable``), key by key: the table cannot drift from the code."""

from __future__ import annotations

import re
from pathlib import Path

from floodmark.wire.api_table import SHARE_GROUP, SUPPORTED, ApiKey

ROW = re.compile(r"^\| (\d+) \| (\w+) \| [^|]+ \| ([^|]+) \| [^|]*\|$")


def test_every_served_api_and_nothing_else_is_in_the_matrix() -> None:
    doc = (Path(__file__).resolve().parents[3] / "docs" / "wire.md").read_text()
    rows = {int(m.group(1)): m.group(3).strip() for m in map(ROW.match, doc.splitlines()) if m}
    assert len(rows) > 60, "the matrix lists every Kafka API key"
    for key, served in rows.items():
        rng = {**SUPPORTED, **SHARE_GROUP}.get(ApiKey(key)) \
            if key in ApiKey._value2member_map_ else None
        expected = f"{rng.min_version}–{rng.max_version}" if rng else "—"
        assert served == expected, f"api key {key}: docs say {served!r}, SUPPORTED {expected!r}"
    assert {*SUPPORTED, *SHARE_GROUP} <= set(rows), "an API served but missing from the matrix"
