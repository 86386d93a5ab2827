"""A SPARK_HOME for a pip-installed PySpark whose Python processes import PySpark compiled.

Why: Spark's JVM puts ``$SPARK_HOME/python/lib/pyspark.zip`` first on the ``PYTHONPATH`` of every
Python process it starts (``PythonUtils.sparkPythonPath``). A pip-installed PySpark ships that zip,
so each new process imports pyspark from it, and zipimport keeps no bytecode: every start compiles
PySpark's modules again. Measured here, importing the stream reader's driver-side module
(``pyspark.sql.streaming.python_streaming_source_runner``): 1.1-1.3 s of CPU from the zip, 0.4 s
from site-packages. That process is the one Spark waits for with a hard-coded 10 s connect-back
(``PythonWorkerFactory.createSimpleWorker``); on a machine loaded many times over its cores the
compile alone outlasts it and the query fails at its start with "Python worker failed to connect
back".

The fix: a SPARK_HOME that is the pip package in every part (``bin``, ``jars``, ...) except that its
``python/lib`` holds only py4j's zip. Spark's path then names a zip that does not exist (Python
skips it), and pyspark comes from the interpreter's own site-packages, the same files, compiled
once. It is only right when the Python processes run an interpreter that has this very PySpark
installed, which ``use_compiled_pyspark`` checks.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import sys
import tempfile
from pathlib import Path

log = logging.getLogger(__name__)


def pip_spark_home() -> Path | None:
    """The pip-installed PySpark's own SPARK_HOME (its package directory), if it is one."""
    try:
        import pyspark
    except ImportError:
        return None
    home = Path(pyspark.__file__).resolve().parent
    if (home / "jars").is_dir() and (home / "python" / "lib" / "pyspark.zip").is_file():
        return home
    return None


def compiled_spark_home(home: Path, cache_dir: Path) -> Path:
    """A SPARK_HOME under ``cache_dir``: links to the parts of ``home`` Spark's scripts and JVM use
    (``bin``, ``jars``, ``sbin``, ...; not PySpark's modules) and a ``python/lib`` that keeps
    py4j's zip and not pyspark.zip. Made once per PySpark installation (named by
    its version and path) and atomically, so concurrent callers all see a whole one."""
    import pyspark

    tag = f"{pyspark.__version__}-{hashlib.sha256(str(home).encode()).hexdigest()[:8]}"
    target = cache_dir / f"spark-home-{tag}"
    if (target / "bin").exists():
        return target
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".spark-home-", dir=cache_dir))
    try:
        for entry in home.iterdir():
            if entry.name == "python" or _python_code(entry):
                continue
            (tmp / entry.name).symlink_to(entry)
        lib = tmp / "python" / "lib"
        lib.mkdir(parents=True)
        for z in (home / "python" / "lib").glob("py4j-*.zip"):
            (lib / z.name).symlink_to(z)
        os.rename(tmp, target)
    except OSError:
        if not (target / "bin").exists():
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # lost a race: another caller made it first
    return target


def _python_code(entry: Path) -> bool:
    """PySpark's own modules, which a SPARK_HOME does not need (bin, jars, sbin, ... it does)."""
    return (entry.suffix in (".py", ".pyi") or entry.name in ("__pycache__", "py.typed")
            or (entry / "__init__.py").exists())


def _same_interpreter(path: str | None) -> bool:
    return path is None or os.path.realpath(path) == os.path.realpath(sys.executable)


def use_compiled_pyspark(cache_dir: Path | None = None) -> Path | None:
    """Point SPARK_HOME at ``compiled_spark_home`` when that is safe: PySpark is pip-installed,
    SPARK_HOME is unset or that package itself, and Spark's Python processes run this interpreter
    (PYSPARK_PYTHON and PYSPARK_DRIVER_PYTHON unset or this one). Call it before the SparkSession
    is created (the JVM reads SPARK_HOME when it starts). Returns the SPARK_HOME set, else None."""
    home = pip_spark_home()
    if home is None:
        return None
    current = os.environ.get("SPARK_HOME")
    if current is not None and Path(current).resolve() != home:
        return None  # a Spark distribution of the user's: its python/lib is its business
    if not (_same_interpreter(os.environ.get("PYSPARK_PYTHON"))
            and _same_interpreter(os.environ.get("PYSPARK_DRIVER_PYTHON"))):
        return None
    if cache_dir is None:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache")
        cache_dir = Path(base) / "floodmark"
    try:
        target = compiled_spark_home(home, cache_dir)
    except OSError as exc:
        log.info("keeping SPARK_HOME=%s (could not make a compiled-PySpark one: %s)", home, exc)
        return None
    os.environ["SPARK_HOME"] = str(target)
    return target
