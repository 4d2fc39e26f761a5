"""Help-request controls: the Answer / Retry with hint / Dismiss buttons and their modals.

The buttons are persistent: ``timeout=None`` and a ``custom_id`` that carries the action, the
thread key and the LangGraph interrupt id (``tw:<a|r|d>:<thread key>:<interrupt id>``, at most
87 characters with 20-digit ids; Discord allows 100 per custom_id), so a stale click on an
older help request cannot resume a newer one. They are :class:`discord.ui.DynamicItem`
subclasses registered once at start-up (``client.add_dynamic_items``: discord.py's form of
``add_view`` for custom_ids that hold state), so a click on a help request posted before a
restart still reaches the bot.

Every answer carries 👍 / 👎 buttons the same way (:class:`VoteButton`, ``tw:v:<u|d>:<answer id>``);
a 👎 opens an optional-reason modal (``tw:vr:<answer id>``), handled in ``on_interaction`` too.

A modal's submit arrives as its own interaction with ``custom_id`` ``tw:m:<a|r>:<key>:<id>``;
the bot handles it in ``on_interaction`` from the id alone, so it works across restarts too.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import discord

from bot.chat import vote_controls
from bot.protocol import HumanAction

if TYPE_CHECKING:
    from bot.platforms.discord.app import ThreadwiseBot

THREAD_KEY = r"discord:(?:dm|\d+):\d+"
_CODES = {HumanAction.ANSWER: "a", HumanAction.RETRY: "r", HumanAction.DISMISS: "d"}
_ACTIONS = {code: action for action, code in _CODES.items()}
BUTTON_ID = rf"tw:(?P<action>[ard]):(?P<key>{THREAD_KEY})(?::(?P<iid>[0-9a-f]{{1,40}}))?"
MODAL_ID = re.compile(rf"tw:m:(?P<action>[ar]):(?P<key>{THREAD_KEY})(?::(?P<iid>[0-9a-f]{{1,40}}))?")
TEXT_INPUT_ID = "text"


def button_id(action: HumanAction, thread_key: str, interrupt_id: str = "") -> str:
    """The custom_id of a help-request button."""
    return f"tw:{_CODES[action]}:{thread_key}" + (f":{interrupt_id}" if interrupt_id else "")


def parse_modal_id(custom_id: str) -> tuple[HumanAction, str, str] | None:
    """``(action, thread key, interrupt id)`` of a help modal's custom_id, or None."""
    m = MODAL_ID.fullmatch(custom_id)
    return (_ACTIONS[m["action"]], m["key"], m["iid"] or "") if m else None


_LABELS = {
    HumanAction.ANSWER: ("Answer", discord.ButtonStyle.success),
    HumanAction.RETRY: ("Retry with hint", discord.ButtonStyle.primary),
    HumanAction.DISMISS: ("Dismiss", discord.ButtonStyle.secondary),
}


class HelpButton(discord.ui.DynamicItem[discord.ui.Button], template=BUTTON_ID):
    """One help-request button (see :func:`button_id`)."""

    def __init__(self, action: HumanAction, thread_key: str, interrupt_id: str = "") -> None:
        label, style = _LABELS[action]
        super().__init__(
            discord.ui.Button(label=label, style=style, custom_id=button_id(action, thread_key, interrupt_id))
        )
        self.action = action
        self.thread_key = thread_key
        self.interrupt_id = interrupt_id

    @classmethod
    async def from_custom_id(
        cls, interaction: discord.Interaction, item: discord.ui.Item[Any], match: re.Match[str], /
    ) -> HelpButton:
        return cls(_ACTIONS[match["action"]], match["key"], match["iid"] or "")

    async def callback(self, interaction: discord.Interaction) -> None:
        bot: ThreadwiseBot = interaction.client  # type: ignore[assignment]
        await bot.interactions.on_help_button(interaction, self.action, self.thread_key, self.interrupt_id)


def help_view(thread_key: str, interrupt_id: str = "") -> discord.ui.View:
    """A persistent view (``timeout=None``) with the three help-request buttons."""
    view = discord.ui.View(timeout=None)
    for action in (HumanAction.ANSWER, HumanAction.RETRY, HumanAction.DISMISS):
        view.add_item(HelpButton(action, thread_key, interrupt_id))
    return view


def help_modal(action: HumanAction, thread_key: str, interrupt_id: str = "") -> discord.ui.Modal:
    """The modal asking an expert for an answer (ANSWER) or a hint (RETRY).

    Its submit is handled by ``Interactions.on_interaction`` (see module docstring); text is
    limited to 4000 characters (Discord's text input maximum).
    """
    if action is HumanAction.ANSWER:
        title, label, hint = "Answer the question", "Your answer (posted in the thread)", "The answer, in Markdown"
    else:
        title, label, hint = "Retry with a hint", "Hint for the next search", "e.g. look in the deployment runbook"
    custom_id = f"tw:m:{_CODES[action]}:{thread_key}" + (f":{interrupt_id}" if interrupt_id else "")
    modal = discord.ui.Modal(title=title, timeout=None, custom_id=custom_id)
    modal.add_item(
        discord.ui.TextInput(
            label=label,
            placeholder=hint,
            custom_id=TEXT_INPUT_ID,
            style=discord.TextStyle.paragraph,
            max_length=4000,
            required=True,
        )
    )
    return modal


