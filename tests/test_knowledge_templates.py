"""Template syntax of documentation generators is removed from what the knowledge base
indexes, and the text a reader of the built page sees stays: on pages of each kind (Liquid
and Eleventy tags, Hugo shortcodes, Docusaurus MDX in .mdx and .md, Jinja of MkDocs macros),
written for these tests after each generator's documented syntax (tests/data/templates/README.md).
Code is content: a template tag shown in a code block stays, only its escapes go."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from graphs.knowledge import KnowledgeBase
from graphs.knowledge.templates import kind_of_file, strip_templates

DATA = Path(__file__).parent / "data" / "templates"
PAGES = sorted(p for p in DATA.iterdir() if p.suffix in (".md", ".mdx") and p.name != "README.md")
SYNTAX = re.compile(
    r"\{%.*?%\}|\{\{.*?\}\}|\{#.*?#\}|^\s*(?:import|export)\s.*\bfrom\b|<[A-Z][\w.]*[\s/>]|\{/\*", re.S | re.M
)


def prose_of(markdown: str) -> str:
    """``markdown`` without fenced code blocks and inline code spans."""
    out, fence = [], None
    for line in markdown.split("\n"):
        m = re.match(r"^\s*(`{3,}|~{3,})", line)
        if fence is None and m:
            fence = m.group(1)
            continue
        if fence is not None:
            if line.strip().startswith(fence) and not line.strip()[len(fence) :].strip():
                fence = None
            continue
        out.append(line)
    return re.sub(r"`+[^`\n]*`+", "", "\n".join(out))


def code_blocks(markdown: str) -> list[str]:
    return re.findall(r"^\s*```[^\n]*\n(.*?)^\s*```", markdown, re.S | re.M)


def stripped(name: str) -> str:
    return strip_templates((DATA / name).read_text(), kind_of_file(name))


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_no_template_syntax_is_left_in_the_prose_of_the_pages(page):
    text = strip_templates(page.read_text(), kind_of_file(page.name))
    assert SYNTAX.findall(prose_of(text)) == []
    assert len(text) > 0.5 * len(page.read_text())  # the text around the syntax stays


def test_liquid_tags_keep_what_the_reader_sees():
    team = stripped("liquid-team-page.md")
    assert "- #data-chapter —\u00a0Our home base: chapter news, questions and the weekly notes" in team
    assert "[working groups](/working-groups/)" in team  # a link's target tag is its address
    travel = stripped("liquid-travel-index.md")
    assert "New mileage rates from 1 March (03/01/2026)" in travel  # the block's title
    assert "the company pays [new mileage rates](/travel/mileage-rates/) for every trip by car." in travel
    assert "[What if the trip is for two\n    projects?](/travel/questions/#two-projects)" in travel
    tags = stripped("liquid-shortcodes.md")
    assert "\na sleeping fox\n" in tags  # a picture tag becomes its alt text, the file name goes
    assert "\na fox curled up in the snow\n" in tags and "float-right" not in prose_of(tags)
    assert "Describe every picture" in tags
    assert "A reader who cannot see the picture hears its description instead" in tags  # a block tag's body
    assert "A callout without a heading shows only its body." in tags
    assert "- #handbook-editors\n" in tags and "[expenses form](forms/expenses.pdf)" in tags


def test_liquid_in_code_blocks_is_content_and_only_its_escapes_go():
    tags = stripped("liquid-shortcodes.md")
    blocks = code_blocks(tags)
    # {% raw %}...{% endraw %} is how the page shows a tag: the built page shows the tag
    assert '{% picture "_pictures/fox.jpg"\n  "a sleeping fox" %}\n' in blocks
    assert '[Editing checklist]({% page "editing/checklist" %})\n' in blocks
    assert '{% callout "Before you publish" %}\n  Ask a second editor to read the page.\n{% endcallout %}\n' in blocks
    install = stripped("mkdocs-macros-install.md")
    assert "raw/{{report_version}}/compose.yml" in install  # in its code block, untouched
    assert "{% include" not in install and "{: #steps}" not in install and "## Step-by-step setup\n" in install
    assert "## Stopping and starting again\n" in install
    variables = stripped("mkdocs-macros-variables.md")
    assert "{{" not in variables and "# Release notes\n" in variables


def test_mustache_sections_go_their_text_stays_and_placeholders_show_as_blanks():
    policy = stripped("mustache-policy.md")
    assert "[company short name] grants access to production systems" in policy
    assert "approved by the [security officer title] within two business days" in policy
    assert "questions go to [email]." in policy  # one word, not an empty gap
    assert "Remote staff connect through the company VPN" in policy  # a section's body
    assert "reachable only from the office network" not in policy  # its inverted section: the alternative
    assert "config." not in policy and "reviewSchedule" not in policy  # comment and partial go
    assert "```\n{{#hasRemoteWorkers}}...{{/hasRemoteWorkers}}\n```" in policy  # code is content
    assert strip_templates("Version {{ version }} is out.") == "Version [version] is out."  # Jinja's too
    assert strip_templates("By {{ page.maintainer.email | lower }}.") == "By [maintainer email]."
    assert strip_templates("[Download]({{ site.url }}/get)") == "[Download](/get)"  # an address: computed
    # a blank before "(" stays a blank, and a link whose address the template computes is its text
    assert strip_templates("The {{approver_role}}(s) approve it.") == "The [approver role] (s) approve it."
    assert strip_templates("[{{ form_title }}]({{ form_url }}) today") == "[form title] today"
    # a default filter's text is what the page says when the variable is unset: it stays in the blank
    fallback = "Your buddy is [buddy, or else your team lead]."
    assert strip_templates('Your buddy is {{ buddy | default("your team lead") }}.') == fallback  # Jinja
    assert strip_templates("Your buddy is {{ buddy | default: 'your team lead' }}.") == fallback  # Liquid
    assert strip_templates('Your buddy is {{ .Params.buddy | default "your team lead" }}.') == fallback  # Hugo
    only = "{{^sso}}Sign in with your password.{{/sso}}"  # no section of its own: the text stays
    assert strip_templates(only) == "Sign in with your password."
    assert strip_templates("{{#if sso}}Sign in with SSO.{{else}}Use a password.{{/if}}") == "Sign in with SSO."
    assert strip_templates("{% if sso %}Sign in with SSO.{% else %}Use a password.{% endif %}") == "Sign in with SSO."


def test_restructuredtext_roles_and_substitutions_read_as_their_words(tmp_path):
    page = stripped("sphinx-roles.rst")
    assert "Add a domain in **Admin** and pick **Settings > Domains**." in page
    assert "Or open **Project name > Settings**." in page  # a placeholder, not a tag
    assert "See the domain guide and ssl certificates,\nor versions and build limits." in page
    assert "Docsy Cloud and org brand users" in page  # defined on the page / only named
    assert "replace::" not in page and "|brand|" not in page  # the definition is not shown
    spaced = strip_templates(".. |nbsp| unicode:: 0xA0\n   :trim:\n\nPress Enter |nbsp| twice.\n", "rst")
    assert spaced == "\nPress Enter   twice.\n"  # a character by its code, its options gone
    assert "set `DOCSY_TOKEN`; call `docsy.api.build` and read PEP 8 and webhook." in page
    assert "An SSO (single sign-on) login." in page
    assert "Write ``:doc:`path``` in your own pages" in page  # an inline literal is content
    myst = strip_templates("See {doc}`the guide <guides/x>` and {ref}`build-limits`.", "markdown")
    assert myst == "See the guide and build limits."
    src = tmp_path / "src"
    src.mkdir()
    (src / "domains.rst").write_text((DATA / "sphinx-roles.rst").read_text())
    kb = KnowledgeBase(tmp_path / "index", [src], chunk_size=800, chunk_overlap=20)
    kb.reindex()
    text = " ".join(chunk.text for chunk, _ in kb.snapshot.file_chunks("domains.rst"))
    assert ":doc:" not in text.replace("``:doc:`path```", "") and "|brand|" not in text and "replace::" not in text
    assert "**Settings > Domains**" in text


def test_hugo_shortcodes():
    languages = stripped("hugo-language-settings.md")
    assert "language key" in languages  # glossary-term keeps its term
    assert "datatable" not in languages and '"_key"' not in languages  # a data table's keys are not text
    assert "```hugo\n[languages.de]\nweight = 2\ntitle = 'Unser Projekt'\n```" in languages  # code-toggle is code
    assert "```hugo\ndisableLanguages = ['de']\n```" in languages
    highlight = stripped("hugo-highlight-shortcode.md")
    assert "{{< highlight LANG OPTIONS >}}" in highlight  # the escaped form {{</* */>}} shows as the shortcode
    assert "```python\nfor attempt in range(3):\n" in highlight
    assert "{{</*" not in highlight


def test_mdx_imports_comments_and_components():
    tabs = stripped("docusaurus-tabs.mdx")
    assert "import Tabs from '@theme/Tabs';\nimport TabItem" in tabs  # the jsx example block stays whole
    # a tab is a list item of its label, its content under it
    assert "- Linux:\n\n  Press Ctrl + Alt + T to open a terminal." in tabs
    assert "- macOS:\n\n  Press Command + K to clear it." in tabs
    assert "Tea is brewed for three minutes ☕" in prose_of(tabs)
    assert "## Keeping tabs in step\n" in tabs
    install = stripped("docusaurus-install.mdx")
    assert "## Requirements\n" in install and "VersionTable" not in install
    assert "```bash npm2yarn\nnpm install --prefix website\n```" in install
    assert "<summary>Using a different package manager</summary>" in install  # HTML is not MDX syntax
    reminder = stripped("docusaurus-md-tabs.md")  # a .md page importing components is read as MDX
    assert "<Tabs" not in reminder and "import " not in prose_of(reminder)
    assert "const reminder = await client.reminders.schedule({" in reminder  # a tab's code block stays


def test_plain_text_and_unknown_syntax_are_left_alone():
    text = "Use {braces} and {{ in prose }} carefully"
    assert strip_templates(text, "text") == text
    assert strip_templates("a {b} c", "markdown") == "a {b} c"
    assert strip_templates("no template here", "mdx") == "no template here"


def test_the_knowledge_base_indexes_pages_without_template_syntax(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for page in PAGES:
        (src / page.name).write_text(page.read_text())
    kb = KnowledgeBase(tmp_path / "index", [src], chunk_size=800, chunk_overlap=20)
    kb.reindex()
    hits = kb.search(["which slack channel is the data chapter's home base"], 3)
    assert any("#data-chapter" in h["text"] for h in hits)
    for page in PAGES:
        for chunk, _ in kb.snapshot.file_chunks(page.name):
            assert SYNTAX.findall(prose_of(chunk.text)) == [], (page.name, chunk.text[:300])


def test_a_markdown_page_importing_components_is_read_as_mdx_wherever_the_import_is():
    page = (
        "# Albums\n\nName each album folder after the year, as in `2024 Live`.\n\n"
        "import ArtworkNames from './\\_artwork-names.md';\n\n"
        "<ArtworkNames />\n\nKeep bonus discs in a folder of their own.\n"
    )
    text = strip_templates(page, kind_of_file("albums.md"))
    assert "import" not in text and "<ArtworkNames" not in text
    assert "as in `2024 Live`." in text and "Keep bonus discs in a folder of their own." in text
    # plain Markdown with code that imports, or prose about imports, is not MDX
    for plain in (
        "# Use\n\n```js\nimport React from 'react';\n```\n\n<Tabs> is a component.\n",
        "# Python\n\nimport os from the standard library.\n\nimport json\n",
        'Go:\n\nimport "fmt"\n\n<Tabs> stays.\n',
    ):
        assert strip_templates(plain, "markdown") == plain


DEVICES = """# Devices

