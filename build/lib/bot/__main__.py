"""``python -m bot`` and the ``threadwise`` script: the command line of :mod:`bot.cli`."""

from __future__ import annotations

import os
import signal
import sys


def _interrupted_at_start(signum: int, frame: object) -> None:
    """SIGINT while the program is still importing and loading its config (up to ~1 s on a
    busy machine): one line, exit code 130, no KeyboardInterrupt traceback. Only ``os`` is
    used here: nothing else may be imported yet."""
    os.write(2, b"interrupted (Ctrl-C)\n")
    os._exit(130)


# Installed before the other imports on purpose (they are what a Ctrl-C at start interrupts),
# only when this is the program (`python -m bot`, `python -m threadwise`, the `threadwise`
# script), not when a test or another program imports the module.
if __name__ == "__main__" or os.path.basename(sys.argv[0]) in ("threadwise", "__main__.py"):
    signal.signal(signal.SIGINT, _interrupted_at_start)

from bot.cli import main  # noqa: E402

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
