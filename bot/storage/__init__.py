"""Where the bot keeps its state: one contract, two backends side by side (``[storage] backend``).

- :mod:`bot.storage.base`: the bookkeeping contract, one Protocol per concern (deliveries,
  runs in flight, coordination, help desk, feedback, audit), and :class:`Storage`, what an
  opened backend offers.
- :mod:`bot.storage.sqlite`: one process on local files (the default).
- :mod:`bot.storage.postgres`: replicas sharing one PostgreSQL database (docs/deploy.md).
- :mod:`bot.storage.checkpoints`: maintenance of the LangGraph checkpoints (list, prune),
  whichever saver holds them.
- :func:`open_storage`: the configured backend, opened for the process lifetime.

``tests/test_storage_conformance.py`` runs one suite of behaviour against every backend; a
new backend is a package beside the two that passes it.
"""

from bot.storage.base import (
    AuditLog,
    BookkeepingStore,
    Coordination,
    Deliveries,
    Feedback,
    HelpDesk,
    RunLedger,
    SharedBookkeepingStore,
    Storage,
)
from bot.storage.factory import DATABASE_URL_ENV, database_url, open_learned, open_storage

__all__ = [
    "DATABASE_URL_ENV",
    "AuditLog",
    "BookkeepingStore",
    "Coordination",
    "Deliveries",
    "Feedback",
    "HelpDesk",
    "RunLedger",
    "SharedBookkeepingStore",
    "Storage",
    "database_url",
    "open_learned",
    "open_storage",
]
