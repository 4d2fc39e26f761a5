"""Prometheus metrics of the chat runtime (bot/metrics.py) observed on a real runtime whose
model is the Mistral-shaped fake: the queue depth while a question waits for a run slot,
questions, outcomes, LLM calls and latency. (The /metrics endpoint of a real process:
tests/test_observability.py.)"""

from __future__ import annotations

import asyncio

from bot.config import Secrets, load_settings
from bot.metrics import PrometheusMetrics
from bot.platforms.console import ConsoleResponder
from bot.protocol import Status
from bot.runtime import open_runtime
from tests.conftest import write_config
from tests.fakes.mistral_api import mistral_config
from tests.fakes.mistral_stall import mistral_server


def sample(metrics: PrometheusMetrics, name: str, **labels: str) -> float:
    return metrics.registry.get_sample_value(name, labels) or 0.0


async def test_queue_depth_and_turn_counts(tmp_path):
    async with mistral_server(stall_on={"route"}) as model:
        path = write_config(tmp_path, extra=mistral_config(model.base_url))
        path.write_text(path.read_text().replace("[service]\n", "[service]\nmax_concurrent_runs = 1\n", 1))
        metrics = PrometheusMetrics()
        async with open_runtime(
            load_settings(path), Secrets(mistral_api_key="k"), embeddings=None, observer=metrics
        ) as rt:
            first = ConsoleResponder("a", show_status=False, show_answers=False)
            second = ConsoleResponder("b", show_status=False, show_answers=False)
            one = asyncio.create_task(rt.service.ask("console:a", "How do I roll back a deploy?", first))
            await asyncio.wait_for(model.stalled.wait(), 30)  # the first run holds the only slot
            two = asyncio.create_task(rt.service.ask("console:b", "How do I deploy?", second))
            for _ in range(200):
                if sample(metrics, "threadwise_runs_waiting"):
                    break
                await asyncio.sleep(0.02)
            assert sample(metrics, "threadwise_runs_waiting") == 1
            assert sample(metrics, "threadwise_runs_in_flight") == 1
            assert second.statuses == [Status.QUEUED]
            assert sample(metrics, "threadwise_questions_total", platform="console") == 2
            assert sample(metrics, "threadwise_outcomes_total", platform="console", outcome="answer") == 0
            model.release()
            results = await asyncio.wait_for(asyncio.gather(one, two), 60)
    assert [r.answer.kind for r in results if r and r.answer] == ["answer", "answer"]
    assert sample(metrics, "threadwise_runs_waiting") == 0 and sample(metrics, "threadwise_runs_in_flight") == 0
    assert sample(metrics, "threadwise_outcomes_total", platform="console", outcome="answer") == 2
    assert sample(metrics, "threadwise_llm_calls_total") == len(model.requests) > 0
    assert sample(metrics, "threadwise_turn_seconds_count", outcome="answer") == 2
