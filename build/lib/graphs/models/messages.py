"""Message lists and replies, per provider's rules: a list every chat API accepts
(:func:`normalize_messages`), a reply cut at its token budget (:func:`cut_at_max_tokens`),
a refusal or content filter (:func:`refusal_of`)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage


def content_text(content: Any) -> str:
    """The text of a message's content (a string, or a list of text parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            p if isinstance(p, str) else str(p.get("text", "")) if isinstance(p, dict) else "" for p in content
        )
    return "" if content is None else str(content)


def _role(m: BaseMessage) -> str:
    role = getattr(m, "role", None) if m.type == "chat" else None
    return {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}.get(m.type, role or m.type)


def normalize_messages(messages: Sequence[BaseMessage], first_user: bool = False) -> list[BaseMessage]:
    """A message list every chat API we use accepts, built from any list.

    Mistral refuses with HTTP 400 a list where an assistant message has neither content
    nor tool calls, the last message is an assistant's, a tool call has no result (or a
    result no call), a system message is not first, or two messages of one role follow
    each other; Anthropic's Messages API takes the system prompt apart from the list, wants
    user and assistant turns to alternate starting with a user turn, and every tool use
    answered by a tool result in the next turn; Gemini also starts with a user turn. So:

    - system messages are merged into one, first (LangChain's Anthropic and Gemini
      clients move a leading system message to the request's system field);
    - assistant messages keep their text and only the tool calls whose results follow
      them (calls with unparsable arguments are dropped); with neither they are dropped;
    - tool results without their call are dropped, as are empty user messages;
    - consecutive user messages, and consecutive assistant messages, are merged;
    - with ``first_user`` (Anthropic, Gemini, Bedrock), assistant turns before the first
      user turn become part of it, quoted, so their context is kept;
    - trailing assistant messages are dropped (the list ends with a user or tool message).

    Messages come back as new objects with text content; the input is not changed.
    """
    system = "\n\n".join(t for m in messages if _role(m) == "system" and (t := content_text(m.content).strip()))
    rest = [m for m in messages if _role(m) != "system"]
    out: list[BaseMessage] = []
    i = 0
    while i < len(rest):
        m, role = rest[i], _role(rest[i])
        i += 1
        if role == "assistant":
            results: list[BaseMessage] = []
            while i < len(rest) and _role(rest[i]) == "tool":
                results.append(rest[i])
                i += 1
            answered = {getattr(r, "tool_call_id", None) for r in results}
            calls = [c for c in (getattr(m, "tool_calls", None) or []) if c.get("id") and c["id"] in answered]
            text = content_text(m.content).strip()
            if calls:
                out.append(AIMessage(content=text, tool_calls=calls))
                kept = {c["id"] for c in calls}
                for r in results:
                    if r.tool_call_id in kept:  # type: ignore[attr-defined]
                        kept.discard(r.tool_call_id)  # type: ignore[attr-defined]
                        out.append(
                            ToolMessage(
                                content=content_text(r.content).strip() or "(no output)",
                                tool_call_id=r.tool_call_id,  # type: ignore[attr-defined]
                                name=getattr(r, "name", None),
                            )
                        )
            elif text:
                out.append(AIMessage(content=text))
        elif role == "user":
            text = content_text(m.content).strip()
            if text:
                out.append(HumanMessage(content=text))
        # a tool result without its call, or an unknown role: dropped
    if first_user:
        lead = 0
        while lead < len(out) and isinstance(out[lead], AIMessage) and not out[lead].tool_calls:  # type: ignore[attr-defined]
            lead += 1
        if lead:
            quoted = "\n\n".join(f"(Earlier, the assistant said: {m.content})" for m in out[:lead])
            out = [HumanMessage(content=quoted), *out[lead:]]
    merged: list[BaseMessage] = []
    for m in out:
        prev = merged[-1] if merged else None
        if prev is not None and isinstance(m, HumanMessage) and isinstance(prev, HumanMessage):
            merged[-1] = HumanMessage(content=f"{prev.content}\n\n{m.content}")
        elif prev is not None and isinstance(m, AIMessage) and isinstance(prev, AIMessage) and not prev.tool_calls:
            text = "\n\n".join(t for t in (str(prev.content), str(m.content)) if t)
            merged[-1] = AIMessage(content=text, tool_calls=m.tool_calls) if m.tool_calls else AIMessage(content=text)
        else:
            merged.append(m)
    while merged and isinstance(merged[-1], AIMessage):
        merged.pop()
    if not merged or (first_user and not isinstance(merged[0], HumanMessage)):
        merged.insert(0, HumanMessage(content="(empty message)"))
    return ([SystemMessage(content=system)] if system else []) + merged


