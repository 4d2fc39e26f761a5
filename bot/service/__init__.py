"""The platform-neutral chat runtime: :class:`ChatService` (the face adapters talk to) and
its parts. Each part is a class that owns its state and is handed, by ChatService, only
the parts it uses; none imports ChatService.

===================  ==================================================================
module               holds
===================  ==================================================================
chat_service         :class:`ChatService`: builds the parts from the settings; the public methods
intake               what a message is: no words, too long, ``remember:``, command, help reply, question
acknowledgements     the first status on receipt, before any storage work (a run slot promised)
dedup                a message id is handled once; forgotten again when its turn failed
dispatch             one incoming message routed: notice, command, help reply or question
run_slots            the cap on runs at once ([service] max_concurrent_runs)
thread_locks         one message of a thread at a time, in arrival order (locks spanning replicas)
conversations        the threads as the checkpointer keeps them (state, interrupt, checkpoints)
runs                 one graph run: progress phases -> statuses; answer, apology or help request posted
run_records          the record of a run in flight, finished once
help_desk            replies to help requests: claimed, resumed (``Command(resume=...)``), expired
help_timeouts        the timers of open help requests
feedback             votes on answers; a 👎'd answer sent to the experts
learning             experts' answers saved as learned entries
apologies            a failure becomes one log line and the apology
recovery             runs left unfinished by a crash, and the replicas' watch
responders           responders rebuilt from their reference after a restart
graph_pool           graph worker processes (``[service] graph_workers``)
===================  ==================================================================

Every part logs to the ``bot.service`` logger (recovery to ``bot.recovery``): log filters
and the JSON log's ``logger`` field name them. Raw SQL on the checkpointer lives in
:mod:`bot.storage.checkpoints`; the contract with the graph (progress phases, help payload, resume
value) in :mod:`graphs.state`.
"""

from bot.service.chat_service import ChatService
from bot.service.runs import TurnResult
from bot.service.thread_locks import Ticket

__all__ = ["ChatService", "Ticket", "TurnResult"]
