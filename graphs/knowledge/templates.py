"""Removing template syntax from documentation sources, keeping the text a reader sees.

Documentation sites are written in Markdown plus the syntax of their generator, which the
generator replaces when it builds the site; indexed as written, that syntax ends up in
answers (``{% slack_channel "admins-github" %}``). :func:`strip_templates` removes it:

- Liquid (Jekyll, Eleventy), Nunjucks and Jinja (MkDocs macros): ``{% tag %}``,
  ``{{ expression }}``, ``{# comment #}``, whitespace-control forms ``{%- -%}``;
  ``{% raw %}``/``{% endraw %}`` and ``{{ "literal" }}`` escapes are undone (their text is
  what the page shows); ``{% comment %}`` blocks go; a control tag (``if``, ``for``,
  ``include``, ``set``, ...) goes; a block tag (``{% alert %}...{% endalert %}``) goes
  and its inner text stays; a custom tag that prints something keeps its readable
  arguments (``{% slack_channel "admins-github" %}`` -> ``#admins-github``,
  ``{% image "a.png" "secure password tips" %}`` -> ``secure password tips``,
  ``{{< new-in 0.153.0 >}}`` -> ``new in 0.153.0``);
  a tag inside a link target becomes its first argument (the address it computes).
- Variables (Mustache and Handlebars ``{{companyShortName}}``, ``{{{security_officer}}}``;
  Liquid, Jinja and Hugo ``{{ site.title }}``, ``{{ page.url | relative_url }}``) become a
  placeholder in brackets, their words (without ``site.``, ``page.``, ...): ``[company short name]``, ``[title]``
  (nothing in a link target); other outputs, ``{{! comments }}`` and ``{{> partials}}`` go.
- Conditionals keep their first branch: section tags ``{{#name}}`` and ``{{/name}}`` go and the
  text between them stays; an inverted section ``{{^name}}...{{/name}}`` goes when the page has
  a ``{{#name}}`` section (the alternative of it), else its text stays; ``{{else}}`` branches
  and Liquid's and Jinja's ``{% else %}``/``{% elsif %}``/``{% elif %}`` branches go.
- Hugo shortcodes ``{{< name args >}}`` / ``{{% name args %}}`` and their closing forms:
  the same rules; code shortcodes (``highlight``, ``code``, ``code-toggle``) become fenced
  code blocks; ``{{</* ... */>}}`` escapes show as ``{{< ... >}}``.
- MDX (``kind="mdx"``): ``import``/``export`` statements, ``{/* comments */}``, JSX
  components (a capitalised tag name): the tags go and the text inside stays, a
  ``label``/``title`` prop becomes a line of its own; a tab (``<TabItem label="Python">``)
  becomes a list item of its label with its content indented under it; Docusaurus ``mdx-code-block``
  fences are unwrapped (their content is rendered MDX, not code).
- Admonitions: GitBook's ``{% hint style="warning" %}`` ... ``{% endhint %}`` and MDX
  admonition components (``<Warning>``, ``<Info>``, ``<Note>``, ``<Tip>``, ...) become a
  ``:::warning`` ... ``:::`` container, which :func:`graphs.knowledge.sources.clean_markdown`
  writes as its text labelled by its kind ("Warning: ..."); inside a line the label alone.
- Attribute lists closing a line (MkDocs ``{: #id }``, ``{ .md-button }``, heading ids
  ``{#id}``).
- reStructuredText (``kind="rst"``) and MyST's ``{role}`` form in Markdown: interpreted text
  roles show their words (``:doc:`Custom domains </guides/domains>``` -> ``Custom domains``,
  a bare target as its last part's words, ``:guilabel:`Save``` -> ``**Save**``,
  ``:menuselection:`Admin --> Settings``` -> ``**Admin > Settings**``, ``:pep:`8``` -> ``PEP 8``,
  ``:envvar:``/``:option:``/``:program:``/``:file:``/``:py:...:`` as inline code); substitutions
  (``|brand_name|``) defined on the page by ``.. |x| replace:: text`` take that text (the
  definition line goes), others their name's words (their definitions live in the site's configuration).

Code is content: inside fenced code blocks and inline code spans only the escapes above
are undone (a Liquid tag in a code block of a page about Liquid is what the page shows).
Indented code blocks are not recognised here (telling them from list continuations needs
a Markdown parser); the escapes there stay as written.

Sources of the syntax: the Liquid reference (shopify.github.io/liquid), Jinja's template
designer documentation, the mustache(5) manual (mustache.github.io), Handlebars' guide,
Hugo's shortcode documentation, MDX 2's syntax (mdxjs.com) and Docusaurus' ``mdx-code-block``.
"""

