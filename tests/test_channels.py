"""Per-channel settings (``[[channels]]``): which sources a channel searches, its experts,
its reply policy, web search and learning, applied at the Slack boundary; config validation."""

from __future__ import annotations

import json

import pytest

from bot.config import ConfigError, load_settings
from tests.fakes.chat_model import ScriptedChatModel
from tests.fakes.slack_api import SlackHarness, all_text, write_config

HANDBOOK = {
    "holidays.md": "# Holidays\n\nThe office closes on public holidays. Deploy freezes are announced by the "
    "release manager a week ahead.\n",
    "expenses.md": "# Expenses\n\nFile expenses in the finance tool within 30 days.\n",
}
RESTRICTED = "C0HANDBOOK"


def two_source_config(tmp_path, fake, channels: str, **kw):
    """The Slack test config with a second source folder ``handbook`` and ``channels`` appended."""
    config = write_config(tmp_path, fake, extra=channels, **kw)
    handbook = tmp_path / "handbook"
    handbook.mkdir(exist_ok=True)
    for name, text in HANDBOOK.items():
        (handbook / name).write_text(text, encoding="utf-8")
    text = config.read_text()
    kb = str(tmp_path / "kb")
    config.write_text(text.replace(f'sources = ["{kb}"]', f'sources = ["{kb}", "{handbook}"]'))
    return config


def prompts_text(model: ScriptedChatModel, since: int = 0) -> str:
    return "\n".join(str(m.content) for _, msgs in model.calls[since:] for m in msgs)


@pytest.fixture
async def restricted(tmp_path, fake):
    model = ScriptedChatModel()
    config = two_source_config(
        tmp_path,
        fake,
        f"""
[[channels]]
platform = "slack"
id = "{RESTRICTED}"
description = "the people team: handbook only"
sources = ["handbook"]
experts = ["UGROUPEXPERT"]
reply_policy = "mentions_only"
""",
    )
    harness = await SlackHarness(tmp_path, fake, config, model).open()
    yield harness
    await harness.close()


async def test_a_channel_restricted_to_one_source_never_cites_another(restricted):
    slack, model = restricted, restricted.model
    # elsewhere the best page for this question is deploy.md, from the other source
    req, _ = slack.mention("UASKER", "how do I deploy from the main branch?")
    await slack.send(req)
    assert "deploy.md" in all_text(slack.answers()[0])

    before = len(model.calls)
    req, ts = slack.mention("UASKER", "how do I deploy from the main branch?", channel=RESTRICTED)
    await slack.send(req)
    posts = slack.fake.posts(RESTRICTED)
    assert posts, "the restricted channel got an answer or a help request"
    shown = "\n".join(all_text(p) for p in posts)
    assert "deploy.md" not in shown and "oncall.md" not in shown
    assert "holidays.md" in shown  # its own source answers
    # the other source's text never even reached the model
    assert "make deploy" not in prompts_text(model, before)
    assert "Rollouts take ten minutes" not in prompts_text(model, before)


async def test_a_restricted_channel_pauses_rather_than_search_other_sources(restricted):
    slack = restricted
    slack.model.script["grade_documents"] = lambda msgs: json.dumps({"documents": [], "feedback": "none"})
    req, ts = slack.mention("UASKER", "who is on call? page the secondary", channel=RESTRICTED)
    await slack.send(req)
    (help_msg,) = slack.help_requests(RESTRICTED)
    text = all_text(help_msg)
    assert "<!subteam^SEXPERTS>" not in text and "<@UGROUPEXPERT>" in text  # the channel's experts
    assert "PagerDuty" not in prompts_text(slack.model)
    # the channel's expert can answer; the default expert is not an expert here
    # (mentions_only there: replies mention the bot)
    reply, _ = slack.mention("UEXPERT", "answer: ask in #oncall", thread_ts=ts, channel=RESTRICTED)
    await slack.send(reply)
    assert slack.answers(RESTRICTED) == []
    reply, _ = slack.mention("UGROUPEXPERT", "answer: ask in #oncall", thread_ts=ts, channel=RESTRICTED)
    await slack.send(reply)
    assert "ask in #oncall" in all_text(slack.answers(RESTRICTED)[0])


async def test_a_channels_reply_policy_replaces_the_platforms(restricted):
    slack = restricted
    for channel in (slack.channel, RESTRICTED):
        req, ts = slack.mention("UASKER", "who announces deploy freezes?", channel=channel)
        await slack.send(req)
        follow, _ = slack.message("UASKER", "and how long does it take?", thread_ts=ts, channel=channel)
        await slack.send(follow)
    assert len(slack.answers()) == 2  # default policy: the follow-up is answered
    assert len(slack.answers(RESTRICTED)) == 1  # mentions_only there


