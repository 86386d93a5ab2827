"""What ``pip install floodmark[spark]`` brings: every third-party module the Spark source and
sink import (``floodmark.spark``, ``pyspark_floodmark``) comes from a distribution the package
requires, either always or in its ``spark`` extra. A pure check over the source and
pyproject.toml (the wheel itself: test_wheel.py)."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SPARK_CODE = [REPO / "src" / "floodmark" / "spark", REPO / "src" / "pyspark_floodmark"]


def requirement_names(requirements: list[str]) -> set[str]:
    return {re.split(r"[\s<>=!~;\[]", r, maxsplit=1)[0].lower().replace("_", "-")
            for r in requirements}


def imported_top_modules(paths: list[Path]) -> set[str]:
    found: set[str] = set()
    for root in paths:
        for path in root.rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Import):
                    found.update(a.name.split(".")[0] for a in node.names)
                elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    found.add(node.module.split(".")[0])
    return found


def test_spark_extra_brings_every_module_the_spark_code_imports() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    spark = requirement_names(project["optional-dependencies"]["spark"])
    required = requirement_names(project["dependencies"]) | spark
    assert {"pyspark", "pyarrow", "numpy"} <= spark
    third_party = {m for m in imported_top_modules(SPARK_CODE)
                   if m not in sys.stdlib_module_names and m not in ("floodmark",
                                                                     "pyspark_floodmark")}
    assert "pyspark" in third_party and "pyarrow" in third_party
    owners = packages_distributions()
    for module in sorted(third_party):
        dists = {d.lower().replace("_", "-") for d in owners.get(module, [])}
        assert dists & required, (f"floodmark.spark imports {module} (from {sorted(dists)}), "
                                  "which neither the dependencies nor the spark extra bring")
