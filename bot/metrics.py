"""What the chat runtime reports about its turns, and Prometheus metrics built on it.

:class:`TurnObserver` is the seam: :class:`bot.service.ChatService` tells its observer
when a question arrives, while it waits for a run slot, and how each turn ended. The
default observer does nothing. :class:`PrometheusMetrics` (``[monitoring] metrics_port``,
served by :mod:`bot.monitoring`) turns the reports into these series, in a registry of
its own (no process-wide state; two runtimes in one test process do not mix):

- ``threadwise_questions_total{platform}``: questions that start a graph run;
- ``threadwise_outcomes_total{platform,outcome}``: how turns ended: ``answer`` (from the
  documents or the web), ``direct`` (no search needed), ``human`` (an expert's answer
  posted after a help request), ``help`` (paused for the experts), ``apology``;
- ``threadwise_llm_calls_total``: chat-model requests, each retry counted (a LangChain
  callback on the graph run, so it counts what the model provider sees);
- ``threadwise_llm_tokens_total{direction}``: tokens sent to the chat model (``input``) and
  written by it (``output``), as its provider counted them (LangChain's ``usage_metadata``);
- ``threadwise_turn_seconds{outcome}``: seconds from the start of a run (a question, an
  expert's reply) to its outcome, a histogram;
- ``threadwise_runs_waiting``: questions waiting for a free run slot
  (``[service] max_concurrent_runs``), i.e. the queue depth;
- ``threadwise_runs_in_flight``: graph runs in flight.

Needs the ``metrics`` extra (``prometheus-client``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

#: Outcomes a turn is counted under (:meth:`TurnObserver.finished`).
OUTCOMES = ("answer", "direct", "human", "help", "apology")

#: Latency buckets in seconds: an answer from a hosted model takes 2-20 s, the offline
#: model up to minutes, a help request's resume a few seconds.
LATENCY_BUCKETS = (0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600)


class TurnObserver:
    """Receives the chat runtime's reports; this base class ignores them.

    ``callbacks`` are LangChain callback handlers added to every graph run's config
    (:func:`bot.tracing.run_config`)."""

    def __init__(self) -> None:
        self.callbacks: list[Any] = []

    def question(self, platform: str) -> None:
        """A question arrived that will start a graph run on ``platform``."""

    @contextmanager
    def waiting(self) -> Iterator[None]:
        """The block waits for a free run slot."""
        yield

    @contextmanager
    def running(self) -> Iterator[None]:
        """The block runs the graph."""
        yield

    def finished(self, platform: str, outcome: str, seconds: float) -> None:
        """A run ended with ``outcome`` (one of :data:`OUTCOMES`) after ``seconds``."""

    def llm_requests(self, count: int, input_tokens: int = 0, output_tokens: int = 0) -> None:
        """A run on a graph worker (:mod:`bot.service.graph_pool`) made ``count`` chat-model
        requests with these tokens (in this process, :attr:`callbacks` count them as they
        start and end)."""


def llm_result_tokens(response: Any) -> tuple[int, int]:
    """``(input, output)`` tokens of one chat-model call's ``LLMResult`` (the usage metadata
    of its messages; 0 when the provider reports none)."""
    used = [0, 0]
    for generations in getattr(response, "generations", None) or []:
        for generation in generations:
            usage = getattr(getattr(generation, "message", None), "usage_metadata", None) or {}
            used[0] += int(usage.get("input_tokens") or 0)
            used[1] += int(usage.get("output_tokens") or 0)
    return used[0], used[1]


class MetricsUnavailable(RuntimeError):
    """prometheus-client is not installed (the ``metrics`` extra)."""


class PrometheusMetrics(TurnObserver):
    """The series listed in the module docstring, in :attr:`registry`.

    Raises:
        MetricsUnavailable: prometheus-client is not installed.
    """

    def __init__(self) -> None:
        super().__init__()
        try:
            from langchain_core.callbacks import BaseCallbackHandler
            from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
        except ImportError as exc:
            raise MetricsUnavailable(
                "[monitoring] metrics_port needs prometheus-client: pip install 'threadwise[metrics]'"
            ) from exc
        self.registry = CollectorRegistry()
        r = self.registry
        self.questions = Counter("threadwise_questions", "Questions that start a graph run", ["platform"], registry=r)
        self.outcomes = Counter(
            "threadwise_outcomes",
            "How turns ended (answer, direct, human, help, apology)",
            ["platform", "outcome"],
            registry=r,
        )
        self.llm_calls = Counter("threadwise_llm_calls", "Chat-model requests (each retry counted)", registry=r)
        self.latency = Histogram(
            "threadwise_turn_seconds",
            "Seconds from the start of a run to its outcome",
            ["outcome"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.waiting_runs = Gauge("threadwise_runs_waiting", "Questions waiting for a free run slot", registry=r)
        self.in_flight = Gauge("threadwise_runs_in_flight", "Graph runs in flight", registry=r)
        self.llm_tokens = Counter(
            "threadwise_llm_tokens", "Chat-model tokens, as the provider counted them", ["direction"], registry=r
        )
        counter = self.llm_calls
        tokens = self.llm_tokens

        class _LLMCalls(BaseCallbackHandler):
            """Counts chat-model (and completion-model) starts in the graph run."""

            run_inline = True  # counted at once, not in an executor thread

            def on_chat_model_start(self, *args: Any, **kwargs: Any) -> None:
                counter.inc()

            def on_llm_start(self, *args: Any, **kwargs: Any) -> None:
                counter.inc()

            def on_llm_end(self, response: Any, **kwargs: Any) -> None:
                used = llm_result_tokens(response)
                tokens.labels("input").inc(used[0])
                tokens.labels("output").inc(used[1])

        self.callbacks.append(_LLMCalls())

    def question(self, platform: str) -> None:
        self.questions.labels(platform).inc()

    @contextmanager
    def waiting(self) -> Iterator[None]:
        with self.waiting_runs.track_inprogress():
            yield

    @contextmanager
    def running(self) -> Iterator[None]:
        with self.in_flight.track_inprogress():
            yield

    def finished(self, platform: str, outcome: str, seconds: float) -> None:
        self.outcomes.labels(platform, outcome).inc()
        self.latency.labels(outcome).observe(seconds)

    def llm_requests(self, count: int, input_tokens: int = 0, output_tokens: int = 0) -> None:
        self.llm_calls.inc(count)
        self.llm_tokens.labels("input").inc(input_tokens)
        self.llm_tokens.labels("output").inc(output_tokens)

    def exposition(self) -> tuple[bytes, str]:
        """The registry in the Prometheus text format: ``(body, content type)``."""
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return generate_latest(self.registry), CONTENT_TYPE_LATEST