from __future__ import annotations

import bisect
import re
import textwrap
from collections.abc import Callable, Iterable

from graphs.knowledge.sources import admonition_label

KINDS = ("markdown", "mdx", "html", "liquid", "jinja", "hugo", "mkdocs", "text", "rst")
"""The kinds :func:`strip_templates` knows. ``markdown`` (a ``.md`` file of an unknown
generator), ``html`` (a page converted to Markdown), ``liquid``, ``jinja``, ``hugo`` and
``mkdocs`` apply every template rule but the MDX ones (a page's generator is rarely known,
and the syntaxes do not collide); ``mdx`` adds the MDX rules, and so does ``markdown`` when
the page holds an ES module ``import ... from '...'`` or ``export`` line outside code
(Docusaurus reads ``.md`` files as MDX too, and pages import components anywhere in them);
``text`` changes nothing; ``rst`` (reStructuredText) applies only the role and substitution
rules."""

TEMPLATES_ID = "templates-11"
"""Names these rules; part of the index's chunking id, so a change of them rebuilds the index.
3: GitBook hints and MDX admonition components kept as ``:::kind`` containers.
4: Mustache and Handlebars sections, comments and partials removed, tight placeholders as words.
5: one-word tight placeholders as words too.
6: reStructuredText and MyST roles and substitutions as their words.
7: placeholders in GUI labels and menu paths without their angle brackets.
8: substitution definition lines removed.
9: variables as bracketed placeholders (``[company short name]``), Liquid/Jinja/Hugo ones too;
   inverted sections with a section of their own name, and ``else`` branches, removed."""


def kind_of_file(name: str) -> str:
    """The :data:`KINDS` entry for a file name: ``mdx`` for ``.mdx``, ``rst`` for ``.rst``,
    ``text`` for ``.txt``, else ``markdown``."""
    lower = name.lower()
    if lower.endswith(".mdx"):
        return "mdx"
    if lower.endswith(".rst"):
        return "rst"
    if lower.endswith((".txt", ".text")):
        return "text"
    return "markdown"


# Tags that print nothing a reader sees: control flow, assignments, includes of other
# files (their text is not here), layout and comments (Liquid, Jinja, Nunjucks, Jekyll).
_SILENT_TAGS = frozenset(
    """
if elif elsif else endif unless endunless for endfor while endwhile case when endcase
assign capture endcapture set endset include include_relative include_cached render import from extends
block endblock macro endmacro call endcall filter endfilter with endwith autoescape endautoescape
cycle increment decrement break continue layout tablerow endtablerow liquid do trans endtrans
pluralize spaceless endspaceless verbatim endverbatim seo feed_meta asset_path stylesheet javascript
css js endcomment comment raw endraw
""".split()
)
# Shortcodes / tags whose body is code, shown as a fenced block.
_CODE_TAGS = frozenset({"highlight", "code", "code-toggle", "codeblock", "syntax", "prism"})
# Arguments that carry the text a tag shows (Hugo figure/img, custom Liquid tags, MDX props).
_TEXT_ARGS = ("label", "title", "caption", "alt", "text", "name", "description", "summary")

