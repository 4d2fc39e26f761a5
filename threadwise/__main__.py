"""``python -m threadwise ARGS``: runs :func:`bot.__main__.main` (the ``threadwise`` command)
and exits with its code (0 ok, 2 bad config or arguments, 1 other failure, 130 Ctrl-C)."""

import sys

from bot.__main__ import main

if __name__ == "__main__":
    sys.exit(main())
