"""``python -m dflash_watch``: the same entry point as the ``dflash-watch``
script, for an environment whose scripts folder is not on PATH."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