def modal_text(interaction: discord.Interaction) -> str:
    """The text typed into a submitted help modal ('' if absent, or if the form's data is not
    shaped as Discord sends it: a forged or garbled submit reads as an empty form)."""
    data: dict[str, Any] = dict(interaction.data) if isinstance(interaction.data, dict) else {}  # a modal submit's data
    rows = data.get("components")
    for row in rows if isinstance(rows, list) else []:
        if not isinstance(row, dict):
            continue
        comps = row.get("components") if "components" in row else [row.get("component", row)]
        for comp in comps if isinstance(comps, list) else []:
            if isinstance(comp, dict) and comp.get("custom_id") == TEXT_INPUT_ID:
                return str(comp.get("value") or "").strip()
    return ""


VOTE_ID = r"tw:v:(?P<vote>[ud]):(?P<aid>[0-9a-f]{6,32})"
ESCALATE_ID = r"tw:ve:(?P<aid>[0-9a-f]{6,32})"
VOTE_REASON_ID = re.compile(r"tw:vr:(?P<aid>[0-9a-f]{6,32})")


class VoteButton(discord.ui.DynamicItem[discord.ui.Button], template=VOTE_ID):
    """👍 or 👎 under an answer (custom_id ``tw:v:<u|d>:<answer id>``, persistent across restarts)."""

    def __init__(self, vote: int, answer_id: str) -> None:
        up = vote > 0
        super().__init__(
            discord.ui.Button(
                label=vote_controls.UP_LABEL if up else vote_controls.DOWN_LABEL,
                style=discord.ButtonStyle.secondary,
                custom_id=f"tw:v:{'u' if up else 'd'}:{answer_id}",
            )
        )
        self.vote = vote_controls.UP if up else vote_controls.DOWN
        self.answer_id = answer_id

    @classmethod
    async def from_custom_id(
        cls, interaction: discord.Interaction, item: discord.ui.Item[Any], match: re.Match[str], /
    ) -> VoteButton:
        return cls(vote_controls.UP if match["vote"] == "u" else vote_controls.DOWN, match["aid"])

    async def callback(self, interaction: discord.Interaction) -> None:
        bot: ThreadwiseBot = interaction.client  # type: ignore[assignment]
        await bot.interactions.on_vote_button(interaction, self.vote, self.answer_id)


def vote_view(answer_id: str) -> discord.ui.View:
    """A persistent view (``timeout=None``) with the 👍 and 👎 buttons of one answer."""
    view = discord.ui.View(timeout=None)
    view.add_item(VoteButton(vote_controls.UP, answer_id))
    view.add_item(VoteButton(vote_controls.DOWN, answer_id))
    return view


def vote_reason_modal(answer_id: str) -> discord.ui.Modal:
    """The optional-reason modal a 👎 opens; its submit (``tw:vr:<answer id>``) is handled in
    ``Interactions.on_interaction``."""
    modal = discord.ui.Modal(title=vote_controls.REASON_TITLE, timeout=None, custom_id=f"tw:vr:{answer_id}")
    modal.add_item(
        discord.ui.TextInput(
            label=vote_controls.REASON_LABEL[:45],
            placeholder=vote_controls.REASON_PLACEHOLDER,
            custom_id=TEXT_INPUT_ID,
            style=discord.TextStyle.paragraph,
            max_length=vote_controls.REASON_MAX_CHARACTERS,
            required=False,
        )
    )
    return modal


class EscalateButton(discord.ui.DynamicItem[discord.ui.Button], template=ESCALATE_ID):
    """ "Ask the experts", offered privately after a 👎 (custom_id ``tw:ve:<answer id>``)."""

    def __init__(self, answer_id: str) -> None:
        super().__init__(
            discord.ui.Button(
                label=vote_controls.ESCALATE_LABEL, style=discord.ButtonStyle.primary, custom_id=f"tw:ve:{answer_id}"
            )
        )
        self.answer_id = answer_id

    @classmethod
    async def from_custom_id(
        cls, interaction: discord.Interaction, item: discord.ui.Item[Any], match: re.Match[str], /
    ) -> EscalateButton:
        return cls(match["aid"])

    async def callback(self, interaction: discord.Interaction) -> None:
        bot: ThreadwiseBot = interaction.client  # type: ignore[assignment]
        await bot.interactions.on_escalate_button(interaction, self.answer_id)


def escalate_view(answer_id: str) -> discord.ui.View:
    """The private offer's view: one "Ask the experts" button."""
    view = discord.ui.View(timeout=None)
    view.add_item(EscalateButton(answer_id))
    return view


def parse_vote_reason_id(custom_id: str) -> str | None:
    """The answer id of a 👎 reason modal's custom_id, or None."""
    m = VOTE_REASON_ID.fullmatch(custom_id)
    return m["aid"] if m else None