#: Where each provider says why a reply stopped (LangChain's ``response_metadata``):
#: OpenAI-compatible and Mistral ``finish_reason``, Anthropic ``stop_reason``, Ollama
#: ``done_reason``, Bedrock Converse ``stopReason``, Gemini ``finish_reason`` (upper case).
STOP_KEYS = ("finish_reason", "stop_reason", "done_reason", "stopReason")

#: Stop reasons that mean "ran out of tokens", not "done".
CUT_REASONS = frozenset({"length", "max_tokens", "model_length", "max_output_tokens"})

#: Stop reasons that mean "refused" or "filtered": OpenAI/Azure ``content_filter``,
#: Anthropic ``refusal``, Gemini ``SAFETY``/``RECITATION``/``PROHIBITED_CONTENT``/``BLOCKLIST``/
#: ``SPII``, Bedrock ``content_filtered``/``guardrail_intervened``.
REFUSAL_REASONS = frozenset(
    {
        "content_filter",
        "refusal",
        "safety",
        "recitation",
        "prohibited_content",
        "blocklist",
        "spii",
        "content_filtered",
        "guardrail_intervened",
    }
)


def stop_reason(message: BaseMessage) -> str:
    """Why the reply stopped, lower case ("" when the provider did not say)."""
    meta = getattr(message, "response_metadata", None) or {}
    for key in STOP_KEYS:
        value = meta.get(key)
        if value:
            return str(getattr(value, "name", value)).lower()
    return ""


def cut_at_max_tokens(message: BaseMessage) -> bool:
    """True when the completion stopped because it ran out of tokens, not because it was
    done: ``finish_reason`` ``length`` (OpenAI-compatible servers, Mistral, llama.cpp),
    ``model_length`` (Mistral: the context window is full), ``stop_reason`` ``max_tokens``
    (Anthropic, Bedrock), ``done_reason`` ``length`` (Ollama), ``MAX_TOKENS`` (Gemini)."""
    return stop_reason(message) in CUT_REASONS


def refusal_of(message: BaseMessage) -> str | None:
    """The provider's reason when the reply is a refusal or was stopped by a content
    filter (see :data:`REFUSAL_REASONS`; OpenAI's structured ``refusal`` field too), else None."""
    reason = stop_reason(message)
    if reason in REFUSAL_REASONS:
        return reason
    if (getattr(message, "additional_kwargs", None) or {}).get("refusal"):
        return "refusal"
    content = getattr(message, "content", None)
    if isinstance(content, list) and any(isinstance(p, dict) and p.get("type") == "refusal" for p in content):
        return "refusal"
    return None


_FENCE = re.compile(r"^\s*(```|~~~)", re.M)
CUT_SHORT_NOTE = "(answer cut short)"


def mark_cut_short(text: str) -> str:
    """Close a code fence left open by a cut and say that the answer was cut short."""
    text = text.rstrip()
    if not text:
        return ""
    fences = _FENCE.findall(text)
    if len(fences) % 2:
        text += "\n" + fences[-1]
    return f"{text}\n\n{CUT_SHORT_NOTE}"


def extract_json(text: str) -> str:
    """The first ``{...}`` object in ``text`` (models sometimes wrap JSON in prose or fences)."""
    text = text.strip()
    fence = re.search(r"```(?:json)?\s*(\{.*?\})\s*```", text, re.S)
    if fence:
        return fence.group(1)
    start = text.find("{")
    end = text.rfind("}")
    return text[start : end + 1] if start != -1 and end > start else text
