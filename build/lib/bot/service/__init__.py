"""The platform-neutral chat runtime: :class:`ChatService` and what it is made of.

==================  ==================================================================
module              holds
==================  ==================================================================
chat_service        :class:`ChatService`: settings, wiring, the entry points adapters call
dispatch            one incoming message: dedup, empty/too long, admin, reply or question
acknowledge         the first status on receipt, before any storage work (a run slot promised)
run_slots           the cap on runs at once ([service] max_concurrent_runs), slots promised on receipt
dedup               a message id is handled once (Slack and Discord redeliveries)
replies             ``remember:``; the hint for replying to a help request (parsed in bot.chat.text)
runs                one graph run: progress phases -> statuses, the answer posted
help_requests       help requests posted, claimed, resumed (``Command(resume=...)``), timed out
feedback            answers recorded for 👍/👎, votes, a 👎'd answer sent to the experts
learning            experts' answers saved as learned entries
recovery            runs left unfinished by a crash, and the replicas' watch
responders          responders rebuilt from their reference after a restart
threads             one message of a thread at a time (locks spanning replicas)
errors              a failure becomes one log line and the apology
==================  ==================================================================

Raw SQL on the checkpointer lives in :mod:`bot.storage.checkpoints`; the contract with the graph
(progress phases, help payload, resume value) in :mod:`graphs.state`.
"""

from bot.service.chat_service import ChatService
from bot.service.runs import TurnResult

__all__ = ["ChatService", "TurnResult"]
