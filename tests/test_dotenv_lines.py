"""A line of the ``.env`` file that python-dotenv cannot parse (``FOO BAR``, ``=value``,
``export`` alone, an unclosed quote) printed python-dotenv's warning three times (the file was
read by the settings twice and by the secrets once) and the command went on without it, so a
secret written on that line was simply missing. Now the file is read in one place and such a
line stops the command like a broken config.toml: exit 2, one line naming ``.env:LINE``,
never the line's text (it may hold a secret). Through the real ``threadwise`` process."""

from __future__ import annotations

import pytest

from tests.cli_helpers import write_offline_config, write_pages
from tests.test_cli_offline import threadwise

CAUSE = "not a NAME=value line"


@pytest.mark.parametrize(
    ("dotenv", "line"),
    [
        ("# the team's tokens\nSLACK_BOT_TOKEN xoxb-secret-1\n", 2),  # the = forgotten
        ("OTHER_TOOL=ok\n=secret-2\n", 2),  # the name forgotten
        ("export\nTAVILY_API_KEY=secret-3\n", 1),  # 'export' alone
        ("DISCORD_TOKEN=fine\n\nSLACK_APP_TOKEN='xapp-secret-4\n", 3),  # a quote never closed
    ],
)
def test_a_line_of_dotenv_that_cannot_be_parsed_stops_the_command_in_one_line_naming_it(tmp_path, dotenv, line):
    write_pages(tmp_path / "docs", {"leave.md": "# Leave\n\nBook leave in the wombat portal.\n"})
    write_offline_config(tmp_path, ["docs"])
    (tmp_path / ".env").write_text(dotenv)
    for command in (["ask", "how do I book leave?"], ["sources"]):
        result = threadwise(*command, "--config", "config.toml", cwd=tmp_path)
        assert result.returncode == 2, (command, result.returncode, result.stdout, result.stderr[-2000:])
        assert result.stderr.strip().splitlines() == [
            f"Configuration error: .env:{line}: {CAUSE} (quote a value holding spaces or #, close every quote, "
            "start a comment with #); nothing was used from the file"
        ], result.stderr
        assert "secret" not in result.stdout + result.stderr and result.stdout == "", result.stdout


def test_every_bad_line_is_named_and_a_good_file_is_read_quietly(tmp_path):
    write_pages(tmp_path / "docs", {"leave.md": "# Leave\n\nBook leave in the wombat portal.\n"})
    write_offline_config(tmp_path, ["docs"])
    (tmp_path / ".env").write_text("A B\nC=1\n\n=2\n")
    bad = threadwise("sources", "--config", "config.toml", cwd=tmp_path)
    assert bad.returncode == 2 and bad.stderr.count(CAUSE) == 1, bad.stderr
    assert bad.stderr.startswith("Configuration error: .env:1, .env:4: "), bad.stderr
    # comments, blank lines, 'export', quoted values with spaces and '#': read, and nothing said
    (tmp_path / ".env").write_text(
        "# tokens\n\nexport SLACK_BOT_TOKEN=\"xoxb 1 # 2\"\nTHREADWISE_KNOWLEDGE__K=2\nOTHER_TOOL='a b'\n"
    )
    good = threadwise("sources", "--config", "config.toml", cwd=tmp_path)
    assert good.returncode == 0 and good.stderr == "", good.stderr
    # the file is read: a bad value in it is named by its variable
    (tmp_path / ".env").write_text("THREADWISE_KNOWLEDGE__K=many\n")
    named = threadwise("sources", "--config", "config.toml", cwd=tmp_path)
    assert named.returncode == 2 and ".env: THREADWISE_KNOWLEDGE__K" in named.stderr, named.stderr
