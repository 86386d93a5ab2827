"""The package's layers point down only (pyproject.toml ``[tool.importlinter]``): cli/demo ->
cluster supervisor/chaos -> broker/controller/spark/sim -> client/storage/replication ->
records/wire/metadata -> errors. import-linter reads the real import graph."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_layers_point_down_only() -> None:
    lint = Path(sys.executable).parent / "lint-imports"
    proc = subprocess.run([str(lint)], cwd=REPO, capture_output=True, text=True, timeout=300,
                          check=False)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "KEPT" in proc.stdout and "BROKEN" not in proc.stdout
