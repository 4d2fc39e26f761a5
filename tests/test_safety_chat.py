"""The shared chat layer (bot.chat): reply policy, outsider check, reaction state machine."""

from __future__ import annotations

import pytest

from bot.chat.policy import Addressing, ReplyPolicy, is_outsider, wants_answer
from bot.chat.reactions import ReactionState


@pytest.mark.parametrize(
    "policy, addressing, in_conversation, expected",
    [
        ("unless_addressed_to_others", Addressing(), True, True),
        ("unless_addressed_to_others", Addressing(others=True), True, False),
        ("unless_addressed_to_others", Addressing(others=True, mentions_bot=True), True, True),
        ("unless_addressed_to_others", Addressing(), False, False),
        ("all", Addressing(others=True), True, True),
        ("mentions_only", Addressing(), True, False),
        ("mentions_only", Addressing(direct=True), False, True),
        (ReplyPolicy.MENTIONS_ONLY, Addressing(mentions_bot=True), False, True),
    ],
)
def test_reply_policy(policy, addressing, in_conversation, expected):
    assert wants_answer(policy, addressing, in_conversation=in_conversation) is expected


@pytest.mark.parametrize(
    "member_of, home, allowed, outsider",
    [
        ("T2", ["T1"], [], True),
        ("T1", ["T1"], [], False),
        ("T2", ["T1"], ["T2"], False),
        ("", ["T1"], [], False),
        (5, [], [], False),
        (5, [], [6], True),
        (6, [], [6], False),
    ],
)
def test_outsider(member_of, home, allowed, outsider):
    assert is_outsider(member_of, home, allowed) is outsider


async def test_a_failed_add_still_removes_the_earlier_stage():
    shown_on_platform: set[str] = set()
    refuse = {"done"}

    async def add(name: str) -> bool:
        if name in refuse:
            return False
        shown_on_platform.add(name)
        return True

    async def remove(name: str) -> bool:
        shown_on_platform.discard(name)
        return True

    state = ReactionState()
    for name in ("received", "searching", "writing"):
        assert await state.move_to(name, add=add, remove=remove)
        assert shown_on_platform == {name}
    assert not await state.move_to("done", add=add, remove=remove)
    assert shown_on_platform == set() and state.shown == []
