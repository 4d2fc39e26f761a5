"""A local fake of Slack: the Web API over HTTP, Socket Mode over a websocket, and signed events.

:class:`FakeSlackAPI` is an aiohttp server on 127.0.0.1 (a free port) that answers the
Web API methods the bot uses (``POST|GET /api/<method>``), with Slack's argument checks
and error codes (``already_reacted``, ``no_reaction``, ``message_not_found``,
``invalid_blocks``, ``msg_too_long``, ``expired_trigger_id``, ``invalid_auth``...),
injected faults (HTTP 429 ``ratelimited`` with ``Retry-After``, HTTP 500), and a record of
every call. It also serves ``response_url`` posts (``/response/<id>``) and a Socket Mode
websocket (``apps.connections.open`` -> ``ws://.../socket``).

:class:`SlackEvents` builds what Slack sends to an app: Events API callbacks, block
actions, view submissions and slash commands, signed with the app's signing secret
(``x-slack-signature`` / ``x-slack-request-timestamp``), ready for
``AsyncApp.async_dispatch(AsyncBoltRequest(body=..., headers=...))`` or an HTTP POST.

Limits enforced here come from Slack's docs: section text <= 3000 characters and <= 50
blocks per message (Block Kit reference), message text <= 40000 characters
(chat.postMessage; ``msg_blocks_too_long`` for long block text, held at 12000 here),
modal title <= 24 characters and private_metadata <= 3000 characters (views.open / view
objects).

:class:`SlackHarness` (bottom) runs the real runtime (scripted model, SQLite files under a
tmp folder) and the Slack adapter against this fake, for the tests/test_slack_*.py modules.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
import urllib.parse
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web
from slack_sdk.signature import SignatureVerifier

from tests.fakes import write_platform_config

BOT_TOKEN = "xoxb-test-bot-token"
APP_TOKEN = "xapp-test-app-token"
SIGNING_SECRET = "test-signing-secret"
TEAM_ID = "T0TEAM"
BOT_USER_ID = "UBOT"
BOT_ID = "BBOT"
API_APP_ID = "A0APP"
# chat.postMessage answers msg_blocks_too_long above an undocumented total; we hold it here
MAX_BLOCKS_TEXT = 12000
# posts a slash command's response_url accepts (within 30 minutes)
RESPONSE_URL_USES = 5


@dataclass
class Call:
    """One request the fake received: ``method`` (``chat.postMessage``...), merged ``args``,
    the HTTP ``status`` and JSON ``response`` it answered, and ``at`` (monotonic seconds)."""

    method: str
    args: dict[str, Any]
    status: int = 200
    response: dict[str, Any] = field(default_factory=dict)
    at: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == 200 and bool(self.response.get("ok"))


@dataclass
class _Fault:
    error: str
    status: int
    retry_after: int | None
    remaining: int
    when: Callable[[dict[str, Any]], bool] | None = None


def _block_texts(block: dict[str, Any]) -> list[str]:
    texts = []
    if isinstance(block.get("text"), dict):
        texts.append(block["text"].get("text", ""))
    for f in block.get("fields") or []:
        texts.append(f.get("text", ""))
    for e in block.get("elements") or []:
        if isinstance(e, dict) and isinstance(e.get("text"), str):
            texts.append(e["text"])
    return texts


def check_blocks(blocks: Any, *, max_blocks: int = 50) -> str | None:
    """Return a Slack-like ``invalid_blocks`` reason, or None when the blocks are acceptable."""
    if not isinstance(blocks, list):
        return "blocks must be a list"
    if len(blocks) > max_blocks:
        return f"no more than {max_blocks} items allowed"
    known = {"section", "context", "actions", "divider", "header", "input", "rich_text", "image"}
    for i, b in enumerate(blocks):
        if not isinstance(b, dict) or b.get("type") not in known:
            return f"[{i}] unknown block type"
        if b["type"] == "section":
            text = (b.get("text") or {}).get("text", "")
            if not text and not b.get("fields"):
                return f"[{i}] section needs text"
            if len(text) > 3000:
                return f"[{i}] must be less than 3001 characters [json-pointer:/blocks/{i}/text/text]"
            if (b.get("text") or {}).get("type") not in ("mrkdwn", "plain_text"):
                return f"[{i}] text type must be mrkdwn or plain_text"
        if b["type"] == "context":
            els = b.get("elements") or []
            if not els or len(els) > 10:
                return f"[{i}] context needs 1 to 10 elements"
            if any(len(t) > 3000 for t in _block_texts(b)):
                return f"[{i}] context text must be less than 3001 characters"
        if b["type"] == "actions":
            els = b.get("elements") or []
            if not els or len(els) > 25:
                return f"[{i}] actions needs 1 to 25 elements"
            for e in els:
                if e.get("type") == "button":
                    if len((e.get("text") or {}).get("text", "")) > 75:
                        return f"[{i}] button text longer than 75"
                    if len(e.get("value", "")) > 2000:
                        return f"[{i}] button value longer than 2000"
                    if not e.get("action_id"):
                        return f"[{i}] button needs an action_id"
        if b["type"] == "header" and len((b.get("text") or {}).get("text", "")) > 150:
            return f"[{i}] header text longer than 150"
    return None


def _check_view(view: Any) -> str | None:
    if isinstance(view, str):
        view = json.loads(view)
    if not isinstance(view, dict) or view.get("type") != "modal":
        return "view type must be modal"
    title = (view.get("title") or {}).get("text", "")
    if not title or len(title) > 24:
        return "title must be 1 to 24 characters"
    if len(view.get("private_metadata", "")) > 3000:
        return "private_metadata longer than 3000"
    blocks = view.get("blocks") or []
    reason = check_blocks(blocks, max_blocks=100)
    if reason:
        return reason
    if any(b.get("type") == "input" for b in blocks) and not view.get("submit"):
        return "a view with input blocks needs a submit button"
    for b in blocks:
        if b.get("type") == "input" and not (b.get("block_id") and (b.get("element") or {}).get("action_id")):
            return "input blocks need a block_id and an element action_id"
    return None


class SlackAPIError(Exception):
    """Raised inside the fake to answer ``{"ok": false, "error": ...}``."""

    def __init__(self, error: str, status: int = 200, detail: str = "") -> None:
        super().__init__(error)
        self.error, self.status, self.detail = error, status, detail


class FakeSlackAPI:
    """A local Slack Web API (and Socket Mode endpoint) that records every call.

    State: ``messages`` (what the bot posted, by ``(channel, ts)``), ``reactions`` (names on
    each ``(channel, ts)``), ``users`` (for users.info), ``usergroups`` (id -> member ids),
    ``ephemeral`` and ``responses`` (response_url posts). Use :meth:`fail` to inject errors,
    ``delays`` (method -> seconds) to answer a method slowly.
    """

    def __init__(
        self,
        *,
        bot_token: str = BOT_TOKEN,
        app_token: str = APP_TOKEN,
        team_id: str = TEAM_ID,
        bot_user_id: str = BOT_USER_ID,
        bot_id: str = BOT_ID,
    ) -> None:
        self.bot_token, self.app_token = bot_token, app_token
        self.team_id, self.bot_user_id, self.bot_id = team_id, bot_user_id, bot_id
        self.calls: list[Call] = []
        self.peers: list[Any] = []  # the client's (host, port) of every Web API call: one per TCP connection
        self.messages: dict[tuple[str, str], dict[str, Any]] = {}
        self.reactions: dict[tuple[str, str], list[str]] = {}
        self.users: dict[str, dict[str, Any]] = {}
        self.usergroups: dict[str, list[str]] = {}
        self.responses: list[dict[str, Any]] = []
        self.refused_responses: list[dict[str, Any]] = []
        self.views: list[dict[str, Any]] = []
        self.valid_triggers: set[str] | None = None  # None: any trigger id is valid
        self._faults: dict[str, list[_Fault]] = {}
        self.delays: dict[str, float] = {}  # method -> seconds before it is answered
        # (method, an argument's value) -> more seconds, e.g. ("reactions.add", ts): one message's calls only
        self.arg_delays: dict[tuple[str, str], float] = {}
        self._ts = itertools.count(1)
        self._base_ts = int(time.time())
        self._runner: web.AppRunner | None = None
        self.port = 0
        self._sockets: list[web.WebSocketResponse] = []
        self._acks: dict[str, asyncio.Future] = {}
        self._changed = asyncio.Event()

    # ---- lifecycle ---------------------------------------------------------------
    async def start(self) -> FakeSlackAPI:
        """Start listening on 127.0.0.1 with a free port; returns self."""
        app = web.Application()
        app.router.add_route("*", "/api/{method}", self._api)
        app.router.add_post("/response/{rid}", self._response_url)
        app.router.add_get("/socket", self._socket)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def stop(self) -> None:
        for ws in list(self._sockets):
            await ws.close()
        if self._runner:
            await self._runner.cleanup()

    @property
    def base_url(self) -> str:
        """Web API base URL for ``AsyncWebClient(base_url=...)`` / config ``slack.api_base_url``."""
        return f"http://127.0.0.1:{self.port}/api/"

    def response_url(self, rid: str = "") -> str:
        """A ``response_url`` served by this fake (posts land in :attr:`responses`)."""
        return f"http://127.0.0.1:{self.port}/response/{rid or uuid.uuid4().hex[:8]}"

    # ---- fault injection and inspection -------------------------------------------
    def fail(
        self,
        method: str,
        error: str = "ratelimited",
        *,
        status: int | None = None,
        retry_after: int | None = None,
        times: int = 1,
        when: Callable[[dict[str, Any]], bool] | None = None,
    ) -> None:
        """Make the next ``times`` calls of ``method`` (whose arguments match ``when``) fail.

        ``error="ratelimited"`` answers HTTP 429 with ``Retry-After: retry_after`` (default 1 s),
        as Slack does; ``status=500`` answers a server error; other errors answer HTTP 200
        with ``{"ok": false, "error": error}``.
        """
        if error == "ratelimited":
            status = 429 if status is None else status
            retry_after = 1 if retry_after is None else retry_after
        self._faults.setdefault(method, []).append(_Fault(error, status or 200, retry_after, times, when))

    def calls_to(self, *methods: str, ok_only: bool = False) -> list[Call]:
        """Calls of the given methods, in arrival order (all methods when none given)."""
        return [c for c in self.calls if (not methods or c.method in methods) and (c.ok or not ok_only)]

    def posts(self, channel: str | None = None) -> list[dict[str, Any]]:
        """Arguments of successful chat.postMessage calls (optionally in one channel)."""
        return [
            c.args
            for c in self.calls_to("chat.postMessage", ok_only=True)
            if channel is None or c.args.get("channel") == channel
        ]

    def added_at(self, name: str = "white_check_mark") -> dict[str, float]:
        """Message ts -> when reaction ``name`` was (last) added to it successfully (monotonic)."""
        return {
            c.args["timestamp"]: c.at
            for c in self.calls_to("reactions.add", ok_only=True)
            if c.args.get("name") == name
        }

    def reaction_calls(self, channel: str, ts: str) -> list[tuple[str, str, bool]]:
        """``(method suffix 'add'|'remove', name, ok)`` of reaction calls on one message, in order."""
        return [
            (c.method.split(".")[1], c.args.get("name", ""), c.ok)
            for c in self.calls_to("reactions.add", "reactions.remove")
            if c.args.get("channel") == channel and c.args.get("timestamp") == ts
        ]

    async def wait_for(self, predicate: Callable[[], Any], timeout: float = 10.0) -> Any:
        """Wait until ``predicate()`` is truthy (re-checked after every call); return its value.

        Raises:
            TimeoutError: not true within ``timeout`` seconds (the message lists the calls seen).
        """
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            value = predicate()
            if value:
                return value
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                seen = [(c.method, c.response.get("error", "ok")) for c in self.calls]
                raise TimeoutError(f"condition not met in {timeout}s; calls: {seen}")
            self._changed.clear()
            try:
                await asyncio.wait_for(self._changed.wait(), min(remaining, 0.2))
            except TimeoutError:
                pass

    def next_ts(self) -> str:
        """A fresh, increasing Slack timestamp (``"1700000000.000001"`` style)."""
        return f"{self._base_ts}.{next(self._ts):06d}"

    # ---- HTTP handlers ---------------------------------------------------------------
    async def _args(self, request: web.Request) -> dict[str, Any]:
        args: dict[str, Any] = dict(request.query)
        if request.can_read_body:
            if request.content_type == "application/json":
                args.update(await request.json())
            else:
                args.update(dict(await request.post()))
        for key in ("blocks", "view", "attachments"):
            if isinstance(args.get(key), str) and args[key].strip().startswith(("[", "{")):
                args[key] = json.loads(args[key])
        return args

    async def _api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        args = await self._args(request)
        call = Call(method, args, at=time.monotonic())
        self.calls.append(call)
        self.peers.append(request.transport.get_extra_info("peername") if request.transport else None)
        delay = self.delays.get(method, 0.0) + sum(
            seconds for (m, value), seconds in self.arg_delays.items() if m == method and value in args.values()
        )
        if delay:
            await asyncio.sleep(delay)
        headers: dict[str, str] = {}
        try:
            self._authorise(method, request.headers.get("Authorization", ""), args)
            fault = self._take_fault(method, args)
            if fault:
                if fault.retry_after is not None:
                    headers["Retry-After"] = str(fault.retry_after)
                raise SlackAPIError(fault.error, fault.status)
            handler = getattr(self, "_m_" + method.replace(".", "_"), None)
            if handler is None:
                raise SlackAPIError("unknown_method", 404)
            body = handler(args)
            body = {"ok": True, **body}
            status = 200
        except SlackAPIError as exc:
            status = exc.status
            body = {"ok": False, "error": exc.error}
            if exc.detail:
                body["response_metadata"] = {"messages": [f"[ERROR] {exc.detail}"]}
        call.status, call.response = status, body
        self._changed.set()
        return web.json_response(body, status=status, headers=headers)

    def _authorise(self, method: str, header: str, args: dict[str, Any]) -> None:
        token = header.removeprefix("Bearer ").strip() or args.get("token", "")
        if not token:
            raise SlackAPIError("not_authed")
        expected = self.app_token if method == "apps.connections.open" else self.bot_token
        if token != expected:
            raise SlackAPIError("invalid_auth")

    def _take_fault(self, method: str, args: dict[str, Any]) -> _Fault | None:
        queue = self._faults.get(method) or []
        for fault in queue:
            if fault.when is None or fault.when(args):
                fault.remaining -= 1
                if fault.remaining <= 0:
                    queue.remove(fault)
                return fault
        return None

    async def _response_url(self, request: web.Request) -> web.Response:
        """A response_url post; like Slack, a response_url takes 5 posts (later ones are
        refused with 404 ``used_url`` and land in :attr:`refused_responses`)."""
        payload = await request.json()
        rid = request.match_info["rid"]
        if sum(1 for r in self.responses if r["rid"] == rid) >= RESPONSE_URL_USES:
            self.refused_responses.append({"rid": rid, **payload})
            self.calls.append(Call("response_url", payload, 404, {"ok": False, "error": "used_url"}, time.monotonic()))
            self._changed.set()
            return web.Response(status=404, text="used_url")
        self.responses.append({"rid": rid, **payload})
        self.calls.append(Call("response_url", payload, 200, {"ok": True}, time.monotonic()))
        self._changed.set()
        return web.Response(text="ok")

    # ---- Web API methods (https://docs.slack.dev/reference/methods) -------------------
    def _m_auth_test(self, args: dict[str, Any]) -> dict[str, Any]:
        return {
            "url": "https://fake.slack.test/",
            "team": "Fake Team",
            "user": "threadwise",
            "team_id": self.team_id,
            "user_id": self.bot_user_id,
            "bot_id": self.bot_id,
            "is_enterprise_install": False,
        }

    @staticmethod
    def _require(args: dict[str, Any], *names: str) -> None:
        for name in names:
            if not args.get(name):
                raise SlackAPIError(
                    {
                        "channel": "channel_not_found",
                        "ts": "message_not_found",
                        "timestamp": "message_not_found",
                        "name": "invalid_name",
                        "user": "user_not_found",
                        "trigger_id": "invalid_trigger_id",
                    }.get(name, "invalid_arguments"),
                    detail=f"missing {name}",
                )

    def _check_message(self, args: dict[str, Any]) -> None:
        text, blocks = args.get("text") or "", args.get("blocks")
        if not text and not blocks:
            raise SlackAPIError("no_text")
        if len(text) > 40000:
            raise SlackAPIError("msg_too_long")
        if blocks is not None:
            reason = check_blocks(blocks)
            if reason:
                raise SlackAPIError("invalid_blocks", detail=reason)
            if sum(len(t) for b in blocks for t in _block_texts(b)) > MAX_BLOCKS_TEXT:
                raise SlackAPIError("msg_blocks_too_long")

    def _m_chat_postMessage(self, args: dict[str, Any]) -> dict[str, Any]:
        self._require(args, "channel")
        self._check_message(args)
        ts = self.next_ts()
        message = {
            "type": "message",
            "user": self.bot_user_id,
            "bot_id": self.bot_id,
            "ts": ts,
            "text": args.get("text", ""),
            "blocks": args.get("blocks") or [],
        }
        if args.get("thread_ts"):
            message["thread_ts"] = args["thread_ts"]
        self.messages[(args["channel"], ts)] = message
        return {"channel": args["channel"], "ts": ts, "message": message}

    def _m_chat_update(self, args: dict[str, Any]) -> dict[str, Any]:
        self._require(args, "channel", "ts")
        key = (args["channel"], args["ts"])
        if key not in self.messages:
            raise SlackAPIError("message_not_found")
        self._check_message(args)
        self.messages[key].update({"text": args.get("text", ""), "blocks": args.get("blocks") or []})
        return {"channel": args["channel"], "ts": args["ts"], "text": args.get("text", "")}

    def _m_chat_postEphemeral(self, args: dict[str, Any]) -> dict[str, Any]:
        self._require(args, "channel", "user")
        self._check_message(args)
        return {"message_ts": self.next_ts()}

    def _m_reactions_add(self, args: dict[str, Any]) -> dict[str, Any]:
        self._require(args, "channel", "timestamp", "name")
        name = args["name"]
        if ":" in name or " " in name:
            raise SlackAPIError("invalid_name")
        names = self.reactions.setdefault((args["channel"], args["timestamp"]), [])
        if name in names:
            raise SlackAPIError("already_reacted")
        names.append(name)
        return {}

    def _m_reactions_remove(self, args: dict[str, Any]) -> dict[str, Any]:
        self._require(args, "channel", "timestamp", "name")
        names = self.reactions.setdefault((args["channel"], args["timestamp"]), [])
        if args["name"] not in names:
            raise SlackAPIError("no_reaction")
        names.remove(args["name"])
        return {}

    def _m_views_open(self, args: dict[str, Any]) -> dict[str, Any]:
        self._require(args, "trigger_id")
        if self.valid_triggers is not None and args["trigger_id"] not in self.valid_triggers:
            raise SlackAPIError("expired_trigger_id")
        if self.valid_triggers is not None:
            self.valid_triggers.discard(args["trigger_id"])
        reason = _check_view(args.get("view"))
        if reason:
            raise SlackAPIError("invalid_arguments", detail=reason)
        view = args["view"] if isinstance(args["view"], dict) else json.loads(args["view"])
        view = {**view, "id": f"V{len(self.views) + 1:04d}", "team_id": self.team_id}
        self.views.append(view)
        return {"view": view}

    def _m_chat_getPermalink(self, args: dict[str, Any]) -> dict[str, Any]:
        """chat.getPermalink (https://docs.slack.dev/reference/methods/chat.getPermalink)."""
        self._require(args, "channel", "message_ts")
        ts = str(args["message_ts"])
        return {
            "channel": args["channel"],
            "permalink": f"https://fake.slack.com/archives/{args['channel']}/p{ts.replace('.', '')}",
        }

    def _m_users_info(self, args: dict[str, Any]) -> dict[str, Any]:
        self._require(args, "user")
        user = self.users.get(args["user"])
        if user is None:
            raise SlackAPIError("user_not_found")
        return {"user": user}

    def _m_usergroups_users_list(self, args: dict[str, Any]) -> dict[str, Any]:
        members = self.usergroups.get(args.get("usergroup", ""))
        if members is None:
            raise SlackAPIError("no_such_subteam")
        return {"users": list(members)}

    def _m_apps_connections_open(self, args: dict[str, Any]) -> dict[str, Any]:
        return {"url": f"ws://127.0.0.1:{self.port}/socket"}

    # ---- Socket Mode ------------------------------------------------------------------
    async def _socket(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse(autoping=True)
        await ws.prepare(request)
        self._sockets.append(ws)
        self._changed.set()
        await ws.send_json(
            {"type": "hello", "num_connections": 1, "connection_info": {"app_id": API_APP_ID}, "debug_info": {}}
        )
        try:
            async for msg in ws:
                if msg.type == WSMsgType.TEXT:
                    data = json.loads(msg.data)
                    fut = self._acks.get(data.get("envelope_id", ""))
                    if fut and not fut.done():
                        fut.set_result(data)
        finally:
            self._sockets.remove(ws)
        return ws

    async def wait_socket(self, timeout: float = 10.0) -> None:
        """Wait until a Socket Mode client is connected."""
        await self.wait_for(lambda: self._sockets, timeout)

    async def send_envelope(self, kind: str, payload: dict[str, Any], timeout: float = 5.0) -> dict[str, Any]:
        """Send a Socket Mode envelope (``events_api``, ``interactive``, ``slash_commands``)
        and return the client's acknowledgement (``{"envelope_id": ..., "payload": ...}``)."""
        envelope_id = uuid.uuid4().hex
        fut = asyncio.get_running_loop().create_future()
        self._acks[envelope_id] = fut
        await self._sockets[-1].send_json(
            {
                "envelope_id": envelope_id,
                "type": kind,
                "payload": payload,
                "accepts_response_payload": kind != "events_api",
                "retry_attempt": 0,
                "retry_reason": "",
            }
        )
        return await asyncio.wait_for(fut, timeout)


class SlackEvents:
    """Builds signed requests as Slack sends them to an app (Events API and interactivity).

    Every builder returns ``(raw_body, headers)``; the headers carry a valid signature for
    ``signing_secret`` unless ``bad_signature=True``.
    """

    def __init__(
        self, signing_secret: str = SIGNING_SECRET, team_id: str = TEAM_ID, api_app_id: str = API_APP_ID
    ) -> None:
        self.verifier = SignatureVerifier(signing_secret)
        self.team_id, self.api_app_id = team_id, api_app_id
        self._n = itertools.count(1)

    def sign(
        self,
        body: str,
        content_type: str,
        *,
        retry_num: int | None = None,
        retry_reason: str = "http_timeout",
        bad_signature: bool = False,
    ) -> tuple[str, dict[str, str]]:
        """Headers for ``body`` with a fresh timestamp and signature (and retry headers)."""
        ts = str(int(time.time()))
        signature = self.verifier.generate_signature(timestamp=ts, body=body)
        if bad_signature:
            signature = "v0=" + "0" * 64
        headers = {"content-type": content_type, "x-slack-request-timestamp": ts, "x-slack-signature": signature}
        if retry_num is not None:
            headers["x-slack-retry-num"] = str(retry_num)
            headers["x-slack-retry-reason"] = retry_reason
        return body, headers

    # ---- Events API ------------------------------------------------------------------
    def event_body(self, event: dict[str, Any], event_id: str | None = None) -> dict[str, Any]:
        """An ``event_callback`` envelope around ``event`` (a new event id unless given)."""
        return {
            "token": "legacy",
            "team_id": self.team_id,
            "api_app_id": self.api_app_id,
            "event": event,
            "type": "event_callback",
            "event_id": event_id or f"Ev{next(self._n):08d}",
            "event_time": int(time.time()),
            "authorizations": [{"team_id": self.team_id, "user_id": BOT_USER_ID, "is_bot": True}],
        }

    def event(
        self,
        event: dict[str, Any],
        *,
        event_id: str | None = None,
        retry_num: int | None = None,
        bad_signature: bool = False,
    ) -> tuple[str, dict[str, str]]:
        """A signed Events API request delivering ``event``."""
        return self.sign(
            json.dumps(self.event_body(event, event_id)),
            "application/json",
            retry_num=retry_num,
            bad_signature=bad_signature,
        )

    @staticmethod
    def message(
        *,
        user: str,
        channel: str,
        text: str,
        ts: str,
        thread_ts: str | None = None,
        channel_type: str = "channel",
        kind: str = "message",
        **extra: Any,
    ) -> dict[str, Any]:
        """A ``message`` (or ``app_mention`` with ``kind=``) event as Slack sends it."""
        event: dict[str, Any] = {
            "type": kind,
            "user": user,
            "text": text,
            "ts": ts,
            "channel": channel,
            "event_ts": ts,
            "team": TEAM_ID,
            "client_msg_id": str(uuid.uuid4()),
        }
        if kind == "message":
            event["channel_type"] = channel_type
        if thread_ts:
            event["thread_ts"] = thread_ts
        event.update(extra)
        return event

    # ---- interactivity -------------------------------------------------------------
    def _form(self, payload: dict[str, Any]) -> tuple[str, dict[str, str]]:
        body = urllib.parse.urlencode({"payload": json.dumps(payload)})
        return self.sign(body, "application/x-www-form-urlencoded")

    def block_action(
        self,
        *,
        user: str,
        action_id: str,
        value: str,
        channel: str,
        message: dict[str, Any],
        trigger_id: str | None = None,
        user_name: str = "",
    ) -> tuple[str, dict[str, str]]:
        """A ``block_actions`` payload: ``user`` clicked button ``action_id`` on ``message``."""
        payload = {
            "type": "block_actions",
            "team": {"id": self.team_id, "domain": "fake"},
            "user": {
                "id": user,
                "username": user_name or user.lower(),
                "name": user_name or user.lower(),
                "team_id": self.team_id,
            },
            "api_app_id": self.api_app_id,
            "token": "legacy",
            "container": {
                "type": "message",
                "message_ts": message["ts"],
                "channel_id": channel,
                "is_ephemeral": False,
                "thread_ts": message.get("thread_ts"),
            },
            "trigger_id": trigger_id or f"{next(self._n)}.trigger",
            "channel": {"id": channel, "name": "general"},
            "message": message,
            "response_url": "",
            "actions": [
                {
                    "action_id": action_id,
                    "block_id": "help",
                    "value": value,
                    "type": "button",
                    "action_ts": str(time.time()),
                }
            ],
        }
        return self._form(payload)

    def view_submission(
        self, *, user: str, view: dict[str, Any], values: dict[str, dict[str, str]], user_name: str = ""
    ) -> tuple[str, dict[str, str]]:
        """A ``view_submission`` of ``view`` (as opened) with ``values`` ``{block_id: {action_id: text}}``."""
        state = {
            "values": {
                b: {a: {"type": "plain_text_input", "value": v} for a, v in acts.items()} for b, acts in values.items()
            }
        }
        payload = {
            "type": "view_submission",
            "team": {"id": self.team_id, "domain": "fake"},
            "user": {
                "id": user,
                "username": user_name or user.lower(),
                "name": user_name or user.lower(),
                "team_id": self.team_id,
            },
            "api_app_id": self.api_app_id,
            "token": "legacy",
            "trigger_id": f"{next(self._n)}.trigger",
            "view": {**view, "state": state, "hash": "h"},
            "response_urls": [],
        }
        return self._form(payload)

    def command(
        self,
        *,
        user: str,
        text: str,
        channel: str,
        command: str = "/threadwise",
        response_url: str = "",
        user_name: str = "",
    ) -> tuple[str, dict[str, str]]:
        """A slash command request (form encoded, as Slack posts it)."""
        body = urllib.parse.urlencode(
            {
                "token": "legacy",
                "team_id": self.team_id,
                "team_domain": "fake",
                "channel_id": channel,
                "channel_name": "general",
                "user_id": user,
                "user_name": user_name or user.lower(),
                "command": command,
                "text": text,
                "api_app_id": self.api_app_id,
                "response_url": response_url,
                "trigger_id": f"{next(self._n)}.trigger",
            }
        )
        return self.sign(body, "application/x-www-form-urlencoded")


# ---- harness: the real runtime + the Slack adapter wired to this fake -----------------
KB_FILES = {
    "deploy.md": "# Deploying\n\nRun `make deploy` from the main branch. Rollouts take ten minutes.\n\n"
    "## Rollback\n\nUse `make rollback VERSION=x` to go back to an earlier release.\n",
    "oncall.md": "# On-call\n\nThe on-call rota lives in PagerDuty. Page the secondary after 15 minutes.\n",
}


USERS = {"UASKER": "Asha", "UEXPERT": "Erik", "UGROUPEXPERT": "Gita", "UADMIN": "Ada", "UOTHER": "Olaf"}


def write_config(
    tmp_path: Any,
    fake: FakeSlackAPI,
    *,
    slack: str = "",
    extra: str = "",
    web: str = "enabled = false",
    change_interval_seconds: float = 0.0,
) -> Any:
    """Write a config.toml (data and knowledge under ``tmp_path``, Slack pointed at ``fake``).

    ``slack`` adds lines to ``[slack]``, ``web`` replaces the body of ``[web]``, ``extra``
    appends whole sections. ``change_interval_seconds``: ``[slack.reactions]``'s; 0 (every
    step of a run shown, so tests can follow the stages) unless a test is about pacing
    (tests/test_reaction_pacing.py).
    """
    return write_platform_config(
        tmp_path,
        KB_FILES,
        f"""
[web]
{web}

[slack]
mode = "http"
api_base_url = "{fake.base_url}"
experts = ["UEXPERT", "SEXPERTS"]
admins = ["UADMIN"]
rate_limit_retries = 2
{slack}

[slack.reactions]
change_interval_seconds = {change_interval_seconds}
{extra}
""",
    )


class SlackHarness:
    """The real runtime (scripted model, SQLite files under tmp_path) + SlackBot + fake Slack.

    ``deliver`` signs and dispatches a request through bolt exactly as Slack would post it;
    ``send`` also waits for the background work to finish. ``restart`` closes the runtime
    and opens a new one (and a new bot) on the same data files.
    """

    def __init__(
        self,
        tmp_path: Any,
        fake: FakeSlackAPI,
        config_path: Any,
        model: Any,
        *,
        tavily_api_key: str = "",
        database_url: str = "",
    ) -> None:
        self.tmp_path, self.fake, self.config_path, self.model = tmp_path, fake, config_path, model
        self.tavily_api_key = tavily_api_key
        self.database_url = database_url  # [storage] backend = "postgres": THREADWISE_DATABASE_URL
        self.events = SlackEvents()
        self.runtime: Any = None
        self.bot: Any = None
        self._stack: Any = None
        self.channel = "C0GENERAL"

    async def open(self) -> SlackHarness:
        from contextlib import AsyncExitStack

        from bot.config import Secrets, load_settings
        from bot.platforms.slack.app import build_slack_app
        from bot.runtime import open_runtime

        settings = load_settings(self.config_path)
        secrets = Secrets(
            slack_bot_token=BOT_TOKEN,
            slack_signing_secret=SIGNING_SECRET,
            tavily_api_key=self.tavily_api_key,
            database_url=self.database_url,
        )
        self.fake.users.update(
            {
                uid: {
                    "id": uid,
                    "name": uid.lower(),
                    "real_name": name,
                    "profile": {"display_name": name, "real_name": name},
                }
                for uid, name in USERS.items()
            }
        )
        self.fake.usergroups.setdefault("SEXPERTS", ["UGROUPEXPERT"])
        self._stack = AsyncExitStack()
        self.runtime = await self._stack.enter_async_context(open_runtime(settings, secrets, chat_model=self.model))
        self.bot = build_slack_app(self.runtime)
        return self

    async def close(self) -> None:
        if self.bot is not None:
            await self.bot.drain(timeout=15)
        if self._stack is not None:
            await self._stack.aclose()
        self.bot = self.runtime = self._stack = None

    async def restart(self) -> None:
        """A new process, as far as the bot can tell: new runtime and bot, same data files."""
        await self.close()
        await self.open()

    async def deliver(self, request: tuple[str, dict[str, str]]) -> Any:
        """Dispatch a signed request through bolt; returns bolt's response (the ack)."""
        body, headers = request
        return await self.bot.dispatch(body, headers)

    async def send(self, request: tuple[str, dict[str, str]], timeout: float = 20.0) -> Any:
        """Deliver, check it was acknowledged with 200, and wait for the work it started."""
        resp = await self.deliver(request)
        assert resp.status == 200, (resp.status, resp.body)
        await self.bot.drain(timeout)
        return resp

    # event shortcuts: each returns the request and the message's ts
    def mention(
        self,
        user: str,
        text: str,
        *,
        channel: str | None = None,
        thread_ts: str | None = None,
        ts: str | None = None,
        **kw: Any,
    ) -> tuple[tuple[str, dict[str, str]], str]:
        ts = ts or self.fake.next_ts()
        event = self.events.message(
            user=user,
            channel=channel or self.channel,
            ts=ts,
            thread_ts=thread_ts,
            text=f"<@{BOT_USER_ID}> {text}",
            kind="app_mention",
        )
        return self.events.event(event, **kw), ts

    def message(
        self,
        user: str,
        text: str,
        *,
        channel: str | None = None,
        thread_ts: str | None = None,
        ts: str | None = None,
        channel_type: str = "channel",
        event_id: str | None = None,
        retry_num: int | None = None,
        **extra: Any,
    ) -> tuple[tuple[str, dict[str, str]], str]:
        ts = ts or self.fake.next_ts()
        event = self.events.message(
            user=user,
            channel=channel or self.channel,
            ts=ts,
            thread_ts=thread_ts,
            text=text,
            channel_type=channel_type,
            **extra,
        )
        return self.events.event(event, event_id=event_id, retry_num=retry_num), ts

    # what reached Slack
    def answers(self, channel: str | None = None) -> list[dict[str, Any]]:
        """Posts that are answers (have section blocks and are not help requests)."""
        out = []
        for p in self.fake.posts(channel or self.channel):
            blocks = p.get("blocks") or []
            if blocks and not is_help_request(p):
                out.append(p)
        return out

    def help_requests(self, channel: str | None = None) -> list[dict[str, Any]]:
        return [p for p in self.fake.posts(channel or self.channel) if is_help_request(p)]

    def reaction_adds(self, ts: str, channel: str | None = None) -> list[str]:
        """Names added (successfully) on a message, in order."""
        return [n for op, n, ok in self.fake.reaction_calls(channel or self.channel, ts) if op == "add" and ok]

    def reactions_now(self, ts: str, channel: str | None = None) -> list[str]:
        return list(self.fake.reactions.get((channel or self.channel, ts), []))


def is_help_request(post: dict[str, Any]) -> bool:
    """A help request: it has the Answer / Retry / Dismiss buttons (not only 👍/👎 ones)."""
    return any(
        b.get("type") == "actions"
        and any(
            str(e.get("action_id", "")).startswith(("threadwise_answer", "threadwise_retry", "threadwise_dismiss"))
            for e in b.get("elements") or []
        )
        for b in post.get("blocks") or []
    )


def route_note(post: dict[str, Any]) -> str:
    """The text of an answer's last context block (the route note)."""
    return [b for b in post.get("blocks") or [] if b.get("type") == "context"][-1]["elements"][0]["text"]


def vote_buttons(post: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The 👍/👎 buttons of an answer post, by action id ({} when it has none)."""
    return {
        e["action_id"]: e
        for b in post.get("blocks") or []
        if b.get("type") == "actions"
        for e in b.get("elements") or []
        if str(e.get("action_id", "")).startswith("threadwise_vote")
    }


def section_texts(post: dict[str, Any]) -> list[str]:
    """The mrkdwn texts of a post's section blocks, in order."""
    return [b["text"]["text"] for b in post.get("blocks") or [] if b.get("type") == "section"]


def all_text(post: dict[str, Any]) -> str:
    """Everything readable in a post: text, section texts and context texts."""
    parts = [post.get("text") or ""]
    for b in post.get("blocks") or []:
        parts.extend(_block_texts(b))
    return "\n".join(parts)
