"""``threadwise feedback``: what the team thought of the answers.

Reads the votes from the bookkeeping database (:meth:`bot.storage.base.BookkeepingStore.feedback_rows`)
and summarises them per channel, per route and per cited source document, with the
worst-rated documents first; ``--json`` exports one row per voted answer in the eval
JSONL shape (README "Evaluation": ``id``, ``kind``, ``question``, ``history``,
``expected_route``, ``sources``, ``answer_facts``) plus the feedback fields, so a team can
turn downvoted answers into eval cases (fill in ``sources`` and ``answer_facts``).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

_KIND = {"vectorstore": "kb", "websearch": "web", "direct": "direct"}


def _tally() -> dict[str, int]:
    return {"up": 0, "down": 0}


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Vote counts from :meth:`~bot.storage.base.BookkeepingStore.feedback_rows` rows.

    Returns:
        ``{"answers": n voted answers, "up": n, "down": n, "by_channel": {channel: {"up", "down"}},
        "by_route": {...}, "by_source": {location: {...}}, "worst_sources": [(location, up, down)]}``;
        worst sources are those with more 👎 than 👍, most net 👎 first (ties by name).
        Channels without an id (console) are listed as ``platform``.
    """
    out: dict[str, Any] = {
        "answers": len({r["answer_id"] for r in rows}),
        "up": 0,
        "down": 0,
        "by_channel": defaultdict(_tally),
        "by_route": defaultdict(_tally),
        "by_source": defaultdict(_tally),
    }
    for r in rows:
        key = "up" if r["vote"] > 0 else "down"
        out[key] += 1
        out["by_channel"][f"{r['platform']}:{r['channel']}" if r["channel"] else r["platform"]][key] += 1
        out["by_route"][r["route"] or r["kind"]][key] += 1
        for s in r["sources"]:
            out["by_source"][s.get("location", "")][key] += 1
    for name in ("by_channel", "by_route", "by_source"):
        out[name] = dict(sorted(out[name].items()))
    out["worst_sources"] = sorted(
        ((loc, t["up"], t["down"]) for loc, t in out["by_source"].items() if t["down"] > t["up"]),
        key=lambda x: (x[1] - x[2], x[0]),
    )
    return out


def format_summary(summary: dict[str, Any], limit: int = 10) -> str:
    """The summary as plain text for a terminal (``limit`` worst documents)."""
    if not summary["answers"]:
        return "No votes yet. Every answer in Slack and Discord carries 👍 / 👎 buttons (console: /good, /bad)."
    lines = [f"{summary['answers']} answers voted on: {summary['up']} 👍, {summary['down']} 👎"]
    for title, key in (("Per channel", "by_channel"), ("Per route", "by_route"), ("Per source document", "by_source")):
        lines.append(f"\n{title}:")
        lines += [f"  {name or '(none)'}: {t['up']} 👍, {t['down']} 👎" for name, t in summary[key].items()]
    worst = summary["worst_sources"][:limit]
    lines.append("\nWorst-rated documents:" if worst else "\nNo document has more 👎 than 👍.")
    lines += [f"  {loc}: {down} 👎, {up} 👍" for loc, up, down in worst]
    return "\n".join(lines)


def export_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One object per voted answer, eval-shaped (see the module docstring), oldest first.

    Eval fields: ``id`` (the answer id), ``kind`` (kb, web, direct; ``human`` for an
    expert's answer), ``question`` (the standalone question), ``history`` ([]),
    ``expected_route`` (the route taken; for a downvoted answer check it), ``sources``
    ([]: the files that hold the right answer, to fill in), ``answer_facts`` ([]).
    Feedback fields: ``answer``, ``cited_sources`` (locations), ``path``, ``thread_key``,
    ``platform``, ``channel``, ``up``, ``down``, ``reasons`` (the 👎 reasons given), ``votes``
    (``[{"user_id", "vote", "reason"}]``).
    """
    by_answer: dict[str, dict[str, Any]] = {}
    for r in rows:
        item = by_answer.get(r["answer_id"])
        if item is None:
            item = by_answer[r["answer_id"]] = {
                "id": r["answer_id"],
                "kind": _KIND.get(r["route"], "human" if r["kind"] == "human" else "kb"),
                "question": r["question"],
                "history": [],
                "expected_route": r["route"] if r["route"] in _KIND else "vectorstore",
                "sources": [],
                "answer_facts": [],
                "answer": r["answer"],
                "cited_sources": [s.get("location", "") for s in r["sources"]],
                "path": r["path"],
                "thread_key": r["thread_key"],
                "platform": r["platform"],
                "channel": r["channel"],
                "up": 0,
                "down": 0,
                "reasons": [],
                "votes": [],
            }
        item["up" if r["vote"] > 0 else "down"] += 1
        if r["reason"]:
            item["reasons"].append(r["reason"])
        item["votes"].append({"user_id": r["user_id"], "vote": r["vote"], "reason": r["reason"]})
    return list(by_answer.values())
