"""``python -m threadwise``: the same command line as the ``threadwise`` console script
(:mod:`bot.cli`). The code lives in :mod:`bot` and :mod:`graphs`; this package only
gives the command the distribution's name."""
