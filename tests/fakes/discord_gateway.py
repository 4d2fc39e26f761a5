"""A local fake of Discord's gateway (websocket) and REST API that discord.py connects to for real.

One aiohttp server on 127.0.0.1 serves both:

* ``ws://127.0.0.1:PORT/gateway`` - the gateway: HELLO (op 10) -> IDENTIFY (op 2) -> READY and
  GUILD_CREATE, heartbeats (op 1 -> op 11), then whatever a test dispatches (MESSAGE_CREATE,
  INTERACTION_CREATE, THREAD_CREATE...). If ``refuse_message_content`` is set, an IDENTIFY that
  asks for the privileged MESSAGE_CONTENT intent (1 << 15) is closed with code 4014 like Discord
  does for an application whose intent is not enabled in the developer portal.
* ``http://127.0.0.1:PORT/api/v10`` - the REST endpoints the bot uses: login, application info,
  application commands, messages (create/edit), reactions, threads, typing, DM channels and
  interaction callbacks/webhooks. Every request is recorded in :attr:`FakeDiscord.requests`;
  responses carry ``Content-Type: application/json`` exactly (discord.py only parses that) and
  Discord-style rate-limit headers for channel messages.

Like Discord, the gateway echoes the bot's own messages (MESSAGE_CREATE with the bot as author)
and sends THREAD_CREATE when the bot starts a thread, and - when the session has no
MESSAGE_CONTENT intent - blanks the content of guild messages that do not mention the bot.

Payload shapes follow https://discord.com/developers/docs (Gateway Events, Message, Channel,
Interaction objects) with only the fields discord.py 2.7 needs.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import itertools
import json
import re
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web

from tests.fakes import write_platform_config

MESSAGE_CONTENT_INTENT = 1 << 15
PERM_ALL_TEXT = (1 << 11) | (1 << 10) | (1 << 6) | (1 << 16) | (1 << 38) | (1 << 35)  # send/view/react/history/threads
PERM_MANAGE_GUILD = 1 << 5

_ids = itertools.count(1_200_000_000_000_000_000)


def snowflake() -> str:
    """A fresh, increasing Discord-style id (as the API sends them: a decimal string)."""
    return str(next(_ids))


def _now() -> str:
    return _dt.datetime.now(_dt.UTC).isoformat()


def user_payload(user_id: str, name: str, *, bot: bool = False) -> dict[str, Any]:
    """A Discord User object."""
    return {
        "id": user_id,
        "username": name,
        "global_name": name,
        "discriminator": "0",
        "avatar": None,
        "bot": bot,
        "public_flags": 0,
    }


@dataclass
class Request:
    """One REST request as it reached the fake: method, path under /api/v10, JSON body, status."""

    method: str
    path: str
    body: Any
    status: int = 200
    at: float = field(default_factory=time.monotonic)


@dataclass
class FakeUser:
    id: str
    name: str
    roles: list[str] = field(default_factory=list)
    bot: bool = False

    @property
    def payload(self) -> dict[str, Any]:
        return user_payload(self.id, self.name, bot=self.bot)

    def member(self) -> dict[str, Any]:
        return {"roles": list(self.roles), "joined_at": _now(), "deaf": False, "mute": False, "flags": 0, "nick": None}


class FakeDiscord:
    """The fake Discord: start() it, point discord.py at :attr:`rest_base` and :attr:`gateway_url`.

    Attributes:
        requests: every REST request received, in arrival order.
        identifies: the ``d`` of every IDENTIFY received (``intents`` is an int bit field).
        messages: channel id -> messages created by the bot there (Message payloads), in order.
        threads: thread id -> the Channel payload of threads created through REST.
        reaction_failures: ``(message_id or "*", emoji or "*") -> (status, code)`` answers to
            make reaction PUT/DELETE calls fail, e.g. ``{("*", "*"): (403, 50013)}``.
        message_rate: ``(limit, window seconds)`` for POST messages per channel, with Discord's
            X-RateLimit headers; a request over the limit gets a 429.
        close_codes: gateway close codes the fake sent (4014 refused intent, 4004 bad token).
        interaction_callbacks: interaction responses (``type`` 4 message, 5 deferred,
            6 deferred update, 9 modal; ``data`` as sent).
        followups: interaction follow-up messages (webhook POSTs).
    """

    API = "/api/v10"
    TOKEN = "fake-discord-token-SECRET"

    def __init__(self, *, refuse_message_content: bool = False, message_rate: tuple[int, float] = (5, 1.0)) -> None:
        self.refuse_message_content = refuse_message_content
        self.message_rate = message_rate
        self.bot = FakeUser(snowflake(), "threadwise", bot=True)
        self.application_id = snowflake()
        self.guild_id = snowflake()
        self.channel_id = snowflake()
        self.owner = FakeUser(snowflake(), "olive-owner")
        self.expert_role_id = snowflake()
        self.admin_role_id = snowflake()
        self.manager_role_id = snowflake()
        self.bot_role_id = snowflake()  # the bot's managed ("integration") role
        self.users: dict[str, FakeUser] = {self.bot.id: self.bot, self.owner.id: self.owner}
        self.requests: list[Request] = []
        self.identifies: list[dict[str, Any]] = []
        self.messages: dict[str, list[dict[str, Any]]] = {}
        self.all_messages: dict[str, dict[str, Any]] = {}
        self.threads: dict[str, dict[str, Any]] = {}
        self.dm_channels: dict[str, str] = {}  # user id -> DM channel id
        self.reaction_failures: dict[tuple[str, str], tuple[int, int]] = {}
        self.interaction_callbacks: list[dict[str, Any]] = []
        self.close_codes: list[int] = []
        self.followups: list[dict[str, Any]] = []  # interaction follow-up messages
        self.dms_closed: set[str] = set()  # user ids who do not accept DMs from the bot (403 50007)
        self.threads_forbidden = False  # starting a thread answers 403 50013 Missing Permissions
        self.create_thread_delay = 0.0  # seconds between THREAD_CREATE and the REST reply of create_thread
        # channel id or "*" -> (status, code): POST messages there fail (e.g. (403, 50001))
        self.message_failures: dict[str, tuple[int, int]] = {}
        self._original: dict[str, dict[str, Any]] = {}  # interaction token -> original response
        self._command_ids: dict[str, str] = {}  # registered application command name -> id
        self._rate_windows: dict[str, list[float]] = {}
        self._ws: web.WebSocketResponse | None = None
        self._ws_lock = asyncio.Lock()
        self._seq = 0
        self._session_intents = 0
        self._ready = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self._changed = asyncio.Condition()
        self.port = 0

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> FakeDiscord:
        app = web.Application()
        app.router.add_get("/gateway", self._gateway)
        app.router.add_route("*", self.API + "/{tail:.*}", self._rest)
        self._runner = web.AppRunner(app, handle_signals=False, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def close(self) -> None:
        if self._ws is not None and not self._ws.closed:
            await self._ws.close()
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def rest_base(self) -> str:
        return f"http://127.0.0.1:{self.port}{self.API}"

    @property
    def gateway_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/gateway"

    # ------------------------------------------------------------------ people
    def add_user(self, name: str, *, roles: list[str] | None = None, bot: bool = False) -> FakeUser:
        """A guild member (present in GUILD_CREATE if added before the bot connects)."""
        user = FakeUser(snowflake(), name, list(roles or []), bot)
        self.users[user.id] = user
        return user

    def guild_payload(self) -> dict[str, Any]:
        """GUILD_CREATE data: one text channel, roles (everyone, expert, admin, manager), members."""
        everyone = {"id": self.guild_id, "name": "@everyone", "permissions": str(PERM_ALL_TEXT)}
        roles = [
            everyone,
            {"id": self.expert_role_id, "name": "experts", "permissions": "0"},
            {"id": self.admin_role_id, "name": "bot-admins", "permissions": "0"},
            {"id": self.manager_role_id, "name": "managers", "permissions": str(PERM_MANAGE_GUILD)},
            {
                "id": self.bot_role_id,
                "name": "threadwise",
                "permissions": str(PERM_ALL_TEXT),
                "managed": True,
                "tags": {"bot_id": self.bot.id},
            },
        ]
        for i, role in enumerate(roles):
            role.setdefault("managed", False)
            role.update(position=i, color=0, hoist=False, mentionable=True, flags=0)
        channel = {
            "id": self.channel_id,
            "type": 0,
            "guild_id": self.guild_id,
            "name": "general",
            "position": 0,
            "permission_overwrites": [],
            "nsfw": False,
            "parent_id": None,
            "topic": None,
            "rate_limit_per_user": 0,
            "last_message_id": None,
        }
        return {
            "id": self.guild_id,
            "name": "Fake Guild",
            "owner_id": self.owner.id,
            "unavailable": False,
            "member_count": len(self.users),
            "large": False,
            "roles": roles,
            "channels": [channel],
            "threads": [t for t in self.threads.values() if not t["thread_metadata"]["archived"]],
            "members": [dict(u.member(), user=u.payload) for u in self.users.values()],
            "emojis": [],
            "stickers": [],
            "features": [],
            "voice_states": [],
            "presences": [],
            "stage_instances": [],
            "guild_scheduled_events": [],
            "soundboard_sounds": [],
            "joined_at": _now(),
            "preferred_locale": "en-US",
        }

    # ------------------------------------------------------------------ gateway
    async def _gateway(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        self._ws = ws
        self._ready.clear()
        await ws.send_str(json.dumps({"op": 10, "d": {"heartbeat_interval": 41250}, "s": None, "t": None}))
        async for msg in ws:
            if msg.type != WSMsgType.TEXT:
                continue
            payload = json.loads(msg.data)
            op = payload.get("op")
            if op == 1:
                await self._send({"op": 11, "d": None, "s": None, "t": None})
            elif op == 2:
                if payload["d"].get("token") != self.TOKEN:
                    self.close_codes.append(4004)
                    await ws.close(code=4004, message=b"Authentication failed.")
                    break
                await self._identify(ws, payload["d"])
            elif op == 6:  # RESUME: we keep no session; ask for a fresh IDENTIFY
                await self._send({"op": 9, "d": False, "s": None, "t": None})
        return ws

    async def _identify(self, ws: web.WebSocketResponse, data: dict[str, Any]) -> None:
        self.identifies.append(data)
        intents = int(data.get("intents", 0))
        if self.refuse_message_content and intents & MESSAGE_CONTENT_INTENT:
            self.close_codes.append(4014)
            await ws.close(code=4014, message=b"Disallowed intent(s).")
            return
        self._session_intents = intents
        self._seq = 0
        await self.dispatch(
            "READY",
            {
                "v": 10,
                "user": self.bot.payload,
                "guilds": [{"id": self.guild_id, "unavailable": True}],
                "session_id": snowflake(),
                "resume_gateway_url": self.gateway_url,
                "application": {"id": self.application_id, "flags": 0},
                "private_channels": [],
                "relationships": [],
            },
        )
        await self.dispatch("GUILD_CREATE", self.guild_payload())
        self._ready.set()

    async def wait_identified(self, timeout: float = 5.0) -> None:
        """Wait until a session is READY (GUILD_CREATE sent)."""
        await asyncio.wait_for(self._ready.wait(), timeout)

    @property
    def has_message_content(self) -> bool:
        return bool(self._session_intents & MESSAGE_CONTENT_INTENT)

    async def _send(self, payload: dict[str, Any]) -> None:
        if self._ws is None or self._ws.closed:
            raise RuntimeError("no gateway session")
        async with self._ws_lock:
            await self._ws.send_str(json.dumps(payload))

    async def dispatch(self, event: str, data: dict[str, Any]) -> None:
        """Send a DISPATCH (op 0) event to the connected bot."""
        self._seq += 1
        await self._send({"op": 0, "t": event, "s": self._seq, "d": data})

    # ------------------------------------------------------------------ events a test sends
    def message_payload(
        self,
        author: FakeUser,
        content: str,
        *,
        channel_id: str | None = None,
        guild: bool = True,
        mentions: list[FakeUser] | None = None,
        message_type: int = 0,
        webhook_id: str | None = None,
        message_id: str | None = None,
        reply_to: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """A Message object as Discord sends it in MESSAGE_CREATE (``reply_to``: the message
        it replies to, sent as ``message_reference`` + ``referenced_message``, type 19)."""
        data: dict[str, Any] = {
            "id": message_id or snowflake(),
            "channel_id": channel_id or self.channel_id,
            "author": author.payload,
            "content": content,
            "timestamp": _now(),
            "edited_timestamp": None,
            "tts": False,
            "mention_everyone": False,
            "mentions": [dict(u.payload, member=u.member()) if guild else u.payload for u in (mentions or [])],
            "mention_roles": re.findall(r"<@&(\d+)>", content),
            "attachments": [],
            "embeds": [],
            "pinned": False,
            "type": message_type,
            "flags": 0,
            "components": [],
        }
        if guild:
            data["guild_id"] = self.guild_id
            data["member"] = author.member()
        if webhook_id:
            data["webhook_id"] = webhook_id
        if reply_to is not None:
            data["type"] = 19
            data["message_reference"] = {
                "type": 0,
                "message_id": reply_to["id"],
                "channel_id": reply_to["channel_id"],
                "guild_id": reply_to.get("guild_id"),
            }
            referenced = {
                k: v
                for k, v in reply_to.items()
                if k not in ("referenced_message", "posted_components", "allowed_mentions")
            }
            data["referenced_message"] = referenced
        return data

    async def send_message(
        self,
        author: FakeUser,
        content: str,
        *,
        channel_id: str | None = None,
        dm: bool = False,
        mention_bot: bool | None = None,
        message_type: int = 0,
        message_id: str | None = None,
        reply_to: dict[str, Any] | None = None,
        edit_to: str | None = None,
    ) -> dict[str, Any]:
        """A user posts a message: MESSAGE_CREATE reaches the bot.

        ``mention_bot`` defaults to "the content contains <@bot> or <@!bot>" (Discord fills
        ``mentions`` from the content: other users' ``<@id>`` too). Without the MESSAGE_CONTENT
        intent, guild messages that do not mention the bot arrive with empty content (as on
        Discord). ``reply_to``: the message this one replies to. ``edit_to``: the author edits
        the message at once; the MESSAGE_UPDATE is sent right behind the MESSAGE_CREATE, so the
        bot reads both in one socket read.
        """
        if dm:
            channel_id = self.dm_channel_for(author)
        if mention_bot is None:
            mention_bot = f"<@{self.bot.id}>" in content or f"<@!{self.bot.id}>" in content
        others = [
            u
            for uid, u in self.users.items()
            if uid != self.bot.id and (f"<@{uid}>" in content or f"<@!{uid}>" in content)
        ]
        data = self.message_payload(
            author,
            content,
            channel_id=channel_id,
            guild=not dm,
            mentions=([self.bot] if mention_bot else []) + others,
            message_type=message_type,
            message_id=message_id,
            reply_to=reply_to,
        )
        self.all_messages[data["id"]] = data
        delivered = dict(data)
        if not dm and not self.has_message_content and not mention_bot and author.id != self.bot.id:
            delivered["content"] = ""
        if edit_to is None:
            await self.dispatch("MESSAGE_CREATE", delivered)
            return data
        edited = self.message_payload(
            author,
            edit_to,
            channel_id=data["channel_id"],
            guild=not dm,
            message_id=data["id"],
            reply_to=reply_to,
            mentions=[self.bot] if (f"<@{self.bot.id}>" in edit_to or f"<@!{self.bot.id}>" in edit_to) else [],
        )
        edited["edited_timestamp"] = _now()
        async with self._ws_lock:  # both frames written back to back: one read on the bot's side
            assert self._ws is not None
            for event, payload in (("MESSAGE_CREATE", delivered), ("MESSAGE_UPDATE", edited)):
                self._seq += 1
                await self._ws.send_str(json.dumps({"op": 0, "t": event, "s": self._seq, "d": payload}))
        self.all_messages[data["id"]] = edited
        return edited

    async def edit_message(self, message: dict[str, Any], content: str) -> None:
        """A user edits a message: MESSAGE_UPDATE."""
        data = dict(message, content=content, edited_timestamp=_now())
        await self.dispatch("MESSAGE_UPDATE", data)

    def dm_channel_for(self, user: FakeUser) -> str:
        if user.id not in self.dm_channels:
            self.dm_channels[user.id] = snowflake()
        return self.dm_channels[user.id]

    def _interaction_base(self, user: FakeUser, *, channel_id: str, kind: int, dm: bool) -> dict[str, Any]:
        data: dict[str, Any] = {
            "id": snowflake(),
            "application_id": self.application_id,
            "type": kind,
            "token": "itok-" + snowflake(),
            "version": 1,
            "channel_id": channel_id,
            "locale": "en-US",
            "entitlements": [],
            "authorizing_integration_owners": {"0": self.guild_id} if not dm else {"1": user.id},
            "context": 1 if dm else 0,
            "attachment_size_limit": 8 * 1024 * 1024,
            "app_permissions": str(PERM_ALL_TEXT),
        }
        if dm:
            data["channel"] = {"id": channel_id, "type": 1, "recipients": [user.payload]}
            data["user"] = user.payload
        else:
            ch_type = 11 if channel_id in self.threads else 0
            channel = dict(
                self.threads.get(channel_id)
                or {
                    "id": channel_id,
                    "type": ch_type,
                    "guild_id": self.guild_id,
                    "name": "general",
                    "position": 0,
                    "permission_overwrites": [],
                }
            )
            data["channel"] = channel
            data["guild_id"] = self.guild_id
            data["guild_locale"] = "en-US"
            perms = PERM_ALL_TEXT
            for role in user.roles:
                if role == self.manager_role_id:
                    perms |= PERM_MANAGE_GUILD
            if user.id == self.owner.id:
                perms |= PERM_MANAGE_GUILD
            data["member"] = dict(user.member(), user=user.payload, permissions=str(perms))
        return data

    async def click(self, user: FakeUser, message: dict[str, Any], custom_id: str) -> dict[str, Any]:
        """``user`` clicks the button ``custom_id`` on ``message`` (a message the bot posted)."""
        data = self._interaction_base(user, channel_id=message["channel_id"], kind=3, dm="guild_id" not in message)
        data["message"] = message
        data["data"] = {"custom_id": custom_id, "component_type": 2}
        await self.dispatch("INTERACTION_CREATE", data)
        return data

    async def submit_modal(
        self, user: FakeUser, message: dict[str, Any], custom_id: str, values: dict[str, str]
    ) -> dict[str, Any]:
        """``user`` submits the modal ``custom_id`` (opened from a button on ``message``) with
        text inputs ``values`` (input custom_id -> text); Discord includes that message."""
        data = self._interaction_base(user, channel_id=message["channel_id"], kind=5, dm="guild_id" not in message)
        data["message"] = message
        rows = [{"type": 1, "components": [{"type": 4, "custom_id": k, "value": v}]} for k, v in values.items()]
        data["data"] = {"custom_id": custom_id, "components": rows}
        await self.dispatch("INTERACTION_CREATE", data)
        return data

    async def slash(
        self,
        user: FakeUser,
        group: str,
        sub: str,
        *,
        channel_id: str | None = None,
        dm: bool = False,
        options: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        """``user`` runs ``/<group> <sub>`` (a CHAT_INPUT command with one subcommand), with
        ``options`` as its string options (``{"source": "docs"}``)."""
        channel_id = channel_id or (self.dm_channel_for(user) if dm else self.channel_id)
        data = self._interaction_base(user, channel_id=channel_id, kind=2, dm=dm)
        command_id = self._command_ids.get(group, snowflake())
        data["data"] = {
            "id": command_id,
            "name": group,
            "type": 1,
            "options": [
                {
                    "name": sub,
                    "type": 1,
                    "options": [{"name": k, "type": 3, "value": v} for k, v in (options or {}).items()],
                }
            ],
        }
        await self.dispatch("INTERACTION_CREATE", data)
        return data

    # ------------------------------------------------------------------ REST
    def _json(self, data: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
        if status == 204:
            return web.Response(status=204, headers=headers)
        return web.Response(
            status=status,
            body=json.dumps(data).encode(),
            headers={"Content-Type": "application/json", **(headers or {})},
        )

    def _error(self, status: int, code: int, message: str) -> web.Response:
        return self._json({"code": code, "message": message}, status)

    async def _rest(self, request: web.Request) -> web.Response:
        path = "/" + request.match_info["tail"]
        body: Any = None
        if request.can_read_body:
            raw = await request.read()
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = raw.decode(errors="replace")
        rec = Request(request.method, urllib.parse.unquote(path), body)
        self.requests.append(rec)
        needs_auth = not path.startswith(("/interactions/", "/webhooks/"))
        try:
            if needs_auth and request.headers.get("Authorization") != f"Bot {self.TOKEN}":
                response = self._error(401, 0, "401: Unauthorized")
            else:
                response = await self._route(request.method, path, body, request)
        except Exception as exc:  # a bug in the fake must show in the test, not hang it
            response = self._error(500, 0, f"fake error: {exc!r}")
        rec.status = response.status
        async with self._changed:
            self._changed.notify_all()
        return response

    async def _route(self, method: str, path: str, body: Any, request: web.Request) -> web.Response:
        parts = [urllib.parse.unquote(p) for p in path.strip("/").split("/")]
        if parts == ["users", "@me"] and method == "GET":
            return self._json(self.bot.payload)
        if parts == ["oauth2", "applications", "@me"]:
            return self._json(
                {
                    "id": self.application_id,
                    "name": "Threadwise",
                    "description": "",
                    "icon": None,
                    "bot_public": True,
                    "bot_require_code_grant": False,
                    "owner": self.owner.payload,
                    "verify_key": "00",
                    "flags": 0,
                }
            )
        if parts[:1] == ["gateway"]:
            return self._json(
                {
                    "url": self.gateway_url,
                    "shards": 1,
                    "session_start_limit": {"total": 1000, "remaining": 1000, "reset_after": 0, "max_concurrency": 1},
                }
            )
        if parts[:1] == ["applications"] and parts[-1] == "commands" and method == "PUT":
            out = []
            for cmd in body or []:
                cid = self._command_ids.setdefault(cmd["name"], snowflake())
                out.append(
                    dict(
                        cmd,
                        id=cid,
                        application_id=self.application_id,
                        version="1",
                        default_member_permissions=cmd.get("default_member_permissions"),
                        dm_permission=True,
                        nsfw=False,
                    )
                )
            return self._json(out)
        if parts[:1] == ["applications"] and method == "GET":
            return self._json([])
        if len(parts) == 2 and parts[0] == "users" and method == "GET":
            user = self.users.get(parts[1])
            return self._json(user.payload) if user else self._error(404, 10013, "Unknown User")
        if parts == ["users", "@me", "channels"] and method == "POST":
            uid = str(body["recipient_id"])
            user = self.users.get(uid) or FakeUser(uid, "someone")
            return self._json(
                {"id": self.dm_channel_for(user), "type": 1, "recipients": [user.payload], "last_message_id": None}
            )
        if parts[:1] == ["channels"]:
            return await self._channel_route(method, parts[1:], body)
        if parts[:1] == ["interactions"] and parts[-1] == "callback":
            return await self._interaction_callback(parts[1], parts[2], body)
        if parts[:1] == ["webhooks"]:
            return await self._webhook(method, parts[1:], body)
        return self._error(404, 0, f"fake has no route {method} {path}")

    async def _channel_route(self, method: str, parts: list[str], body: Any) -> web.Response:
        channel_id = parts[0]
        rest = parts[1:]
        if rest == ["typing"] and method == "POST":
            return self._json(None, 204)
        if rest == ["messages"] and method == "POST":
            return await self._create_message(channel_id, body)
        if len(rest) == 2 and rest[0] == "messages" and method == "PATCH":
            msg = self.all_messages.get(rest[1])
            if msg is None:
                return self._error(404, 10008, "Unknown Message")
            msg.update({k: v for k, v in (body or {}).items() if k in ("content", "components", "embeds")})
            msg["edited_timestamp"] = _now()
            return self._json(msg)
        if len(rest) >= 4 and rest[0] == "messages" and rest[2] == "reactions":
            message_id, emoji = rest[1], rest[3]
            for key in ((message_id, emoji), (message_id, "*"), ("*", emoji), ("*", "*")):
                if key in self.reaction_failures:
                    status, code = self.reaction_failures[key]
                    return self._error(status, code, "Missing Permissions" if status == 403 else "Reaction failed")
            if channel_id in self.threads and self.threads[channel_id]["thread_metadata"]["archived"]:
                return self._error(400, 50083, "Thread is archived")
            return self._json(None, 204)
        if len(rest) == 3 and rest[0] == "messages" and rest[2] == "threads" and method == "POST":
            return await self._create_thread(channel_id, rest[1], body)
        if not rest and method == "GET":
            if channel_id in self.threads:
                return self._json(self.threads[channel_id])
            return self._error(404, 10003, "Unknown Channel")
        return self._error(404, 0, f"fake has no channel route {method} {parts}")

    def _rate_headers(self, channel_id: str) -> tuple[bool, dict[str, str]]:
        limit, window = self.message_rate
        now = time.monotonic()
        hits = [t for t in self._rate_windows.get(channel_id, []) if now - t < window]
        over = len(hits) >= limit
        if not over:
            hits.append(now)
        self._rate_windows[channel_id] = hits
        reset_after = window - (now - hits[0]) if hits else window
        headers = {
            "X-RateLimit-Bucket": "messages-" + channel_id,
            "X-RateLimit-Limit": str(limit),
            "X-RateLimit-Remaining": str(max(limit - len(hits), 0)),
            "X-RateLimit-Reset-After": f"{max(reset_after, 0.001):.3f}",
            "X-RateLimit-Reset": f"{time.time() + reset_after:.3f}",
        }
        return over, headers

    async def _create_message(self, channel_id: str, body: dict[str, Any]) -> web.Response:
        over, headers = self._rate_headers(channel_id)
        if over:
            headers["Via"] = "1.1 google"
            return self._json(
                {
                    "message": "You are being rate limited.",
                    "retry_after": float(headers["X-RateLimit-Reset-After"]),
                    "global": False,
                },
                429,
                headers,
            )
        failure = self.message_failures.get(channel_id) or self.message_failures.get("*")
        if failure is not None:
            return self._error(failure[0], failure[1], "Missing Access" if failure[0] == 403 else "Cannot send")
        content = body.get("content") or ""
        dm_user = next((uid for uid, cid in self.dm_channels.items() if cid == channel_id), None)
        if dm_user is not None and dm_user in self.dms_closed:
            return self._error(403, 50007, "Cannot send messages to this user")
        if len(content) > 2000:
            return self._error(400, 50035, "Invalid Form Body: content: Must be 2000 or fewer in length.")
        in_guild = channel_id == self.channel_id or channel_id in self.threads
        msg = self.message_payload(self.bot, content, channel_id=channel_id, guild=in_guild)
        msg["components"] = body.get("components") or []
        msg["posted_components"] = msg["components"]  # for assertions: edits may remove components
        msg["allowed_mentions"] = body.get("allowed_mentions")
        msg["flags"] = int(body.get("flags") or 0)
        if body.get("message_reference"):
            msg["message_reference"] = body["message_reference"]
        self.messages.setdefault(channel_id, []).append(msg)
        self.all_messages[msg["id"]] = msg
        # Discord echoes our own messages on the gateway too.
        asyncio.get_running_loop().create_task(self._echo(msg))
        return self._json(msg, 200, headers)

    async def _echo(self, msg: dict[str, Any]) -> None:
        try:
            await self.dispatch("MESSAGE_CREATE", msg)
        except Exception:
            pass

    async def _create_thread(self, channel_id: str, message_id: str, body: dict[str, Any]) -> web.Response:
        name = body.get("name", "")
        if not 1 <= len(name) <= 100:
            return self._error(400, 50035, "Invalid Form Body: name: Must be between 1 and 100 in length.")
        if message_id in self.threads:
            return self._error(400, 160004, "A thread has already been created for this message")
        if self.threads_forbidden:
            return self._error(403, 50013, "Missing Permissions")
        # a thread started from a message has the message's id
        thread = self._thread_payload(
            message_id, channel_id, self.bot.id, name, int(body.get("auto_archive_duration") or 1440)
        )
        self.threads[message_id] = thread
        await self.dispatch("THREAD_CREATE", dict(thread, newly_created=True))
        if self.create_thread_delay:  # the thread exists (and users see it) before the bot's call returns
            await asyncio.sleep(self.create_thread_delay)
        return self._json(thread)

    def _thread_payload(
        self, thread_id: Any, parent_id: Any, owner_id: Any, name: str, auto_archive_minutes: int
    ) -> dict[str, Any]:
        """A public thread channel object (Discord API: Channel, type 11)."""
        return {
            "id": thread_id,
            "guild_id": self.guild_id,
            "parent_id": parent_id,
            "owner_id": owner_id,
            "type": 11,
            "name": name,
            "last_message_id": None,
            "thread_metadata": {
                "archived": False,
                "auto_archive_duration": auto_archive_minutes,
                "archive_timestamp": _now(),
                "locked": False,
            },
            "message_count": 0,
            "member_count": 1,
            "rate_limit_per_user": 0,
            "flags": 0,
        }

    async def user_thread(self, owner: FakeUser, name: str) -> str:
        """A member starts a thread (not from one of the bot's questions): THREAD_CREATE."""
        starter = self.message_payload(owner, name)
        self.all_messages[starter["id"]] = starter
        thread = self._thread_payload(starter["id"], self.channel_id, owner.id, name, 1440)
        self.threads[thread["id"]] = thread
        await self.dispatch("THREAD_CREATE", dict(thread, newly_created=True))
        return thread["id"]

    def archive_thread(self, thread_id: str) -> None:
        """Mark a thread archived: reactions in it fail with 50083, as on Discord."""
        self.threads[thread_id]["thread_metadata"]["archived"] = True

    async def _interaction_callback(self, interaction_id: str, token: str, body: dict[str, Any]) -> web.Response:
        record = {
            "interaction_id": interaction_id,
            "token": token,
            "type": body.get("type"),
            "data": body.get("data") or {},
        }
        self.interaction_callbacks.append(record)
        result: dict[str, Any] = {"interaction": {"id": interaction_id, "type": 2}}
        data = body.get("data") or {}
        if body.get("type") in (4, 5):
            ephemeral = bool((data.get("flags") or 0) & 64)
            msg = self.message_payload(self.bot, data.get("content") or "", channel_id=self.channel_id)
            msg["flags"] = data.get("flags") or 0
            msg["interaction_token"] = token
            self.all_messages[msg["id"]] = msg
            self._original[token] = msg
            result["interaction"].update(
                response_message_id=msg["id"],
                response_message_loading=body["type"] == 5,
                response_message_ephemeral=ephemeral,
            )
            result["resource"] = {"type": body["type"], "message": msg}
        return self._json(result)

    async def _webhook(self, method: str, parts: list[str], body: Any) -> web.Response:
        # /webhooks/{application_id}/{token}[/messages/@original|{id}]
        token = parts[1]
        if len(parts) == 2 and method == "POST":
            msg = self.message_payload(self.bot, (body or {}).get("content") or "", channel_id=self.channel_id)
            msg["flags"] = (body or {}).get("flags") or 0
            msg["components"] = (body or {}).get("components") or []
            msg["interaction_token"] = token
            self.all_messages[msg["id"]] = msg
            self.followups.append(msg)
            return self._json(msg)
        if len(parts) == 4 and parts[2] == "messages":
            target = self._original.get(token) if parts[3] == "@original" else self.all_messages.get(parts[3])
            if target is None:
                return self._error(404, 10008, "Unknown Message")
            if method == "PATCH":
                target.update({k: v for k, v in (body or {}).items() if k in ("content", "components", "embeds")})
                target.setdefault("edits", 0)
                target["edits"] += 1
                return self._json(target)
            if method == "GET":
                return self._json(target)
        return self._error(404, 0, f"fake has no webhook route {method} {parts}")

    # ------------------------------------------------------------------ helpers for assertions
    def calls(self, method: str | None = None, contains: str = "") -> list[Request]:
        """Recorded REST requests, filtered by method and a substring of the path."""
        return [r for r in self.requests if (method is None or r.method == method) and contains in r.path]

    def reactions_on(self, message_id: str) -> list[tuple[str, str, int]]:
        """``(method, emoji, status)`` of reaction calls on one message, in order (PUT = add)."""
        out = []
        for r in self.requests:
            parts = r.path.strip("/").split("/")
            if (
                len(parts) >= 6
                and parts[0] == "channels"
                and parts[2] == "messages"
                and parts[3] == message_id
                and parts[4] == "reactions"
            ):
                out.append((r.method, parts[5], r.status))
        return out

    def added_reactions(self, message_id: str) -> list[str]:
        """Emoji the bot added (successfully or not) to one message, in order."""
        return [emoji for method, emoji, _ in self.reactions_on(message_id) if method == "PUT"]

    def bot_messages(self, channel_id: str) -> list[dict[str, Any]]:
        return list(self.messages.get(channel_id, []))

    async def wait_until(self, predicate: Callable[[], Any], timeout: float = 10.0) -> Any:
        """Wait until ``predicate()`` is truthy (re-checked after every REST request); return it."""
        deadline = time.monotonic() + timeout
        while True:
            value = predicate()
            if value:
                return value
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(
                    "timed out waiting for the bot; REST calls so far:\n"
                    + "\n".join(f"{r.method} {r.path} -> {r.status}" for r in self.requests[-30:])
                )
            async with self._changed:
                try:
                    await asyncio.wait_for(self._changed.wait(), min(remaining, 0.2))
                except TimeoutError:
                    pass

    async def settle(self, quiet: float = 0.4, timeout: float = 10.0) -> None:
        """Wait until no REST request arrived for ``quiet`` seconds (the bot is idle)."""
        deadline = time.monotonic() + timeout
        count = -1
        while time.monotonic() < deadline:
            if count == len(self.requests):
                return
            count = len(self.requests)
            await asyncio.sleep(quiet)


# ---------------------------------------------------------------------------- the bot under test

KB_FILES = {
    "deploy.md": "# Deploying\n\nRun `tw deploy --env prod` from the release branch. Deploys need a green CI run.\n",
    "oncall.md": "# On-call\n\nThe on-call rota lives in the Ops calendar; swaps go through #ops.\n",
}


def is_help_request(message: dict[str, Any]) -> bool:
    """A message the bot posted with help-request buttons (not only an answer's 👍/👎)."""
    return any(
        str(c.get("custom_id", "")).startswith(("tw:a:", "tw:r:", "tw:d:"))
        for row in message.get("posted_components") or []
        for c in row.get("components") or []
    )


def vote_ids(message: dict[str, Any]) -> dict[str, str]:
    """``{"up": custom_id, "down": custom_id}`` of an answer's vote buttons ({} when it has none)."""
    return {
        ("up" if c["custom_id"].startswith("tw:v:u:") else "down"): c["custom_id"]
        for row in message.get("components") or []
        for c in row.get("components") or []
        if str(c.get("custom_id", "")).startswith("tw:v:")
    }


def write_config(
    tmp_path: Any, fake: FakeDiscord, *, discord: str = "", extra: str = "", change_interval_seconds: float = 0.0
) -> Any:
    """A config.toml for tests: data and a two-file knowledge base under ``tmp_path``, Discord
    pointed at ``fake`` (experts: the fake's expert role; admins: its admin role; slash
    commands published to the fake's server at start, unless ``discord`` sets ``command_guild_ids``).
    ``change_interval_seconds``: ``[discord.reactions]``'s; 0 (every step of a run shown) unless
    a test is about pacing (tests/test_reaction_pacing.py)."""
    guilds = "" if "command_guild_ids" in discord else f"command_guild_ids = [{fake.guild_id}]"
    return write_platform_config(
        tmp_path,
        KB_FILES,
        f"""
[web]
enabled = false

[discord]
api_base_url = "{fake.rest_base}"
gateway_url = "{fake.gateway_url}"
expert_role_ids = [{fake.expert_role_id}]
admin_role_ids = [{fake.admin_role_id}]
{guilds}
{discord}

[discord.reactions]
change_interval_seconds = {change_interval_seconds}
{extra}
""",
    )


class DiscordHarness:
    """The real runtime (scripted model, SQLite files under tmp_path) + the Discord bot running
    through ``run_discord`` against :class:`FakeDiscord`.

    ``restart()`` stops the bot and the runtime and starts new ones on the same data files
    (a new process, as far as the bot can tell).
    """

    def __init__(
        self, tmp_path: Any, fake: FakeDiscord, model: Any, *, discord: str = "", change_interval_seconds: float = 0.0
    ) -> None:
        self.tmp_path, self.fake, self.model = tmp_path, fake, model
        self.config_path = write_config(
            tmp_path, fake, discord=discord, change_interval_seconds=change_interval_seconds
        )
        self.runtime: Any = None
        self.bot: Any = None
        self._stack: Any = None
        self._stop: asyncio.Event | None = None
        self._runner: asyncio.Task[None] | None = None

    async def open(self) -> DiscordHarness:
        from contextlib import AsyncExitStack

        from bot.config import Secrets, load_settings
        from bot.platforms.discord.app import build_discord_bot, run_discord
        from bot.runtime import open_runtime

        settings = load_settings(self.config_path)
        secrets = Secrets(discord_token=self.fake.TOKEN)
        self._stack = AsyncExitStack()
        self.runtime = await self._stack.enter_async_context(open_runtime(settings, secrets, chat_model=self.model))
        self.bot = build_discord_bot(self.runtime, guild_ready_timeout=0.05)
        self._stop = asyncio.Event()
        self._runner = asyncio.create_task(run_discord(self.runtime, stop=self._stop, bot=self.bot))
        ready = asyncio.create_task(self.bot.wait_until_ready())
        done, _ = await asyncio.wait({ready, self._runner}, timeout=10, return_when=asyncio.FIRST_COMPLETED)
        if self._runner in done:
            ready.cancel()
            self._runner.result()  # raise what stopped it
        if ready not in done:
            raise AssertionError("the bot did not become ready")
        return self

    async def close(self) -> None:
        if self._stop is not None:
            self._stop.set()
        if self._runner is not None:
            try:
                await asyncio.wait_for(self._runner, 20)
            except Exception:  # noqa: BLE001 - a failed run was already reported by the test
                pass
        if self._stack is not None:
            await self._stack.aclose()
        self.bot = self.runtime = self._stack = self._runner = self._stop = None

    async def restart(self) -> None:
        await self.close()
        await self.open()

    async def idle(self, timeout: float = 20.0) -> None:
        """Wait until the bot has finished everything it started (answers, REST calls)."""
        deadline = time.monotonic() + timeout
        while True:
            count = len(self.fake.requests)
            await asyncio.sleep(0.15)  # let discord.py dispatch pending gateway events
            await self.bot.wait_idle(max(deadline - time.monotonic(), 0.1))
            if count == len(self.fake.requests) and not [t for t in self.bot._tasks if not t.done()]:
                return
            if time.monotonic() > deadline:
                raise AssertionError("the bot did not become idle")