_FENCE = re.compile(r"^([ \t>]*)(`{3,}|~{3,})(.*)$")
_PLACE = "\ue000{}\ue001"  # placeholder of protected text (private-use characters)
_PLACE_RE = re.compile("\ue000(\\d+)\ue001")
_INLINE_CODE = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.S)
_RAW_BLOCK = re.compile(r"\{%-?\s*raw\s*-?%\}(.*?)\{%-?\s*endraw\s*-?%\}", re.S)
_LIQUID_COMMENT = re.compile(r"\{%-?\s*comment\s*-?%\}.*?\{%-?\s*endcomment\s*-?%\}", re.S)
# a Jinja comment; never the "{#" inside Mustache's "{{#section}}", and read at most 4,000
# characters on: a scan to the end of the page for each unclosed "{#" (Pandoc's "{#id}" heading
# ids, Mustache sections) was quadratic in the page's length
_JINJA_COMMENT = re.compile(r"(?<!\{)\{#.{0,4000}?#\}", re.S)
_HUGO_COMMENT = re.compile(r"\{\{/\*.*?\*/\}\}", re.S)
_HUGO_ESCAPE = re.compile(r"\{\{([<%])/\*(.*?)\*/([>%])\}\}", re.S)
_LITERAL_OUTPUT = re.compile(r"""\{\{-?\s*(?:"([^"]*)"|'([^']*)')\s*(?:\|[^{}]*)?-?\}\}""")
_TAG = re.compile(r"\{%-?\s*([A-Za-z_][\w.-]*)(.*?)-?%\}", re.S)
_SHORTCODE = re.compile(r"\{\{([<%])\s*(/?)\s*([A-Za-z_][\w./-]*)(.*?)\s*/?\s*[>%]\}\}", re.S)
# ``{{ expression }}``; Mustache/Handlebars also ``{{{raw}}}``, ``{{#section}}``, ``{{^inverted}}``,
# ``{{/section}}``, ``{{! comment }}``, ``{{> partial}}`` (not Hugo's ``{{<``/``{{%`` or ``{{/*``)
_OUTPUT = re.compile(r"\{\{\{?-?(?![<%]|/\*)(.*?)-?\}?\}\}", re.S)
_ARG = re.compile(r"""(?:([A-Za-z_][\w-]*)\s*[=:]\s*)?(?:"((?:[^"\\]|\\.)*)"|'((?:[^'\\]|\\.)*)'|([^\s"'=:,]+))""")
# Markdown attribute lists at the end of a line or heading (MkDocs attr_list ``{: #id }``,
# ``{ .md-button }``, Docusaurus / Pandoc heading ids ``{#id}``): styling, not text.
# GitBook's hint blocks (``{% hint style="info" %}`` ... ``{% endhint %}``): an admonition with its kind
_HINT = re.compile(r"""\{%-?\s*hint(?:\s+style\s*=\s*(?:"(\w+)"|'(\w+)'))?\s*-?%\}""")
_END_HINT = re.compile(r"\{%-?\s*endhint\s*-?%\}")
# MDX components that are admonitions (Mintlify, Nextra, Starlight's Aside is named by its type)
_BOX_COMPONENTS = frozenset({"note", "info", "tip", "warning", "danger", "caution", "important", "check"})
_ATTRIBUTE_LIST = re.compile(r"[ \t]*\{:?[ \t]*[#.][\w-]+(?:[ \t]+[#.]?[\w-]+(?:=\S+)?)*[ \t]*\}[ \t]*$", re.M)
_LINK_TARGET = re.compile(r"(?:\]\(|\]:\s*<?|\bhref=[\"']|\bsrc=[\"']|<)$")
# a link whose address was computed by the template (``[Register]({{ register_url }})``): its text
_EMPTY_LINK = re.compile(r"(?<!!)\[((?:[^\[\]\n]|\[[^\[\]\n]*\])+)\]\(\s*\)")
# how far before a tag its link target's opening can be ("](", "href='", "]: <" with spaces)
_LINK_TARGET_REACH = 40


def _in_link_target(m: re.Match[str]) -> bool:
    """Whether the tag ``m`` starts a link's address. Only the text just before it is read: a
    search of the whole text before every tag made a page of thousands of variables take
    seconds (quadratic in the page's length)."""
    return bool(_LINK_TARGET.search(m.string, max(0, m.start() - _LINK_TARGET_REACH), m.start()))


_PATH_LIKE = re.compile(
    r"^(?:[\w.-]*/[\w./#?=&%-]*|[\w-]+\.(?:html?|md|mdx|png|jpe?g|gif|svg|pdf|docx?|xlsx?|"
    r"pptx?|ya?ml|json|csv|txt|liquid|njk|webp))$",
    re.I,
)


