"""``python -m threadwise ARGS``: runs :func:`bot.cli.main` (the ``threadwise`` command)
and exits with its code (0 ok, 2 bad config or arguments, 1 other failure, 130 Ctrl-C)."""

import os
import signal
import sys


def _interrupted_at_start(signum: int, frame: object) -> None:
    """SIGINT while :mod:`bot.cli` is being found and imported (it installs the same handler
    first thing, but the import itself takes a moment on a slow machine): one line, 130."""
    os.write(2, b"interrupted (Ctrl-C)\n")
    os._exit(130)


if __name__ == "__main__":
    signal.signal(signal.SIGINT, _interrupted_at_start)

from bot.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
