"""The chat page's markdown renderer (src/web/static/markdown.js), run under node.

Structure is checked against markdown-it-py (a CommonMark implementation) on the constructs the
page supports; safety is checked by parsing the output with Python's html.parser and allowing
only the tags and attributes the renderer is meant to write.
"""
import html.parser
import json
import os
import pathlib
import shutil
import subprocess
import urllib.parse

import pytest
from markdown_it import MarkdownIt

HERE = pathlib.Path(__file__).resolve().parent
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def render(texts):
    node = shutil.which("node")
    if node is None:
        if IN_CI:
            pytest.fail("node is not installed (scripts/setup installs nodejs)")
        pytest.skip("node is not installed (run scripts/setup)")
    out = subprocess.run([node, str(HERE / "render_markdown.cjs")], input=json.dumps(texts),
                         capture_output=True, text=True, check=True, timeout=60).stdout
    return json.loads(out)


class Tokens(html.parser.HTMLParser):
    """Start tags (with the attributes that matter), non-blank text and end tags, in order."""

    KEPT_ATTRS = {"href", "start", "class"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tokens = []
        self.attrs = []  # every (tag, name, value) seen, for the safety checks

    def handle_starttag(self, tag, attrs):
        self.attrs.extend((tag, name, value) for name, value in attrs)
        kept = tuple(sorted((n, v) for n, v in attrs if n in self.KEPT_ATTRS))
        self.tokens.append(("start", tag, kept))

    def handle_endtag(self, tag):
        self.tokens.append(("end", tag))

    def handle_data(self, data):
        if data.strip():
            self.tokens.append(("text", data.strip()))


def tokens_of(markup):
    parser = Tokens()
    parser.feed(markup)
    parser.close()
    return parser


# One-line paragraphs only: the page turns a newline inside a paragraph into <br> (chat answers
# are written line by line), where CommonMark makes it a soft break.
COMMONMARK_CASES = [
    "plain text",
    "**bold** and *italic* and __strong__ and _em_",
    "inline `code <b>` here",
    "``a`b``",
    "```python\nprint('<b>')\nx = 1 < 2\n```",
    "```\nno language\n```",
    "~~~js\nlet a = [1, 2];\n~~~",
    "- one\n- two *em*\n- three `c`",
    "* star\n* list",
    "1. first\n2. second",
    "3. three\n4. four",
    "# Title",
    "### Third level",
    "> quoted",
    "[link](https://example.com/a?b=1&c=2)",
    "[mail](mailto:someone@example.com)",
    "[rel](/docs/api.md)",
    "snake_case_name stays",
    "first paragraph\n\nsecond paragraph",
    "text with <angle> & ampersand \"quotes\" 'single'",
    "para\n\n- item\n\n```\ncode\n```\n\nend",
]


@pytest.fixture(scope="module")
def rendered_cases():
    return render(COMMONMARK_CASES)


@pytest.mark.parametrize("index", range(len(COMMONMARK_CASES)))
def test_agrees_with_commonmark(rendered_cases, index):
    text = COMMONMARK_CASES[index]
    ours = tokens_of(rendered_cases[index]).tokens
    # html=False: like the page, the reference shows raw HTML as text instead of passing it on.
    reference = tokens_of(MarkdownIt("commonmark", {"html": False}).render(text)).tokens
    assert ours == reference, f"{text!r}\nours:      {ours}\nreference: {reference}"


ALLOWED_TAGS = {"p", "br", "strong", "em", "code", "pre", "ul", "ol", "li", "a", "blockquote",
                "h1", "h2", "h3", "h4", "h5", "h6"}
ALLOWED_ATTRS = {("a", "href"), ("a", "target"), ("a", "rel"), ("code", "class"),
                 ("code", "data-lang"), ("ol", "start")}

ATTACKS = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "<svg/onload=alert(1)>",
    "**<iframe src=javascript:alert(1)>**",
    "[x](javascript:alert(1))",
    "[x](JaVaScRiPt:alert(1))",
    "[x](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    "[x](vbscript:msgbox(1))",
    '[x](https://a.b/"onmouseover="alert(1))',
    "[x](https://a.b/'onmouseover='alert(1))",
    '[<img src=x onerror=alert(1)>](https://a.b)',
    "[x](//evil.example/path)",
    '```js" onmouseover="alert(1)\ncode\n```',
    "`<script>alert(1)</script>`",
    "- <b onclick=alert(1)>item</b>",
    "> <a href=javascript:alert(1)>q</a>",
    "# <style>*{display:none}</style>",
    "&lt;script&gt;alert(1)&lt;/script&gt;",
    "\ue0000\ue001 placeholder characters",
    "``` \n<unclosed fence <img src=x onerror=alert(1)>",
]


def test_attacks_render_as_text():
    outputs = render(ATTACKS)
    for attack, markup in zip(ATTACKS, outputs):
        parsed = tokens_of(markup)
        tags = {t[1] for t in parsed.tokens if t[0] == "start"}
        assert tags <= ALLOWED_TAGS, f"{attack!r} -> {markup!r}"
        for tag, name, value in parsed.attrs:
            assert (tag, name) in ALLOWED_ATTRS, f"{attack!r} -> {markup!r}"
            if name == "href":
                url = urllib.parse.urlsplit(value.strip())
                assert url.scheme in ("http", "https", "mailto", ""), f"{attack!r} -> {markup!r}"
                assert url.scheme or not url.netloc, f"{attack!r}: protocol-relative {value!r}"
            if name == "class":
                assert value.startswith("language-") and '"' not in value


def test_raw_html_stays_visible():
    # Escaped, not dropped: the reader sees exactly what the model wrote.
    texts = ["<script>alert(1)</script>", "a < b && c > d", "&amp; stays &amp;"]
    for text, markup in zip(texts, render(texts)):
        visible = "".join(t[1] for t in tokens_of(markup).tokens if t[0] == "text")
        assert visible == text


def test_streaming_prefixes_never_break_out():
    # While an answer streams the renderer sees every prefix; none may produce a foreign tag.
    text = "Here:\n```html\n<div onclick=\"x()\">hi</div>\n```\nand **bold [l](https://a.b)** done"
    for markup in render([text[:i] for i in range(len(text) + 1)]):
        tags = {t[1] for t in tokens_of(markup).tokens if t[0] == "start"}
        assert tags <= ALLOWED_TAGS, markup