def strip_templates(text: str, kind: str = "markdown") -> str:
    """``text`` (one document's Markdown, front matter already removed or not) without
    the template syntax of its generator, keeping the text a reader of the built page
    sees (see the module docstring for the rules).

    Args:
        text: the document.
        kind: one of :data:`KINDS`; unknown kinds are read as ``markdown``.

    Returns:
        The text without template syntax; code blocks and inline code keep their text
        (only escapes are undone). Never raises: text that does not parse as a template
        is left as it is.
    """
    if kind == "text" or not text:
        return text
    if kind == "rst":
        return rst_roles(text)
    mdx = kind == "mdx" or (kind == "markdown" and is_mdx(text))
    if not mdx and "{" not in text:  # also MyST's roles: "{doc}`...`"
        return text
    kept: list[str] = []

    def protect(s: str) -> str:
        kept.append(s)
        return _PLACE.format(len(kept) - 1)

    text = _protect_fences(text, protect, mdx)
    text = _MYST_ROLE.sub(lambda m: _role(m.group(1), m.group(2)), text)
    text = _INLINE_CODE.sub(lambda m: protect(_undo_escapes(m.group(0))), text)
    text = _RAW_BLOCK.sub(lambda m: protect(m.group(1)), text)
    text = _HUGO_ESCAPE.sub(lambda m: protect("{{" + m.group(1) + m.group(2) + m.group(3) + "}}"), text)
    text = _LIQUID_COMMENT.sub("", text)
    text = _first_branch(text)
    text = _JINJA_COMMENT.sub("", text)
    text = _HUGO_COMMENT.sub("", text)
    text = _code_shortcodes(text, protect)
    paired = _paired_names(text)
    text = _SHORTCODE.sub(
        lambda m: _replace_tag(m, m.group(3), m.group(4), paired, closing=bool(m.group(2)), shortcode=True), text
    )
    text = _HINT.sub(lambda m: _box(m, m.group(1) or m.group(2) or "info", closing=False), text)
    text = _END_HINT.sub(lambda m: _box(m, "", closing=True), text)
    text = _TAG.sub(lambda m: _replace_tag(m, m.group(1), m.group(2), paired), text)
    text = _LITERAL_OUTPUT.sub(lambda m: m.group(1) if m.group(1) is not None else m.group(2), text)
    text = _OUTPUT.sub(_replace_output, text)
    text = _EMPTY_LINK.sub(r"\1", text)
    if mdx:
        text = _strip_mdx(text)
    text = _ATTRIBUTE_LIST.sub("", text)
    text = re.sub(r"\n{3,}", "\n\n", text)
    while _PLACE_RE.search(text):  # placeholders may hold placeholders (a fence's escapes)
        text = _PLACE_RE.sub(lambda m: _indented(m, kept[int(m.group(1))]), text)
    return text


def _box(m: re.Match[str], kind: str, closing: bool) -> str:
    """An admonition's tag (GitBook's ``{% hint style="warning" %}``, Mintlify's ``<Warning>``)
    as the ``:::warning`` ... ``:::`` container :func:`graphs.knowledge.sources.clean_markdown`
    reads, where the tag stands on a line of its own: the text keeps its kind ("Warning: ...")
    as the built page shows it in its box. Inside a line the opening tag becomes the label
    ("Warning: ") and the closing one goes."""
    start = m.string.rfind("\n", 0, m.start()) + 1
    end = m.string.find("\n", m.end())
    alone = not m.string[start : m.start()].strip() and not m.string[m.end() : None if end < 0 else end].strip()
    if alone:
        return ":::" if closing else f":::{kind.lower()}"
    return "" if closing else f"{admonition_label(kind)} "


def _indented(m: re.Match[str], block: str) -> str:
    """``block`` put back at ``m`` (a placeholder): where only indentation comes before it on its
    line (a code block of a tab, indented under its label), its every line takes that indentation."""
    prefix = m.string[m.string.rfind("\n", 0, m.start()) + 1 : m.start()]
    return block.replace("\n", "\n" + prefix) if prefix and not prefix.strip() else block


def _undo_escapes(code: str) -> str:
    """Code as the built page shows it: ``{% raw %}`` wrappers, ``{{ "literal" }}`` and
    Hugo's ``{{</* */>}}`` escapes undone, everything else kept."""
    code = re.sub(r"\{%-?\s*(?:end)?raw\s*-?%\}", "", code)
    code = _LITERAL_OUTPUT.sub(lambda m: m.group(1) if m.group(1) is not None else m.group(2), code)
    return _HUGO_ESCAPE.sub(lambda m: "{{" + m.group(1) + m.group(2) + m.group(3) + "}}", code)


def _protect_fences(text: str, protect: Callable[[str], str], mdx: bool) -> str:
    """Fenced code blocks replaced by placeholders (escapes undone); an MDX
    ``mdx-code-block`` fence is unwrapped instead (its content is rendered MDX)."""
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m or (m.group(2)[0] == "`" and "`" in m.group(3)):
            out.append(lines[i])
            i += 1
            continue
        marker = m.group(2)
        j = i + 1
        while j < len(lines):
            c = _FENCE.match(lines[j])
            if c and c.group(2)[0] == marker[0] and len(c.group(2)) >= len(marker) and not c.group(3).strip():
                break
            j += 1
        if mdx and m.group(3).strip() == "mdx-code-block":
            out += lines[i + 1 : j]  # rendered, not shown as code
        else:
            out.append(protect(_undo_escapes("\n".join(lines[i : j + 1]))))
        i = j + 1
    return "\n".join(out)


