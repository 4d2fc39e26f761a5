"""`threadwise slack manifest [--http URL]`: the app manifest for Socket Mode or HTTP mode,
with every Request URL set, and with the events and the command the bot listens for."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def manifest(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith("THREADWISE_")}
    return subprocess.run(
        [sys.executable, "-m", "bot", "slack", "manifest", *args],
        env={**base, "PYTHONPATH": str(ROOT), **(env or {})},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_socket_mode_manifest_is_the_shipped_one():
    proc = manifest()
    assert proc.returncode == 0, proc.stderr
    data = yaml.safe_load(proc.stdout)
    assert data == yaml.safe_load((ROOT / "slack-manifest.yml").read_text())
    assert data["settings"]["socket_mode_enabled"] is True
    assert "request_url" not in data["settings"]["event_subscriptions"]
    assert "SLACK_APP_TOKEN" in proc.stderr


def test_http_mode_sets_every_request_url():
    proc = manifest("--http", "https://bot.example.com")
    assert proc.returncode == 0, proc.stderr
    data = yaml.safe_load(proc.stdout)
    url = "https://bot.example.com/slack/events"
    assert data["settings"]["socket_mode_enabled"] is False
    assert data["settings"]["event_subscriptions"]["request_url"] == url
    assert data["settings"]["interactivity"]["request_url"] == url
    assert [c["url"] for c in data["features"]["slash_commands"]] == [url]
    assert "SLACK_SIGNING_SECRET" in proc.stderr


def test_http_mode_follows_the_configured_path_or_the_urls_own():
    proc = manifest("--http", "https://bot.example.com:8443/", env={"THREADWISE_SLACK__HTTP_PATH": "/hooks/slack"})
    data = yaml.safe_load(proc.stdout)
    assert data["settings"]["event_subscriptions"]["request_url"] == "https://bot.example.com:8443/hooks/slack"
    data = yaml.safe_load(manifest("--http", "https://gw.example.com/teams/a/events").stdout)
    assert data["settings"]["interactivity"]["request_url"] == "https://gw.example.com/teams/a/events"


def test_http_mode_refuses_an_address_slack_would_refuse():
    proc = manifest("--http", "http://bot.example.com")
    assert proc.returncode == 2
    assert "not an https:// URL" in proc.stderr and proc.stdout == ""


def test_manifest_subscribes_to_what_the_bot_listens_for():
    """Each event and the slash command registered in the Slack app are in the manifest."""
    data = yaml.safe_load(manifest().stdout)
    app = (ROOT / "bot" / "platforms" / "slack" / "app.py").read_text()
    events = set(re.findall(r'@app\.event\("([a-z_]+)"\)', app))
    subscribed = set(data["settings"]["event_subscriptions"]["bot_events"])
    assert events and all(e in subscribed or any(s.startswith(e + ".") for s in subscribed) for e in events)
    command = re.search(r'^COMMAND = "(/\w+)"', app, re.M).group(1)
    assert command in [c["command"] for c in data["features"]["slash_commands"]]
    assert data["settings"]["interactivity"]["is_enabled"] is True