{{companyShortName}} lends a laptop to every employee on their first day.

## Your workspace admin

Your workspace admin is {{adminEmail}}; write to them to get a laptop replaced.

## Personal phones

{{#supportPersonalPhones}}
Personal phones may be used for work once they are enrolled in device management.
{{/supportPersonalPhones}}
{{^supportPersonalPhones}}
Personal phones may never be used for work, not even for email.
{{/supportPersonalPhones}}
"""


def test_an_answer_from_a_policy_template_shows_blanks_and_one_branch(tmp_path):
    """Answers from Mustache policy templates read "Your workspace admin is admin email." and
    quoted a section and its inverted section side by side ("may be used ... once enrolled",
    "may never be used"); now a placeholder shows as a blank in brackets and only the section's
    branch is quoted. Through the real `threadwise ask`."""
    from tests.cli_helpers import offline_folder
    from tests.test_cli_offline import threadwise

    offline_folder(tmp_path, {"devices.md": DEVICES, "lunch.md": "# Lunch\n\nThe canteen opens at noon on weekdays.\n"})

    def ask(question: str) -> str:
        result = threadwise("ask", "--config", "config.toml", "--source", "docs", question, cwd=tmp_path)
        assert result.returncode == 0, result.stderr[-2000:]
        return result.stdout.split("\nSources:", 1)[0]

    admin = ask("who is our workspace admin?")
    assert "Your workspace admin is [admin email]" in admin and "admin is admin email" not in admin, admin
    phones = ask("can I use my personal phone for work?")
    assert "once they are enrolled in device management" in phones, phones
    assert "may never be used" not in phones and "{{" not in phones, phones


def test_a_long_template_page_converts_without_stalling_the_index():
    """A page of thousands of variables, unclosed else tags or Mustache sections took from 24 s to
    minutes to convert (each tag scanned the text before or after it), and its sync stalled;
    conversion reads each tag once. The bound is generous, a guard against a stall, not a timing."""
    import time

    pages = [
        "Ask {{ owner }} or {{ team.lead }} first. " * 3000,
        "{% if sso %}Use SSO {% else %} a password. " * 1000,
        "{{#if sso}}Use SSO{{else}} a password. " * 1000,
        "{{#vpn}}Use the VPN{{/vpn}} {{^vpn}}Use the office network. " * 1000,
        "## Step {#step}\n\nRun the installer.\n\n" * 1000,
    ]
    for page in pages:
        started = time.monotonic()
        text = strip_templates(page)
        assert time.monotonic() - started < 10, page[:40]
        assert "{{" not in text and "{%" not in text, page[:40]