def _code_shortcodes(text: str, protect: Callable[[str], str]) -> str:
    """``{{< highlight go >}}...{{< /highlight >}}``, ``{% highlight ruby %}...{% endhighlight %}``
    and the like as fenced code blocks (protected from the other rules)."""
    names = "|".join(re.escape(n) for n in sorted(_CODE_TAGS, key=len, reverse=True))
    pattern = re.compile(
        r"(?:\{\{[<%]\s*(" + names + r")\b([^}]*?)\s*(?<!/)[>%]\}\}(.*?)\{\{[<%]\s*/\s*\1\s*[>%]\}\})"
        r"|(?:\{%-?\s*(" + names + r")\b([^%]*?)-?%\}(.*?)\{%-?\s*end\4\s*-?%\})",
        re.S,
    )

    def fence(m: re.Match[str]) -> str:
        args = m.group(2) if m.group(1) else m.group(5)
        body = (m.group(3) if m.group(1) else m.group(6)).strip("\n")
        named = dict(_args(args or "")[1])
        positional = _args(args or "")[0]
        lang = named.get("lang") or named.get("file") or named.get("language") or (positional[0] if positional else "")
        lang = re.sub(r"[^\w+.-]", "", lang)
        return protect(f"```{lang}\n{body}\n```")

    return pattern.sub(fence, text)


def _paired_names(text: str) -> set[str]:
    """Names of the tags and shortcodes closed somewhere in ``text`` (``{% endalert %}``,
    ``{{< /note >}}``): their opening tags wrap text instead of printing their own."""
    names = {m.group(1) for m in re.finditer(r"\{%-?\s*end([A-Za-z_][\w-]*)\s*-?%\}", text)}
    names |= {m.group(1) for m in re.finditer(r"\{\{[<%]\s*/\s*([A-Za-z_][\w./-]*)\s*[>%]\}\}", text)}
    return names


def _args(raw: str, literal_words: bool = True) -> tuple[list[str], list[tuple[str, str]]]:
    """``(positional values, [(name, value), ...])`` of a tag's argument string. Unquoted
    values are text in Hugo shortcodes (``literal_words``) and variables in Liquid and
    Jinja tags (left out there)."""
    positional: list[str] = []
    named: list[tuple[str, str]] = []
    for m in _ARG.finditer(raw):
        quoted = m.group(4) is None
        value = next((g for g in (m.group(2), m.group(3), m.group(4)) if g is not None), "")
        if not quoted and not literal_words:
            continue
        if m.group(1):
            named.append((m.group(1).lower(), value))
        elif value not in ("|", "-", "/", ">"):
            positional.append(value)
    return positional, named


def _replace_tag(
    m: re.Match[str], name: str, raw_args: str, paired: set[str], closing: bool = False, shortcode: bool = False
) -> str:
    """What a reader sees in place of one tag (``shortcode``: a Hugo shortcode) (the rules
    of the module docstring)."""
    base = name.lower().rsplit("/", 1)[-1]
    if closing or base.startswith("end") and base[3:] in paired or base in _SILENT_TAGS:
        return ""
    positional, named = _args(raw_args, literal_words=shortcode)
    if _in_link_target(m):  # inside a link target: the address the tag computes
        return (positional or [v for _, v in named] or [""])[0]
    texts = [v for k, v in named if k in _TEXT_ARGS and v.strip()]
    if texts:
        return " ".join(texts)
    words = [p for p in positional if not _PATH_LIKE.match(p) and p.strip()]
    if base in paired:  # a block: its inner text is what it shows
        return " ".join(w for w in words if " " in w)  # a title-like argument, never a bare option
    if not words:
        return ""
    if base.endswith("channel"):  # a chat channel reference, shown as the channel's name
        return "#" + words[0].lstrip("#")
    if any(" " in w for w in words):  # a caption or a label (an image's alt text): shown as it is
        return " ".join(w for w in words if " " in w)
    if len(words) > 2:  # a list of options or keys (a data table's), not text
        return ""
    return f"{base.replace('_', ' ').replace('-', ' ')} {' '.join(words)}"  # "new in 0.153.0"


# a variable, as Mustache and Handlebars (``companyShortName``, ``{security_officer}`` of a
# triple-brace output) and Liquid, Jinja and Hugo (``site.title``, ``.Site.Title``, ``page.url |
# relative_url``) print one: a name or a dotted path, filters after a bar
_PLACEHOLDER = re.compile(
    r"\s*-?\s*\{?\.?((?:[A-Za-z_]\w*\.)*)([A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)*)\}?\s*(?:\|[^{}]*)?-?\s*"
)


def placeholder(name: str, fallback: str = "") -> str:
    """How a template's variable shows in the text: its name's words in brackets
    (``companyShortName`` -> ``[company short name]``), a blank the reader sees is to be filled,
    where the bare words read as part of the sentence ("Your workspace admin is admin email.").
    ``fallback``, the text the template prints when the variable is unset (a ``default`` filter),
    is kept in the blank: ``[buddy, or else your team lead]``, since it is part of what the page says."""
    words = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", name).replace("_", " ").lower()
    return "[" + words + (f", or else {fallback}" if fallback else "") + "]"


