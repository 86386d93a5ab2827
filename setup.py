"""The compiled part of the build: floodmark/spark's record decoder (everything else is in
pyproject.toml). Optional: where it cannot be compiled (no C compiler, no Python headers) the
build goes on and the Spark source decodes with numpy instead (floodmark/spark/decode.py)."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "floodmark.spark._recdecode",
            sources=["src/floodmark/spark/_recdecode.c"],
            extra_compile_args=["-O2"],
            optional=True,
        )
    ]
)
