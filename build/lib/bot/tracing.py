"""The LangChain run config of a graph run: run name, tags and metadata for tracing.

LangSmith (or any LangChain tracer) is switched on by the environment alone, as
LangChain documents it: ``LANGSMITH_TRACING=true``, ``LANGSMITH_API_KEY=...`` and
optionally ``LANGSMITH_PROJECT=...`` (``LANGSMITH_ENDPOINT`` for a self-hosted server).
Nothing in config.toml: the key is a secret. Each graph run is then one trace named
:data:`RUN_NAME`, tagged with the platform and the kind of run, with the thread key,
platform and message id as metadata, so one Slack thread's runs are found by filtering
on ``metadata.thread_key``. The node steps and every model call are child runs.
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.runnables import RunnableConfig

from bot.logs import current

#: The name of every graph run's root trace.
RUN_NAME = "threadwise"


def run_config(
    thread_key: str, platform: str, run_id: str, kind: str, callbacks: Sequence[BaseCallbackHandler] = ()
) -> RunnableConfig:
    """The tracing part of a graph run's ``RunnableConfig``.

    Args:
        thread_key: the conversation (LangGraph ``thread_id``), e.g. ``slack:C1:1712.5``.
        platform: ``slack``, ``discord`` or ``console``.
        run_id: the service's id of the run (the message id for a question, ``resume:<interrupt id>``...).
        kind: ``question``, ``resume`` (an expert's reply or a timeout) or ``continue``
            (a run cut off by a restart, continued from its checkpoint).
        callbacks: LangChain callback handlers for the run (metrics); none: the
            environment's tracers only.

    Returns:
        ``{"run_name", "tags", "metadata", "callbacks"?}``; ``metadata`` holds
        ``thread_key``, ``platform``, ``message_id`` (the message being handled, from
        :func:`bot.logs.log_context`; "" for runs no message started), ``run_id``, ``kind``.
    """
    config: RunnableConfig = {
        "run_name": RUN_NAME,
        "tags": [f"platform:{platform}", f"kind:{kind}"],
        "metadata": {
            "thread_key": thread_key,
            "platform": platform,
            "message_id": current().get("message_id", ""),
            "run_id": run_id,
            "kind": kind,
        },
    }
    if callbacks:
        config["callbacks"] = list(callbacks)
    return config
