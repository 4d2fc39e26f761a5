"""ModelCaller: a local llama.cpp model is never called concurrently, even when a call
times out and is retried (the timed-out call keeps running in its thread)."""

from __future__ import annotations

import asyncio
import threading
import time

from langchain_core.messages import BaseMessage

from graphs.models import ModelCaller, ScriptedChatModel


async def test_local_model_calls_never_overlap_even_after_timeouts():
    inside = threading.Lock()
    overlaps: list[int] = []
    calls: list[int] = []

    def slow(messages: list[BaseMessage]) -> str:
        if not inside.acquire(blocking=False):
            overlaps.append(1)
            return "overlap"
        try:
            calls.append(1)
            time.sleep(2.5 if len(calls) == 1 else 0.01)  # the first call outlives its timeout and the backoff
            return "fine"
        finally:
            inside.release()

    caller = ModelCaller(ScriptedChatModel(script={"generate": slow}), json_mode="llamacpp",
                         max_concurrent=4, max_retries=3, timeout=0.1)
    results = await asyncio.gather(*[caller.text("TASK: generate\nx", f"q{i}") for i in range(3)],
                                   return_exceptions=True)
    assert overlaps == []
    assert "fine" in results  # later calls still get through after the timed-out one
