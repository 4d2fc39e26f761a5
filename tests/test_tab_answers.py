"""A Docusaurus page of tabs (one per language) answers with every tab's label before its code,
through the real `threadwise ask` process, offline, on a real .mdx file: "Python:" and its
command, "JavaScript:" and its, not the first tab's command alone with no label."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.cli_helpers import ask, offline_folder

PAGE = """---
title: Install the client
---

import Tabs from '@theme/Tabs';
import TabItem from '@theme/TabItem';

# Install the client

Install the client library for your language with its package manager:

<Tabs groupId="language">
<TabItem value="py" label="Python" default>

```bash
pip install acme-client
```

</TabItem>
<TabItem value="js" label="JavaScript">

```bash
npm install @acme/client
```

</TabItem>
<TabItem value="go" label="Go">

```bash
go get example.com/acme/client
```

</TabItem>
</Tabs>

Then create a client with your API key and call `ping()` to check the connection.
"""


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    expenses = "# Expenses\n\nClaim a taxi in the expenses tool within 30 days.\n"
    return offline_folder(tmp_path_factory.mktemp("tabs"), {"install-client.mdx": PAGE, "expenses.md": expenses})


@pytest.mark.parametrize("question", ["how do I install the client library?", "how do i install the go client"])
def test_every_tab_is_quoted_with_its_label_before_its_code(workdir, question):
    answer = ask(workdir, question, "--source", "docs")["answer"] or ""
    for label, command in (
        ("Python", "pip install acme-client"),
        ("JavaScript", "npm install @acme/client"),
        ("Go", "go get example.com/acme/client"),
    ):
        # the label, then (its citation) its own code block, nothing between
        assert re.search(rf"{label}:(?: \[\d\])?\n\n```bash\n{re.escape(command)}\n```", answer), answer
    assert "TabItem" not in answer and "<Tabs" not in answer, answer
