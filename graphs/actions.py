"""Opposite actions: a question asking how to do one thing ("how do I install the agent?", "how do I
turn on single sign-on?") is not answered with how to undo it ("To remove it, run `pipx uninstall
...`", "Turning it off under Security ..."), which pages write right next to it.

Two actions are opposite when one is the other with the reversing prefix "un" ("install" and
"uninstall", "subscribe" and "unsubscribe", "lock" and "unlock": English makes the reverse of an action
this way), or when they are a pair of :data:`OPPOSITES`, the table of opposite verbs English does not
make with a prefix ("enable" and "disable", "add" and "remove", "turn on" and "turn off"). A verb that
names other things too is left out of the table ("open"/"close" of a lid, "show"/"hide" of hidden files,
"join"/"leave" of annual leave, "allow"/"block" of code blocks).
"""

from __future__ import annotations

import re
from functools import lru_cache

# Pairs of opposite actions English does not make with "un": each side a few verbs that do the same thing. A
# phrasal verb's particle may come after its object ("turn it off", "turn single sign-on off").
OPPOSITES: tuple[tuple[tuple[str, ...], tuple[str, ...]], ...] = (
    (("install",), ("uninstall", "remove", "deinstall", "purge")),
    (("enable", "turn on", "switch on", "activate"), ("disable", "turn off", "switch off", "deactivate")),
    (("add", "create"), ("remove", "delete")),
    (("start",), ("stop",)),
    (("connect",), ("disconnect",)),
    (("sign in", "log in", "login"), ("sign out", "log out", "logout")),
    (("upgrade",), ("downgrade",)),
    (("encrypt",), ("decrypt",)),
    (("grant",), ("revoke",)),
    (("opt in",), ("opt out",)),
)
# where a question names the action it asks how to do: after "how do I", "how to", "can I", "want to", "steps to"
# ... ("how do I install the agent?"), or first ("install the agent on linux"); the verb and the word after it
_FRAME = re.compile(
    r"(?:\bhow\s+(?:do|does|can|could|should|would)\s+(?:i|we|you|one)\s+|\bto\s+|\bcan\s+(?:i|we|you)\s+|(?P<first>^\W*))"
    r"(?:please\s+|also\s+|just\s+)?([a-z]+)(?=(?:\s+([a-z]+))?)",
    re.I,
)


def _pattern(verb: str) -> str:
    """A regular expression for ``verb`` in any of its forms ("remove": "removes", "removing", "removal",
    "removed"; "turn off": "turning it off"), a phrasal verb's particle up to three words after it."""
    words = verb.split()
    head = words[0][:-1] if words[0].endswith("e") and len(words[0]) > 4 else words[0]
    if len(words) == 1:
        return rf"\b{head}\w*"
    return rf"\b{head}\w*\s+(?:[\w-]+\s+){{0,3}}?{words[1]}\b"


@lru_cache(maxsize=256)
def _compiled(verbs: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile("|".join(_pattern(v) for v in verbs), re.I)


Action = tuple[tuple[str, ...], tuple[str, ...]]


def asked_action(question: str) -> Action | None:
    """The action ``question`` asks how to do and its opposite, each as the verbs that say it:
    ``(("install",), ("uninstall", "remove", ...))`` for "how do I install the scanner agent?",
    ``(("uninstall", "remove", ...), ("install",))`` for "how do I remove it?", ``(("unlock",), ("lock",))``
    for "how to unlock my account" (:data:`OPPOSITES`, else the reversing "un"); None when it names no
    action where a question asks for one (:data:`_FRAME`), or names the opposite too ("how do I remove the
    old version and install the new one?": both are asked)."""
    pairs = [*OPPOSITES, *((b, a) for a, b in OPPOSITES)]
    for m in _FRAME.finditer(question.lower()):
        verb, after = m.group(2), m.group(3) or ""
        action = next((p for p in pairs if f"{verb} {after}" in p[0]), None) or next(
            (p for p in pairs if verb in p[0]), None
        )
        if action is None and verb.startswith("un") and len(verb) > 5:  # the reverse English makes with "un"
            action = ((verb,), (verb[2:],))
        elif action is None and m.group("first") is None and len(verb) > 3:  # a verb where one is asked for
            action = ((verb,), (f"un{verb}",))
        if action is not None:
            return None if _compiled(action[1]).search(question) else action
    return None


def undoes(action: Action | None, text: str, heading: str = "") -> bool:
    """``text`` (a sentence, a list item; ``heading``: the heading it sits under) says how to do the
    opposite of ``action`` (:func:`asked_action`), not the action itself: "To remove it, run `pipx
    uninstall harbour-cli`." for "how do I install the harbour cli?", and any sentence under "## Turning
    off single sign-on" that does not say how to turn it on. A sentence naming both ("Remove the old
    version before you install the new one.") is part of doing the action."""
    if action is None:
        return False
    side, other = action
    does, opposite = _compiled(side), _compiled(other)
    if does.search(text):
        return False
    return bool(opposite.search(text)) or bool(heading and opposite.search(heading) and not does.search(heading))
