"""The errors of model construction and model calls."""

from __future__ import annotations


class ModelUnavailableError(RuntimeError):
    """The configured model cannot be built or reached (missing package, file, API key,
    wrong base URL or model name). The message is one line naming the cause and the fix."""


class BackendCrashedError(ModelUnavailableError):
    """The offline model's native backend failed its self-check in a child process
    (e.g. killed by SIGILL: llama.cpp built for another CPU). The message is one line
    with the cause and the rebuild command (:mod:`graphs.local_backend`)."""


class ModelRefusedError(RuntimeError):
    """The model refused to answer, or the provider's content filter stopped the reply
    (OpenAI ``refusal`` / ``finish_reason`` ``content_filter``, Anthropic ``stop_reason``
    ``refusal``, Gemini ``SAFETY``, Bedrock ``content_filtered``). Not retried: the run
    ends in the apology. ``reason`` is the provider's word for it."""

    def __init__(self, reason: str):
        super().__init__(f"the model refused to answer ({reason})")
        self.reason = reason


class RetryableError(Exception):
    """Marks an exception as transient so the retry policy retries it (the original is ``__cause__``)."""
