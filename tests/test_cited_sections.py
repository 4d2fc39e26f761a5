"""A source under an answer names the sections it quotes. Through the real `threadwise ask`,
offline, on a page written here."""

from __future__ import annotations

from tests.cli_helpers import offline_folder
from tests.test_cli_offline import threadwise

SCANNER = """# Scanner agent

## Installing the scanner agent

Install the scanner agent with `apt install scanagent` on every build host.

```sh
# the agent's settings
ls /etc/scanagent
```

## Removing the scanner agent

Remove the scanner agent with `apt remove scanagent`; its settings stay in /etc/scanagent.
"""


def test_an_answer_quoting_two_sections_of_one_page_names_both(tmp_path):
    """An answer quoting the installing and the removing sections of one page listed the page as
    "Scanner agent > Installing the scanner agent" only; now its source names both sections."""
    offline_folder(tmp_path, {"scanner.md": SCANNER, "lunch.md": "# Lunch\n\nThe canteen opens at noon on weekdays.\n"})
    result = threadwise(
        "ask",
        "--config",
        "config.toml",
        "--source",
        "docs",
        "how do I install and remove the scanner agent?",
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    out = result.stdout
    assert "apt install scanagent" in out and "apt remove scanagent" in out, out
    assert "[1] scanner.md — Scanner agent > Installing the scanner agent; Removing the scanner agent" in out, out
