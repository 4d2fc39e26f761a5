"""Text from documents, questions and models shows on Slack as written, through signed events
into bolt and the fake Web API, the exact text posted checked: an emoji code (``:x:``,
``:warning:``) is not an emoji (a word joiner after its first colon; a time ``10:30:00`` is
left alone), and ``<@U…>``, ``<!channel>``, ``<!here>``, ``@everyone``, ``<#C…>``,
``<https://…|label>`` and ``&lt;`` are text, never a mention, a broadcast or a hidden link.
Code keeps its text: ``:x:`` inside backticks is not broken."""

from __future__ import annotations

import json
import re

import pytest

from tests.fakes.chat_model import ScriptedChatModel
from tests.fakes.slack_api import SlackHarness, all_text, write_config

WJ = "\u2060"
LIVE = re.compile(r"<[!@#][^>]*>|<https?://[^>]*\|")  # mentions, broadcasts, channels, masked links
EMOJI = re.compile(r":(?!\d+:)[a-z0-9_+'-]+:")  # an emoji code Slack would show as a picture

INCIDENTS = """---
title: "Incidents :fire: <!channel>"
---
# Incident review

An incident is declared with :rotating_light: in the channel at 10:30:00 and reviewed the next morning.

Failed checks are marked :x: and flaky ones :warning: in the weekly incident report.

Escalations go to <@U0VICTIM> and <!channel> and <!here> and @everyone and <#C0SECRET> first.

The incident form lives at <https://evil.test|click> and &lt;!channel&gt; is what the form writes.

To test the incident bot, type `:x: <@U0VICTIM>` in the test channel.
"""


def posted(harness: SlackHarness) -> str:
    return "\n".join(all_text(p) + "\n" + json.dumps(p.get("blocks") or []) for p in harness.fake.posts())


@pytest.fixture
async def quoting(tmp_path, fake):
    """The offline composer: answers quote the documents' own sentences."""
    config = write_config(tmp_path, fake, extra='\n[graph]\ncomposer = "extractive"\ngraders = "lexical"\n')
    (tmp_path / "kb" / "incidents.md").write_text(INCIDENTS)
    harness = await SlackHarness(tmp_path, fake, config, ScriptedChatModel()).open()
    yield harness
    await harness.close()


SHOWN = [
    f"An incident is declared with :{WJ}rotating_light: in the channel at 10:30:00 and reviewed the next morning.",
    f"Failed checks are marked :{WJ}x: and flaky ones :{WJ}warning: in the weekly incident report.",
    f"Escalations go to &lt;@U0VICTIM&gt; and &lt;!channel&gt; and &lt;!here&gt; and @{WJ}everyone and"
    " &lt;#C0SECRET&gt; first.",
    "The incident form lives at &lt;https://evil.test|click&gt; and &lt;!channel&gt; is what the form writes.",
    "To test the incident bot, type `:x: &lt;@U0VICTIM&gt;` in the test channel.",
]


async def test_document_text_is_posted_as_written(quoting):
    req, _ = quoting.mention("UASKER", "how is an incident declared and reviewed?")
    await quoting.send(req)
    (answer,) = quoting.answers()
    text = posted(quoting)
    for shown in SHOWN:
        assert shown in all_text(answer), all_text(answer)
    assert LIVE.findall(text) == []
    assert EMOJI.findall(re.sub(r"`[^`]*`", "", text)) == []  # code keeps its :x:, prose has none
    # the document's title (front matter) is shown in the sources as written too
    assert f"Incidents :{WJ}fire: &lt;!channel&gt;" in all_text(answer), all_text(answer)


