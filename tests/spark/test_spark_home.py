"""``floodmark.spark.spark_home``: the Python processes Spark starts import PySpark compiled from
site-packages, not from the pip package's pyspark.zip (why: the module's docstring)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from floodmark.spark import spark_home


def _fake_pip_home(root: Path) -> Path:
    home = root / "site-packages" / "pyspark"
    for d in ("bin", "jars", "sbin", "python/lib", "sql", "__pycache__"):
        (home / d).mkdir(parents=True)
    (home / "bin" / "spark-submit").write_text("#!/bin/sh\n")
    (home / "sql" / "__init__.py").write_text("")
    (home / "__init__.py").write_text("")
    (home / "python" / "lib" / "pyspark.zip").write_bytes(b"PK")
    (home / "python" / "lib" / "py4j-0.10.9.9-src.zip").write_bytes(b"PK")
    return home


def test_the_compiled_home_links_spark_s_parts_and_leaves_out_pyspark_zip(tmp_path: Path) -> None:
    home = _fake_pip_home(tmp_path)
    made = spark_home.compiled_spark_home(home, tmp_path / "cache")
    assert sorted(p.name for p in made.iterdir()) == ["bin", "jars", "python", "sbin"]
    assert (made / "bin" / "spark-submit").resolve() == (home / "bin" / "spark-submit").resolve()
    assert [p.name for p in (made / "python" / "lib").iterdir()] == ["py4j-0.10.9.9-src.zip"]
    # made once: a second call (another process, a later run) finds the same one
    assert spark_home.compiled_spark_home(home, tmp_path / "cache") == made
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [made.name]


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for var in ("SPARK_HOME", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON"):
        monkeypatch.delenv(var, raising=False)
    return monkeypatch


def test_spark_home_is_set_only_where_the_workers_run_this_interpreter(
        clean_env: pytest.MonkeyPatch, tmp_path: Path) -> None:
    if spark_home.pip_spark_home() is None:
        pytest.skip("PySpark is not a pip installation here")
    clean_env.setenv("SPARK_HOME", "/opt/spark")  # a Spark distribution: left alone
    assert spark_home.use_compiled_pyspark(tmp_path) is None
    assert os.environ["SPARK_HOME"] == "/opt/spark"
    clean_env.delenv("SPARK_HOME")
    clean_env.setenv("PYSPARK_PYTHON", "/usr/bin/python3-elsewhere")  # may lack this PySpark
    assert spark_home.use_compiled_pyspark(tmp_path) is None
    assert "SPARK_HOME" not in os.environ
    clean_env.setenv("PYSPARK_PYTHON", sys.executable)
    made = spark_home.use_compiled_pyspark(tmp_path)
    assert made is not None and os.environ["SPARK_HOME"] == str(made)
    assert not (made / "python" / "lib" / "pyspark.zip").exists()


@pytest.mark.spark
@pytest.mark.timeout(900)  # a hang guard: the first test of a run pays the SparkSession's start
def test_spark_s_python_workers_import_pyspark_from_site_packages(spark) -> None:  # type: ignore[no-untyped-def]
    from pyspark.sql.functions import udf

    @udf("string")
    def pyspark_file() -> str:
        import pyspark

        return str(pyspark.__file__)

    where = spark.range(1).select(pyspark_file()).first()[0]
    assert ".zip" not in where and where.endswith(os.path.join("pyspark", "__init__.py")), where


@pytest.mark.spark
@pytest.mark.timeout(900)
def test_spark_s_python_workers_do_not_import_hypothesis(spark) -> None:  # type: ignore[no-untyped-def]
    """kio registers Hypothesis strategies at import where Hypothesis is importable (0.45 CPU s
    per fresh worker); a worker that imports floodmark hides it (floodmark/__init__.py)."""
    from pyspark.sql.functions import udf

    @udf("string")
    def hypothesis_in_worker() -> str:
        import importlib
        import sys

        # floodmark first, as the data source's reader imports it; then kio's module
        importlib.import_module("floodmark.spark.decode")
        phantom = importlib.import_module("kio.static._phantom")
        return f"{phantom.hypothesis is None} {sys.modules.get('hypothesis', 'absent')}"

    assert spark.range(1).select(hypothesis_in_worker()).first()[0] == "True None"
