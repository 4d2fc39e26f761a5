"""The shape of what Slack sends, checked once before bolt or a listener reads it.

Slack documents each request kind's fields (Events API envelopes, interaction payloads,
slash commands: https://api.slack.com/interactivity/handling#payloads); bolt and our
listeners index into them (``body["actions"][0]``, ``view["callback_id"]``, a help button's
JSON value). A correctly signed request whose body does not have that shape made bolt answer
500 with a traceback; :func:`payload_problem` names what is wrong instead, and the HTTP
server (:mod:`bot.platforms.slack.http_server`) and Socket Mode (:mod:`bot.platforms.slack.run`)
refuse such a request with one log line.
"""

from __future__ import annotations

from typing import Any

from bot.platforms.slack.blocks import (
    ACTION_ANSWER,
    ACTION_DISMISS,
    ACTION_RETRY,
    MODAL_ANSWER,
    MODAL_RETRY,
    HelpRef,
)

_HELP_ACTIONS = {ACTION_ANSWER, ACTION_RETRY, ACTION_DISMISS}
_HELP_MODALS = {MODAL_ANSWER, MODAL_RETRY}
_INTERACTIONS = {
    "block_actions",
    "view_submission",
    "view_closed",
    "shortcut",
    "message_action",
    "block_suggestion",
    "interactive_message",
    "dialog_submission",
}


def _is_str(value: Any) -> bool:
    return isinstance(value, str)


def _dict_or_missing(body: dict[str, Any], key: str) -> bool:
    return body.get(key) is None or isinstance(body.get(key), dict)


def _help_ref_problem(raw: Any, where: str) -> str:
    try:
        HelpRef.loads(raw if _is_str(raw) else "")
    except ValueError:
        return f"{where} is not a help request reference"
    return ""


def _action_problem(body: dict[str, Any]) -> str:
    actions = body.get("actions")
    if not isinstance(actions, list) or not actions:
        return "actions is not a non-empty list"
    for action in actions:
        if not isinstance(action, dict) or not _is_str(action.get("action_id")):
            return "an action has no action_id"
        if action.get("value") is not None and not _is_str(action.get("value")):
            return "an action's value is not text"
    message = body.get("message") or {}
    if not isinstance(message, dict) or not isinstance(message.get("blocks") or [], list):
        return "message is not a message with blocks"
    for action in actions:
        if action["action_id"] in _HELP_ACTIONS:
            problem = _help_ref_problem(action.get("value"), "a help button's value")
            if problem:
                return problem
    return ""


def _view_problem(body: dict[str, Any]) -> str:
    view = body.get("view")
    if not isinstance(view, dict) or not _is_str(view.get("callback_id")) or not _is_str(view.get("type")):
        return "view is not a view with a type and a callback_id"
    state = view.get("state")
    if state is not None and not (isinstance(state, dict) and isinstance(state.get("values") or {}, dict)):
        return "view.state is not a form state"
    if not isinstance(view.get("blocks") or [], list):
        return "view.blocks is not a list"
    if view.get("private_metadata") is not None and not _is_str(view.get("private_metadata")):
        return "view.private_metadata is not text"
    if body.get("type") == "view_submission" and view["callback_id"] in _HELP_MODALS:
        return _help_ref_problem(view.get("private_metadata"), "a help form's private_metadata")
    return ""


def payload_problem(body: Any) -> str:
    """What is wrong with the shape of a parsed Slack request body ("" when nothing is).

    Args:
        body: the request body as bolt parses it (the JSON of an Events API request, the
            ``payload`` JSON of an interaction, the form fields of a slash command).

    Returns:
        A short reason naming the field (no user text in it), or "" when the body has the
        fields bolt and our listeners read, in the types Slack documents.
    """
    if not isinstance(body, dict):
        return f"the body is {type(body).__name__}, not an object"
    kind = body.get("type")
    if kind is not None and not _is_str(kind):
        return "type is not text"
    if not _dict_or_missing(body, "user") and not _is_str(body.get("user")):
        return "user is neither an object nor an id"
    if kind in _INTERACTIONS and not isinstance(body.get("user"), dict):
        return "user is not an object"
    if not _dict_or_missing(body, "team") or not _dict_or_missing(body, "channel"):
        return "team or channel is not an object"
    if kind in ("block_actions", "interactive_message"):
        return _action_problem(body)
    if kind in ("view_submission", "view_closed"):
        return _view_problem(body)
    if kind in ("shortcut", "message_action", "dialog_submission") and not _is_str(body.get("callback_id")):
        return "callback_id is missing"
    if kind == "block_suggestion" and not _is_str(body.get("action_id")):
        return "action_id is missing"
    if kind == "event_callback":
        event = body.get("event")
        if not isinstance(event, dict) or not _is_str(event.get("type")):
            return "event is not an event with a type"
        if not isinstance(body.get("authorizations") or [], list):
            return "authorizations is not a list"
    if kind == "url_verification" and not _is_str(body.get("challenge")):
        return "challenge is missing"
    if kind is None and "command" in body and not _is_str(body.get("command")):
        return "command is not text"
    return ""
