"""dflash-watch: watch multi-GPU training runs in tmux.

``__version__`` is the one place the version is written: pyproject.toml
reads it (``[tool.setuptools.dynamic]``), and ``dflash-watch --version``
falls back to it when the package runs from a checkout without metadata.
Nothing else is imported here: ``dflash-watch --help`` stays light.
"""

__version__ = "0.1.0"