# the ``default`` filter of Jinja (``| default("x")``), Liquid (``| default: "x"``) and Hugo
# (``| default "x"``) with a literal: the text printed when the variable is unset
_DEFAULT_FILTER = re.compile(r"""\|\s*default\s*[(:]?\s*(["'])(.*?)\1""")


def _replace_output(m: re.Match[str]) -> str:
    """A ``{{ expression }}``: a variable (Mustache and Handlebars ``{{company}}``,
    ``{{{security_officer}}}``; Liquid, Jinja and Hugo ``{{ site.title }}``, with filters or
    not) becomes its :func:`placeholder` (its path's words without the generator's objects:
    ``[title]``, ``{{ maintainer.email }}`` ``[maintainer email]``), where the
    sentence would otherwise lose a word ("everyone at !"); in a link target, where an address
    is computed, nothing. Other expressions (calls, arithmetic, Handlebars helpers) compute
    text that is not in the source: removed (string literals were kept before)."""
    v = _PLACEHOLDER.fullmatch(m.group(1))
    if not v or v.group(2) in ("else", "this") or _in_link_target(m):
        return ""
    path = [p for p in v.group(1).split(".") if p and p.lower() not in _NAMESPACES]
    fallback = _DEFAULT_FILTER.search(m.group(1))
    blank = placeholder("_".join([*path, v.group(2)]), fallback.group(2).strip() if fallback else "")
    # "{{approver_role}}(s)" would read as a Markdown link "[approver role](s)": a space keeps it a blank
    return blank + " " if m.string.startswith("(", m.end()) else blank


# the generators' own objects a variable's path starts with, which name no part of its meaning
_NAMESPACES = frozenset({"site", "page", "config", "extra", "params", "data", "env", "this", "layout", "include"})


# Mustache's inverted section ``{{^name}}...{{/name}}`` is the text printed when ``name`` is
# unset, the alternative of its section ``{{#name}}...{{/name}}``; Handlebars' ``{{else}}`` (or
# ``{{^}}``) and Liquid's and Jinja's ``{% else %}``/``{% elsif %}``/``{% elif %}`` branch likewise.
_INVERTED_OPEN = re.compile(r"\{\{\^\s*([\w.-]+)\s*\}\}")
_SECTION_CLOSE = re.compile(r"\{\{/\s*([\w.-]+)\s*\}\}")
_SECTION_NAME = re.compile(r"\{\{#\s*([\w.-]+)")
_HANDLEBARS_ELSE = re.compile(r"\{\{~?\s*(?:else\b[^}]*|\^\s*)~?\}\}")
_HANDLEBARS_CLOSE = re.compile(r"\{\{~?/")
_LIQUID_ELSE = re.compile(r"\{%-?\s*(?:else|elsif|elif)\b.*?-?%\}", re.S)
_LIQUID_CLOSE = re.compile(r"\{%-?\s*end(?:if|unless|for)\s*-?%\}")


def _cut_to_next(text: str, opens: Iterable[re.Match[str]], closes: list[int]) -> str:
    """``text`` without each span from an opening match to the next of ``closes`` (sorted
    start offsets) after it; an opening with no close after it stays. One pass over the
    matches: a regular expression scanning to the end of the page for each unclosed tag was
    quadratic (a page of 500 unclosed ``{% else %}`` took most of a minute)."""
    out: list[str] = []
    pos = 0
    for m in opens:
        if m.start() < pos:
            continue
        i = bisect.bisect_left(closes, m.end())
        if i == len(closes):
            continue
        out.append(text[pos : m.start()])
        pos = closes[i]
    out.append(text[pos:])
    return "".join(out)


def _first_branch(text: str) -> str:
    """``text`` with only the first branch of each conditional: an inverted section goes when
    the page has its section too, an ``else`` branch goes. Both are quoted as facts otherwise,
    and they contradict each other ("provides laptops under MDM" and "does not support
    bringing your own device"); the first branch is the template's policy as written."""
    positive = set(_SECTION_NAME.findall(text))
    closes: dict[str, list[int]] = {}
    for c in _SECTION_CLOSE.finditer(text):
        closes.setdefault(c.group(1), []).append(c.end())
    out: list[str] = []
    pos = 0
    for m in _INVERTED_OPEN.finditer(text):  # the inverted section with its closing tag
        ends = closes.get(m.group(1), [])
        i = bisect.bisect_left(ends, m.end() + 1)
        if m.start() < pos or m.group(1) not in positive or i == len(ends):
            continue
        out.append(text[pos : m.start()])
        pos = ends[i]
    text = "".join([*out, text[pos:]])
    text = _cut_to_next(text, _HANDLEBARS_ELSE.finditer(text), [c.start() for c in _HANDLEBARS_CLOSE.finditer(text)])
    return _cut_to_next(text, _LIQUID_ELSE.finditer(text), [c.start() for c in _LIQUID_CLOSE.finditer(text)])


