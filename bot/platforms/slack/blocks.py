"""Block Kit payloads for Slack: answers, help requests with buttons, modals.

Limits from the Block Kit reference (https://docs.slack.dev/reference/block-kit):
section text <= 3000 characters, <= 50 blocks per message, button value <= 2000
characters, modal title <= 24 characters, view private_metadata <= 3000 characters,
plain_text_input max_length <= 3000.

A help request's buttons carry a :class:`HelpRef` (JSON in the button value, then in the
modal's private_metadata) that says which run to resume and which message shows the
question's status reaction; nothing about it is kept in memory, so buttons keep
working after a restart.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

from bot.chat import sources, vote_controls
from bot.chat.help import HELP_LEAD, how_to_answer
from bot.chat.sources import SourceLine
from bot.chat.text import Mention, Part
from bot.platforms.slack.format import (
    escape,
    escape_code,
    markdown_to_mrkdwn,
    slack_link,
    slack_mention,
    split_mrkdwn,
    to_mrkdwn,
)
from bot.protocol import Answer, HelpRequest, HumanAction

MAX_BLOCKS = 50
ACTION_ANSWER = "threadwise_answer"
ACTION_RETRY = "threadwise_retry"
ACTION_DISMISS = "threadwise_dismiss"
MODAL_ANSWER = "threadwise_answer_modal"
MODAL_RETRY = "threadwise_retry_modal"
ACTION_VOTE_UP = "threadwise_vote_up"
ACTION_VOTE_DOWN = "threadwise_vote_down"
MODAL_VOTE_REASON = "threadwise_vote_reason"
ACTION_VOTE_ESCALATE = "threadwise_vote_experts"
FEEDBACK_BLOCK = "threadwise_feedback"
HELP_BLOCK = "threadwise_help"
INPUT_BLOCK = "threadwise_text"
INPUT_ACTION = "text"
_PREVIEW = 200


@dataclass(frozen=True)
class HelpRef:
    """What a help request's buttons refer to.

    Attributes:
        thread_key: the paused run's thread (``slack:<team>:<channel>:<root ts>``).
        channel: channel id. root: the thread's root ts.
        question_ts: ts of the user's message that carries the status reaction.
        interrupt_id: the LangGraph interrupt the request is about ("" if unknown), so a
            button of an older help request cannot resume a newer one.
        help_ts: ts of the help request message (known once posted; "" in button values).
    """

    thread_key: str
    channel: str
    root: str
    question_ts: str
    interrupt_id: str = ""
    help_ts: str = ""

    def dumps(self) -> str:
        """Compact JSON (fits a button value, at most 2000 characters)."""
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def loads(cls, raw: str) -> HelpRef:
        """Parse a button value / private_metadata. Raises ValueError when it is not ours."""
        try:
            data = json.loads(raw)
            return cls(
                **{k: str(data[k]) for k in ("thread_key", "channel", "root", "question_ts")},
                interrupt_id=str(data.get("interrupt_id", "")),
                help_ts=str(data.get("help_ts", "")),
            )
        except (TypeError, KeyError, json.JSONDecodeError) as exc:
            raise ValueError(f"not a Threadwise help reference: {raw[:80]!r}") from exc


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def _context(text: str) -> dict[str, Any]:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": text[:3000]}]}


def _preview(mrkdwn: str) -> str:
    flat = " ".join(mrkdwn.replace("```", " ").split())
    return flat if len(flat) <= _PREVIEW else flat[: _PREVIEW - 1].rstrip() + "…"


def _source_line(src: SourceLine) -> str:
    if src.is_url:
        return f"{src.number}. {slack_link(src.location, src.label)}"
    loc = escape_code(src.location.replace("`", "'"))
    return f"{src.number}. `{loc}`" + (f" — {escape(src.title)}" if src.title else "")


def sources_mrkdwn(answer: Answer) -> str:
    """The numbered source list (:mod:`bot.chat.sources`): URLs as ``<url|title>`` links,
    files as ``path`` code + title."""
    return "\n".join(sources.render(answer, _source_line, lambda heading: f"*{heading}*"))


def answer_messages(answer: Answer, *, max_section: int, max_message: int) -> list[dict[str, Any]]:
    """Render an answer as one or more ``chat.postMessage`` payloads (``text`` + ``blocks``).

    The Markdown is converted to mrkdwn and split into sections of at most
    ``max_section`` characters (Slack: 3000); sections are packed in order into messages
    of at most ``max_message`` characters and 50 blocks. The sources and a context line
    with ``answer.route_note`` close the last message.

    Returns:
        A list of ``{"text": fallback, "blocks": [...]}``, at least one.
    """
    body = split_mrkdwn(markdown_to_mrkdwn(answer.text), max_section) or [" "]
    footer = split_mrkdwn(sources_mrkdwn(answer), max_section)
    note = sources.footer(answer).note
    blocks: list[dict[str, Any]] = [_section(t) for t in body + footer]
    if note:
        blocks.append(_context(f"_{escape(note)}_"))
    if answer.answer_id:
        blocks.append(feedback_block(answer.answer_id))

    messages: list[list[dict[str, Any]]] = [[]]
    size = 0
    for block in blocks:
        length = block_length(block)
        if messages[-1] and (size + length > max_message or len(messages[-1]) >= MAX_BLOCKS):
            messages.append([])
            size = 0
        messages[-1].append(block)
        size += length
    out = []
    for n, msg_blocks in enumerate(messages):
        first = next((b["text"]["text"] for b in msg_blocks if b["type"] == "section"), note)
        prefix = "" if n == 0 else f"({n + 1}/{len(messages)}) "
        out.append({"text": prefix + _preview(first), "blocks": msg_blocks})
    return out


def block_length(block: dict[str, Any]) -> int:
    """Characters of readable text in a section, context or actions block."""
    if block.get("type") == "section":
        return len(block["text"]["text"])
    if block.get("type") == "context":
        return len(block["elements"][0]["text"])
    return 0


def block_plain_text(block: dict[str, Any]) -> str:
    """The mrkdwn text of a section or context block ("" for others, e.g. buttons)."""
    if block.get("type") == "section":
        return str(block["text"]["text"])
    if block.get("type") == "context":
        return str(block["elements"][0]["text"])
    return ""


def feedback_block(answer_id: str) -> dict[str, Any]:
    """The 👍 / 👎 buttons under an answer; both carry the answer id as their value."""
    return {
        "type": "actions",
        "block_id": FEEDBACK_BLOCK,
        "elements": [
            {
                "type": "button",
                "action_id": ACTION_VOTE_UP,
                "value": answer_id,
                "text": {"type": "plain_text", "text": vote_controls.UP_LABEL, "emoji": True},
            },
            {
                "type": "button",
                "action_id": ACTION_VOTE_DOWN,
                "value": answer_id,
                "text": {"type": "plain_text", "text": vote_controls.DOWN_LABEL, "emoji": True},
            },
        ],
    }


def escalate_offer_blocks(answer_id: str, text: str = vote_controls.ESCALATE_OFFER) -> list[dict[str, Any]]:
    """The private offer after a 👎: ``text`` (Markdown) and an "Ask the experts" button (value: the answer id)."""
    return [
        _section(escape(text)),
        {
            "type": "actions",
            "block_id": "threadwise_escalate",
            "elements": [
                {
                    "type": "button",
                    "action_id": ACTION_VOTE_ESCALATE,
                    "value": answer_id,
                    "text": {"type": "plain_text", "text": vote_controls.ESCALATE_LABEL},
                }
            ],
        },
    ]


def vote_reason_modal(answer_id: str) -> dict[str, Any]:
    """The modal a 👎 opens: an optional reason (views.open ``view``); private_metadata is the answer id."""
    return {
        "type": "modal",
        "callback_id": MODAL_VOTE_REASON,
        "title": {"type": "plain_text", "text": vote_controls.REASON_TITLE[:24]},
        "submit": {"type": "plain_text", "text": "Send"},
        "close": {"type": "plain_text", "text": "Skip"},
        "private_metadata": answer_id,
        "blocks": [
            {
                "type": "input",
                "block_id": INPUT_BLOCK,
                "optional": True,
                "label": {"type": "plain_text", "text": vote_controls.REASON_LABEL},
                "element": {
                    "type": "plain_text_input",
                    "action_id": INPUT_ACTION,
                    "multiline": True,
                    "max_length": vote_controls.REASON_MAX_CHARACTERS,
                    "placeholder": {"type": "plain_text", "text": vote_controls.REASON_PLACEHOLDER},
                },
            }
        ],
    }


def expert_mentions(ids: list[str]) -> list[Mention]:
    """:class:`Mention` parts for ``[slack] experts``: user ids (``U…``/``W…``) and user
    group ids (``S…``), in order, without duplicates or blanks."""
    out: list[Mention] = []
    for raw in ids:
        i = raw.strip().lstrip("@")
        if i:
            m = Mention(i, "group" if i.startswith("S") else "user")
            if m not in out:
                out.append(m)
    return out


def mentions(ids: list[str]) -> str:
    """Slack mentions for user ids (``<@U1>``) and user group ids (``<!subteam^S1>``)."""
    return " ".join(slack_mention(m) for m in expert_mentions(ids))


def _question_block(question: str) -> dict[str, Any]:
    quoted = "\n".join("> " + line for line in escape(question.strip()).splitlines()[:20]) or "> (no text)"
    return _section(quoted[:2900])


def help_request_message(
    request: HelpRequest, *, experts: list[str], ref: HelpRef, timeout_text: str = ""
) -> dict[str, Any]:
    """The help request posted in the thread: mentions, question, reason, attempts, buttons.

    Args:
        request: the service's help request.
        experts: ids to mention (users ``U...``/``W...`` or user groups ``S...``).
        ref: what the buttons resume (its ``help_ts`` is ignored here).
        timeout_text: e.g. ``"1 h"`` (:func:`bot.chat.help.duration`); when given, says
            how long the request stays open (:func:`bot.chat.help.expiry_note`).
    """
    who = mentions(experts) or to_mrkdwn("(no experts are configured: set `[slack] experts` in config.toml)")
    lead = f":raising_hand: {who} {to_mrkdwn(HELP_LEAD)}"
    details = []
    if request.reason:
        details.append(f"*Why:* {escape(request.reason)}")
    if request.attempts:
        details.append("*Tried:*\n" + "\n".join(f"• {escape(a)}" for a in request.attempts[:10]))
    value = HelpRef(ref.thread_key, ref.channel, ref.root, ref.question_ts, ref.interrupt_id).dumps()
    hint = markdown_to_mrkdwn(how_to_answer("in this thread", timeout_text))
    blocks = [_section(lead), _question_block(request.question)]
    if details:
        blocks.append(_section("\n".join(details)[:3000]))
    blocks.append(
        {
            "type": "actions",
            "block_id": HELP_BLOCK,
            "elements": [
                {
                    "type": "button",
                    "action_id": ACTION_ANSWER,
                    "style": "primary",
                    "value": value,
                    "text": {"type": "plain_text", "text": "Answer"},
                },
                {
                    "type": "button",
                    "action_id": ACTION_RETRY,
                    "value": value,
                    "text": {"type": "plain_text", "text": "Retry with hint"},
                },
                {
                    "type": "button",
                    "action_id": ACTION_DISMISS,
                    "style": "danger",
                    "value": value,
                    "text": {"type": "plain_text", "text": "Dismiss"},
                },
            ],
        }
    )
    blocks.append(_context(hint))
    text = f"{who} help needed: {_preview(escape(request.question))}"
    return {"text": text, "blocks": blocks}


def help_handled_message(question_block: dict[str, Any] | None, note: list[Part]) -> dict[str, Any]:
    """The help request after a human took it: the question, no buttons, who did what
    (``note``: :func:`bot.chat.help.handled_note`)."""
    text = to_mrkdwn(note)
    blocks = ([question_block] if question_block else []) + [_context(f":white_check_mark: {text}")]
    return {"text": text, "blocks": blocks}


def question_block_of(blocks: list[dict[str, Any]] | None) -> dict[str, Any] | None:
    """The quoted-question section of a help request (or of its modal), if present."""
    for b in blocks or []:
        text = b.get("text") if isinstance(b, dict) else None
        if isinstance(text, dict) and b.get("type") == "section" and str(text.get("text", "")).startswith(">"):
            return {"type": "section", "text": {"type": "mrkdwn", "text": str(text["text"])}}
    return None


def help_modal(action: HumanAction, ref: HelpRef, question_block: dict[str, Any] | None) -> dict[str, Any]:
    """The modal opened by "Answer" or "Retry with hint" (views.open ``view``)."""
    answer = action == HumanAction.ANSWER
    blocks = [question_block] if question_block else []
    blocks.append(
        {
            "type": "input",
            "block_id": INPUT_BLOCK,
            "label": {"type": "plain_text", "text": "Your answer" if answer else "A hint for the search"},
            "element": {
                "type": "plain_text_input",
                "action_id": INPUT_ACTION,
                "multiline": answer,
                "max_length": 3000,
                "placeholder": {
                    "type": "plain_text",
                    "text": (
                        "Posted in the thread as the answer"
                        if answer
                        else "e.g. look in the deployment runbook, it's called 'rollout'"
                    ),
                },
            },
        }
    )
    return {
        "type": "modal",
        "callback_id": MODAL_ANSWER if answer else MODAL_RETRY,
        "title": {"type": "plain_text", "text": "Answer the question" if answer else "Retry with a hint"},
        "submit": {"type": "plain_text", "text": "Post answer" if answer else "Retry"},
        "close": {"type": "plain_text", "text": "Cancel"},
        "private_metadata": ref.dumps(),
        "blocks": blocks,
    }


def modal_text(view: dict[str, Any]) -> str:
    """The text typed into a submitted help modal ("" when missing)."""
    values = (view.get("state") or {}).get("values") or {}
    return str(((values.get(INPUT_BLOCK) or {}).get(INPUT_ACTION) or {}).get("value") or "").strip()
