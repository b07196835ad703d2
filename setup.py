"""The optional compiled kernels (issue 20); everything else is in pyproject.toml.

``optional=True``: where no C compiler works, the build says so and goes on,
and ``dflash_watch.parsers.native`` runs the same loops in Python.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("dflash_watch.parsers._native", ["parsers/_native.c"], optional=True),
    ],
)