async def test_web_search_off_in_one_channel(tmp_path, fake, tavily):
    tavily.results = [{"title": "Swallows", "url": "https://birds.example/swallow", "content": "24 mph airspeed"}]
    model = ScriptedChatModel(
        script={
            "route": lambda m: json.dumps(
                {"question": "airspeed of a swallow?", "route": "websearch", "query": "swallow airspeed"}
            )
        }
    )
    config = two_source_config(
        tmp_path,
        fake,
        f"""
[[channels]]
platform = "slack"
id = "{RESTRICTED}"
web = false
""",
        web=f'enabled = true\napi_base_url = "{tavily.base_url}"',
    )
    harness = await SlackHarness(tmp_path, fake, config, model, tavily_api_key="tvly-test").open()
    try:
        for channel in (harness.channel, RESTRICTED):
            req, _ = harness.mention("UASKER", "airspeed of a swallow?", channel=channel)
            await harness.send(req)
        assert "birds.example" in "\n".join(all_text(p) for p in harness.fake.posts(harness.channel))
        assert "birds.example" not in "\n".join(all_text(p) for p in harness.fake.posts(RESTRICTED))
        assert len(tavily.requests) == 1
    finally:
        await harness.close()


@pytest.mark.parametrize(
    "entry, problem",
    [
        (
            'platform = "slack"\nid = "C1"\nsources = ["nowhere"]',
            "[[channels]] entry 1 (id = \"C1\"): sources: 'nowhere' is not one of",
        ),
        ('platform = "slack"\nname = "general"', "needs the channel id"),
        ('platform = "discord"', "needs an id or a name"),
        ('platform = "teams"\nid = "1"', '[[channels]] entry 1 (id = "1"): platform'),
        ('platform = "slack"\nid = "C1"\nreply_policy = "sometimes"', '[[channels]] entry 1 (id = "C1"): reply_policy'),
        ('platform = "discord"\nid = "1"\nexperts = ["U1"]', "experts is for Slack"),
        ('platform = "slack"\nid = "C1"\nsources = []', "empty"),
        ('platform = "slack"\nid = "C1"\ncolour = "red"', "unknown key"),
    ],
)
def test_bad_channel_entries_are_refused_naming_the_key(tmp_path, entry, problem):
    from tests.conftest import write_config as write_core_config

    config = write_core_config(tmp_path, extra=f"\n[[channels]]\n{entry}\n")
    with pytest.raises(ConfigError) as exc:
        load_settings(config)
    assert problem in str(exc.value)


def test_channel_entries_match_by_id_or_discord_name(tmp_path):
    from bot.chat.channels import reply_policy, run_scope
    from tests.conftest import write_config as write_core_config

    config = write_core_config(
        tmp_path,
        extra="""
[[channels]]
platform = "discord"
name = "#Support"
sources = ["kb"]
learning = false

[[channels]]
platform = "slack"
id = "C9"
web = false
reply_policy = "all"
""",
    )
    s = load_settings(config)
    assert run_scope(s, "discord", "123", "support") == {
        "sources": [str(tmp_path / "kb")],
        "web": True,
        "learning": False,
        "platform": "discord",
        "channel": "123",
    }
    assert run_scope(s, "discord", "123", "general")["sources"] is None
    assert run_scope(s, "slack", "C9") == {
        "sources": None,
        "web": False,
        "learning": True,
        "platform": "slack",
        "channel": "C9",
    }
    assert run_scope(s, "slack", "C9", restrict_sources=False)["sources"] is None
    assert reply_policy(s, "slack", "mentions_only", "C9") == "all"
    assert reply_policy(s, "slack", "mentions_only", "C8") == "mentions_only"


async def test_a_restricted_channel_uses_only_what_was_learned_in_it(restricted):
    from tests.test_learning import learned_only

    slack = restricted
    slack.model.script["grade_documents"] = learned_only
    learned = slack.runtime.learned
    learned.add(
        "who approves a hotfix?",
        "The on-call lead (learned elsewhere).",
        "Erik",
        platform="slack",
        channel=slack.channel,
    )
    req, ts = slack.mention("UASKER", "who approves a hotfix?", channel=RESTRICTED)
    await slack.send(req)
    shown = "\n".join(all_text(p) for p in slack.fake.posts(RESTRICTED))
    assert "learned elsewhere" not in shown and "answered by Erik" not in shown
    learned.add(
        "who approves a hotfix?", "The people lead (learned here).", "Gita", platform="slack", channel=RESTRICTED
    )
    req, ts = slack.mention("UASKER", "who approves a hotfix?", channel=RESTRICTED)
    await slack.send(req)
    answer = [a for a in slack.answers(RESTRICTED) if a["thread_ts"] == ts][0]
    assert "answered by Gita" in all_text(answer) and "answered by Erik" not in all_text(answer)
