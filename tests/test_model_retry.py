"""Transport behaviour of model calls against a Mistral-shaped server: a 429's
Retry-After is honoured (seconds or an HTTP date), capped; timeouts keep their unit
(half a second is half a second, not zero)."""

from __future__ import annotations

import asyncio
import email.utils
import time
from types import SimpleNamespace

import pytest

from bot.runtime import AUTO_CONCURRENCY
from graphs.models import ModelCaller, RetryableError, build_chat_model
from tests.fakes.mistral_api import mistral_server


def caller(base_url: str, timeout: float = 10.0, **kw) -> ModelCaller:
    cfg = SimpleNamespace(
        provider="mistral",
        mistral_chat_model="mistral-small-latest",
        mistral_base_url=base_url,
        temperature=0.0,
        max_tokens=256,
        request_timeout_seconds=timeout,
    )
    return ModelCaller(build_chat_model(cfg, "test-key"), "mistral", max_retries=2, timeout=timeout, **kw)


def rate_limited(retry_after: str, status: int = 429) -> dict:
    return {"status": status, "headers": {"Retry-After": retry_after}}


@pytest.mark.parametrize(
    "retry_after,least,most",
    [
        ("3", 2.9, 4.5),  # delay-seconds
        ("2.5", 2.4, 4.0),  # fractional seconds
        ("http-date", 1.9, 4.5),  # an HTTP date 3 s ahead (1 s resolution)
        ("0", 0.0, 0.5),  # "now": no backoff on top
    ],
    ids=["seconds", "fraction", "http-date", "zero"],
)
async def test_retry_after_is_honoured(retry_after, least, most):
    if retry_after == "http-date":
        retry_after = email.utils.formatdate(time.time() + 3, usegmt=True)
    async with mistral_server({"direct": [rate_limited(retry_after), "Hello."]}) as (fake, base):
        assert await caller(base).text("TASK: direct\nHi.", "hi") == "Hello."
    waited = fake.times[1] - fake.times[0]
    assert least <= waited <= most, waited


async def test_retry_after_on_a_503_is_honoured_too():
    async with mistral_server({"direct": [rate_limited("0", 503), "Hello."]}) as (fake, base):
        assert await caller(base).text("TASK: direct\nHi.", "hi") == "Hello."
    assert fake.times[1] - fake.times[0] < 0.5


async def test_a_long_retry_after_is_capped():
    async with mistral_server(
        {
            "direct": [
                rate_limited("3600"),
                rate_limited(email.utils.formatdate(time.time() + 3600, usegmt=True)),
                "Hello.",
            ]
        }
    ) as (fake, base):
        assert await caller(base, max_retry_wait=0.3).text("TASK: direct\nHi.", "hi") == "Hello."
    assert len(fake.requests) == 3 and fake.times[2] - fake.times[0] < 1.5


async def test_retries_stop_at_max_retries():
    async with mistral_server({"direct": [rate_limited("0")]}) as (fake, base):
        with pytest.raises(RetryableError):
            await caller(base).text("TASK: direct\nHi.", "hi")
    assert len(fake.requests) == 3  # max_retries = 2


@pytest.mark.parametrize("timeout,delay", [(0.5, 0.1), (1.6, 1.2)])
async def test_fractional_timeouts_are_kept(timeout, delay):
    async with mistral_server({"direct": [{"content": "Hello.", "delay": delay}]}) as (fake, base):
        assert await caller(base, timeout=timeout).text("TASK: direct\nHi.", "hi") == "Hello."
    assert len(fake.requests) == 1


async def test_a_reply_slower_than_a_fractional_timeout_times_out():
    async with mistral_server({"direct": [{"content": "Hello.", "delay": 1.5}]}) as (fake, base):
        started = time.monotonic()
        with pytest.raises(RetryableError):
            await caller(base, timeout=0.4, max_retry_wait=0.0).text("TASK: direct\nHi.", "hi")
    assert time.monotonic() - started < 3.0 and len(fake.requests) == 3


@pytest.mark.parametrize(
    "capacity,calls,start", [(4, 40, 16), (1, 12, 16), (10, 60, 16), (4, 300, AUTO_CONCURRENCY["hosted"][0])]
)
async def test_rate_limits_shrink_the_calls_in_flight_instead_of_failing(capacity, calls, start):
    """A hosted model that takes only ``capacity`` calls at once (429 beyond): the caller's
    limit (16, or the "auto" cap for a hosted model with its default retries) halves on
    refusals, so every call gets through with few refusals; a fixed cap of 16 would keep
    sending 16 and run out of retries, and a first burst of 256 left 5 of 300 calls failed."""
    script = {"direct": [{"content": "Hello.", "delay": 0.05}]}
    async with mistral_server(script, capacity=capacity) as (fake, base):
        c = caller(base, max_concurrent=start)
        if start == 16:
            c._with_retries = c._with_retries.retry_with(stop=__import__("tenacity").stop_after_attempt(6))
        results = await asyncio.gather(
            *[c.text("TASK: direct\nHi.", f"q{i}") for i in range(calls)], return_exceptions=True
        )
    assert results == ["Hello."] * calls
    assert fake.rate_limited <= start + calls, fake.rate_limited  # a fixed cap: ~15 per round, then failures
    assert c.limit.window < start  # it learned the server's capacity