async def test_a_question_echoed_in_a_help_request_is_text(tmp_path, fake):
    stuck = ScriptedChatModel(script={"grade_documents": json.dumps({"documents": [], "feedback": "none"})})
    harness = await SlackHarness(tmp_path, fake, write_config(tmp_path, fake), stuck).open()
    try:
        # what Slack sends for a typed "<#C0SECRET>", "<https://evil.test|click>" and "&lt;": escaped
        req, _ = harness.mention(
            "UASKER",
            "is :x: ok at 10:30:00? &lt;@U0VICTIM&gt; &lt;!channel&gt; &amp;lt; &lt;https://evil.test|click&gt;",
        )
        await harness.send(req)
        (request,) = harness.help_requests()
        text = all_text(request) + json.dumps(request["blocks"])
        quoted = (
            f"> is :{WJ}x: ok at 10:30:00? &lt;@U0VICTIM&gt; &lt;!channel&gt; &amp;lt; &lt;https://evil.test|click&gt;"
        )
        assert quoted in all_text(request), all_text(request)
        assert re.findall(r"<[!@#][^>]*>", text) == ["<@UEXPERT>", "<!subteam^SEXPERTS>"] * text.count("<@UEXPERT>")
        assert LIVE.findall(text.replace("<@UEXPERT>", "").replace("<!subteam^SEXPERTS>", "")) == []
    finally:
        await harness.close()


async def test_model_output_is_posted_as_written(long_answers, slack):
    slack.model.script["generate"] = (
        "Deploys are marked :white_check_mark: when done and :x: when failed, at 10:30:00 UTC.\n\n"
        "Ask <@U0VICTIM> or <!channel> or <!here> or @everyone in <#C0SECRET>, see <https://evil.test|click> "
        "and &lt;!channel&gt;.\n\n"
        "Run `make deploy :x:` then:\n\n```\necho ':x: <@U0VICTIM>'\n```"
    )
    req, _ = slack.mention("UASKER", "how do I deploy?")
    await slack.send(req)
    (answer,) = slack.answers()
    text = all_text(answer)
    assert f"Deploys are marked :{WJ}white_check_mark: when done and :{WJ}x: when failed, at 10:30:00 UTC." in text, (
        text
    )
    assert (
        f"Ask &lt;@U0VICTIM&gt; or &lt;!channel&gt; or &lt;!here&gt; or @{WJ}everyone in &lt;#C0SECRET&gt;, see "
        "&lt;https://evil.test|click&gt; and &amp;lt;!channel&amp;gt;." in text
    ), text
    assert "Run `make deploy :x:` then:" in text and "```\necho ':x: &lt;@U0VICTIM&gt;'\n```" in text, text
    assert LIVE.findall(posted(slack)) == []


async def test_model_links_are_posted_whole(long_answers, slack):
    """Links a model writes are one Slack link each, whatever their address or text holds:
    no ")" or "](" is left behind."""
    slack.model.script["generate"] = (
        "Leaders are elected with [Raft](https://en.wikipedia.org/wiki/Raft_(algorithm)) in every cluster.\n\n"
        "[![build](https://ci.test/badge.svg)](https://ci.test/runs) shows the last run, [[1]](https://x.test/1) "
        'the paper, [`f(x)`](https://api.test/f) the call and [spec](<https://x.test/a b> "The (old) spec") '
        "the spec.\n\nFill in the \\[draft\\] form \\(v2\\), not \\[the old one](https://evil.test), by 5 \\* 3."
    )
    req, _ = slack.mention("UASKER", "how do I deploy?")
    await slack.send(req)
    (answer,) = slack.answers()
    text = all_text(answer)
    assert "Leaders are elected with <https://en.wikipedia.org/wiki/Raft_(algorithm)|Raft> in every cluster." in text
    assert (
        "<https://ci.test/runs|build> shows the last run, <https://x.test/1|[1]> the paper, "
        "<https://api.test/f|`f(x)`> the call and <https://x.test/a%20b|spec> the spec." in text
    ), text
    # Markdown's escapes show their character, and an escaped bracket starts no link
    assert "Fill in the [draft] form (v2), not [the old one](https://evil.test), by 5 \\* 3." in text, text
    assert "evil.test|" not in text and "<https://evil.test" not in text
