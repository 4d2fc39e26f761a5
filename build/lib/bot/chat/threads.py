"""The thread-key scheme of every platform: one conversation, one key (its checkpoint's ``thread_id``).

* Slack: ``slack:<team>:<channel>:<root ts>`` (the root ts is the thread's first message);
* Discord: ``discord:<guild id or dm>:<thread or DM channel id>`` (for a question answered in
  its channel: the question message's id, which its thread would have had);
* console: ``console:<name>``.

:func:`thread_key` builds a key from its fields, :func:`parse_thread_key` reads one back
(e.g. the thread of a stored answer, the team of a Slack help request, the channel of a
Discord conversation); a key of another shape is refused there, not guessed at.
"""

from __future__ import annotations

from dataclasses import dataclass

# fields after the platform name
FIELDS = {"slack": ("team", "channel", "root"), "discord": ("guild", "channel"), "console": ("name",)}


@dataclass(frozen=True)
class ThreadKey:
    """A parsed thread key.

    Attributes:
        platform: ``"slack"``, ``"discord"`` or ``"console"``.
        fields: the parts after the platform, as named in :data:`FIELDS`.
    """

    platform: str
    fields: tuple[str, ...]

    def __getitem__(self, name: str) -> str:
        """A field by its name in :data:`FIELDS` (``key["channel"]``)."""
        return self.fields[FIELDS[self.platform].index(name)]

    def __str__(self) -> str:
        return ":".join((self.platform, *self.fields))


def thread_key(platform: str, *fields: str | int) -> str:
    """The key of a conversation, e.g. ``thread_key("discord", "dm", 42) == "discord:dm:42"``.

    Raises:
        ValueError: an unknown platform, the wrong number of fields, or a field holding ``:``.
    """
    parts = tuple(str(f) for f in fields)
    if platform not in FIELDS or len(parts) != len(FIELDS[platform]) or any(":" in p for p in parts):
        raise ValueError(f"not a {platform} thread key: {parts!r} (fields: {FIELDS.get(platform)})")
    return ":".join((platform, *parts))


def parse_thread_key(key: str) -> ThreadKey | None:
    """The platform and fields of ``key``; None when it is not a key of the scheme above
    (unknown platform, wrong number of fields, an empty field)."""
    platform, _, rest = str(key).partition(":")
    fields = tuple(rest.split(":")) if rest else ()
    if platform not in FIELDS or len(fields) != len(FIELDS[platform]) or not all(fields):
        return None
    return ThreadKey(platform, fields)