# ---- MDX ------------------------------------------------------------------------------
_MDX_STATEMENT = re.compile(r"^(?:import|export)\s")
# An ES module statement as MDX pages write them (mdxjs.com "ESM"): ``import X from './x.md';``,
# ``import {A, B} from '@site/c';``, ``export const x = ...``. Python's ``import x`` and Go's
# ``import "fmt"`` do not match, and code blocks are skipped.
_ESM_LINE = re.compile(
    r"^(?:import\s+(?:[\w$]+|\{[^}\n]*\}|\*\s+as\s+[\w$]+)(?:\s*,\s*\{[^}\n]*\})?\s+from\s+['\"][^'\"\n]+['\"]"
    r"|export\s+(?:const|let|var|function|default)\b)",
    re.M,
)


def is_mdx(text: str) -> bool:
    """Whether a ``.md`` page is written in MDX: a line outside fenced code blocks is an
    ES module ``import ... from '...'`` or ``export const|function|default`` statement,
    which plain Markdown never holds and which Docusaurus (which reads ``.md`` files as MDX)
    and other MDX generators take as code.

    Args:
        text: the page's Markdown.
    """
    if "import" not in text and "export" not in text:
        return False
    outside_code = _protect_fences(text, lambda block: "", mdx=False)  # the one fence walk of this module
    return _ESM_LINE.search(outside_code) is not None


_JSX_COMMENT = re.compile(r"\{/\*.*?\*/\}", re.S)
_JSX_PROPS = r"""(?:\s+[\w:-]+(?:=(?:"[^"]*"|'[^']*'|\{(?:[^{}]|\{[^{}]*\})*\}))?)*"""
_JSX_TAG = re.compile(r"<(/?)([A-Z][\w.]*)(" + _JSX_PROPS + r")\s*(/?)>", re.S)
_JSX_PROP = re.compile(r"([\w:-]+)=(?:\"([^\"]*)\"|'([^']*)')")
# A tab of a tab group (Docusaurus and Starlight ``<TabItem label="Python">``, Mintlify ``<Tab title="...">``)
_TAB = re.compile(r"<(TabItem|Tab)(" + _JSX_PROPS + r")\s*>(.*?)</\1\s*>", re.S)


def _props(text: str) -> dict[str, str]:
    """A JSX tag's quoted props, by lower-case name."""
    return {p.group(1).lower(): p.group(2) if p.group(2) is not None else p.group(3) for p in _JSX_PROP.finditer(text)}


def _tab(m: re.Match[str]) -> str:
    """A tab as a list item of its label, its content indented under it: the label ("Python")
    stays with the code it shows, and each tab of the group is an item of one list, as a reader
    sees the group (one tab per language or system), not one block after the other unnamed."""
    props = _props(m.group(2))
    label = " ".join((props.get("label") or props.get("title") or props.get("value") or "").split())
    body = textwrap.dedent(m.group(3).strip("\n")).strip("\n")
    if not label:
        return f"\n\n{body}\n\n"
    lines = "\n".join(f"  {line}" if line.strip() else "" for line in body.split("\n"))
    return f"\n\n- {label}:\n\n{lines}\n\n"


def _strip_mdx(text: str) -> str:
    """MDX syntax removed: ``import``/``export`` statements (to their end: a line ending
    with ``;`` or balanced braces), ``{/* comments */}``, JSX component tags (inner text
    kept, a ``label``/``title`` prop as a line of its own; a tab as a list item of its
    label, :func:`_tab`)."""
    text = _JSX_COMMENT.sub("", text)
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if _MDX_STATEMENT.match(line):
            depth = line.count("{") - line.count("}") + line.count("(") - line.count(")")
            while depth > 0 and i + 1 < len(lines):
                i += 1
                depth += lines[i].count("{") - lines[i].count("}") + lines[i].count("(") - lines[i].count(")")
            i += 1
            continue
        out.append(line)
        i += 1

    def tag(m: re.Match[str]) -> str:
        name = m.group(2).lower()
        if name in _BOX_COMPONENTS and not m.group(4):
            return _box(m, name, closing=bool(m.group(1)))
        if m.group(1):
            return ""
        props = _props(m.group(3))
        label = next((props[k] for k in _TEXT_ARGS if props.get(k)), "")
        return f"{label}: " if label and not m.group(4) else label

    text = _JSX_TAG.sub(tag, _TAB.sub(_tab, "\n".join(out)))
    # lines left holding only whitespace (a tag on a line of its own) become blank lines
    return "\n".join(line.rstrip() if line.strip() else "" for line in text.split("\n"))


# ---- reStructuredText roles and substitutions ---------------------------------------------
# Interpreted text with a role (docutils' "Interpreted Text" and Sphinx's roles): ``:doc:`a <b>```,
# ``:py:func:`x```; MyST (Markdown for Sphinx) writes ``{doc}`a <b>```.
_RST_ROLE = re.compile(r"(?<![\w`]):((?:[a-z][\w-]*:)*[a-z][\w-]*):`([^`\n]+(?:\n[^`\n]+)?)`(?!`)_{0,2}")
_MYST_ROLE = re.compile(r"\{((?:[a-z][\w-]*:)*[a-z][\w-]*)\}`([^`\n]+)`")
_SUBSTITUTION_DEF = re.compile(r"^\.\. \|([^|\n]+)\| (replace|unicode)::[ \t]*(.*)$", re.M)
# a definition's line and its option lines (":trim:")
_SUBSTITUTION_LINES = re.compile(r"^\.\. \|[^|\n]+\| (?:replace|unicode)::.*\n?(?:[ \t]+:[\w-]+:.*\n?)*", re.M)
_SUBSTITUTION = re.compile(r"(?<![\w|`])\|([A-Za-z][\w -]*?)\|(?:_{1,2})?(?![\w|])")
_INLINE_LITERAL = re.compile(r"``[^`\n]+``")
_CODE_ROLES = frozenset({"envvar", "option", "program", "file", "samp", "command", "code", "kbd", "literal"})
_BOLD_ROLES = frozenset({"guilabel", "menuselection"})


_PY_ROLES = frozenset({"class", "func", "meth", "mod", "attr", "obj", "exc", "data", "const"})
_PAGE_ROLES = frozenset({"doc", "ref", "numref", "download", "any"})


def _role(name: str, content: str) -> str:
    """What a reader of the built page sees of one role (``name``: ``doc``, ``py:func``, ...;
    ``content``: what is between its backquotes): its title, or its target's words."""
    base = name.rsplit(":", 1)[-1].lower()
    content = " ".join(content.split())
    m = re.fullmatch(r"(.*?)\s*<([^<>]+)>", content)
    title, target = (m.group(1), m.group(2)) if m else ("", content)
    if base in _BOLD_ROLES:  # a placeholder in a menu path ("<Username dropdown>") loses its brackets
        label = re.sub(r"<([^<>]+)>", r"\1", content.replace("&", ""))
        return "**" + re.sub(r"\s*-->\s*", " > ", label) + "**"
    if base in ("pep", "rfc"):
        return f"{base.upper()} {target}"
    if title or base in ("abbr", "term"):
        return title or target
    target = target.lstrip("~!")
    if base in _CODE_ROLES or base in _PY_ROLES:
        return f"`{target}`"
    if base in _PAGE_ROLES:  # a page or a label: its last part's words
        return re.sub(r"[-_]+", " ", target.rstrip("/").rsplit("/", 1)[-1].split("#")[-1]).strip()
    return target


def rst_roles(text: str) -> str:
    """``text`` (a reStructuredText page) with its roles and substitutions written as the words
    a reader of the built page sees (the module docstring's rules); inline literals
    (````code````) are left as written, the lines defining substitutions go. Never raises."""
    # "unicode::" defines a character by its code (a no-break space, a line break): shown as a space
    defined = {
        m.group(1).strip(): m.group(3).strip() if m.group(2) == "replace" else " "
        for m in _SUBSTITUTION_DEF.finditer(text)
    }
    kept: list[str] = []

    def protect(m: re.Match[str]) -> str:
        kept.append(m.group(0))
        return _PLACE.format(len(kept) - 1)

    # a definition is a directive the built page does not show (its text shows where it is used)
    text = _INLINE_LITERAL.sub(protect, _SUBSTITUTION_LINES.sub("", text))
    text = _RST_ROLE.sub(lambda m: _role(m.group(1), m.group(2)), text)
    text = _SUBSTITUTION.sub(lambda m: defined.get(m.group(1).strip(), re.sub(r"[_-]+", " ", m.group(1))), text)
    while _PLACE_RE.search(text):
        text = _PLACE_RE.sub(lambda m: kept[int(m.group(1))], text)
    return text
