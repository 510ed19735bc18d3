// A small, safe markdown renderer for model answers: paragraphs, headings, bold, italic, inline
// code, fenced code blocks, bullet and numbered lists, block quotes and links.
//
// Safety: the source text is HTML-escaped before any markup is produced, so the only tags in the
// output are the ones this file writes. Links keep only http(s), mailto and same-site relative
// targets; anything else (javascript:, data:, ...) stays plain text.
//
// Loaded by the page as a classic script (global RadixMarkdown) and by node tests via require().
"use strict";

const RadixMarkdown = (() => {
  const ESCAPES = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

  function escapeHtml(text) {
    return text.replace(/[&<>"']/g, (ch) => ESCAPES[ch]);
  }

  // `url` is already escaped; entities stay harmless inside a quoted attribute.
  function safeHref(url) {
    const plain = url.replace(/&amp;/g, "&").trim();
    if (/^(https?:|mailto:)/i.test(plain)) return url.trim();
    // Relative targets: no scheme at all (a colon before any / ? # would be a scheme).
    if (/^[^:/?#]*([/?#]|$)/.test(plain) && !plain.startsWith("//")) return url.trim();
    return null;
  }

  // Inline markup on one escaped line. Code spans are cut out first so nothing inside them is
  // interpreted; they come back at the end through private-use placeholders.
  function renderInline(escaped) {
    const spans = [];
    let text = escaped.replace(/(`+)([^`]|[^`][\s\S]*?[^`])\1(?!`)/g, (_, ticks, code) => {
      spans.push(`<code>${code.trim() === "" ? code : code.replace(/^ (.*) $/, "$1")}</code>`);
      return `\uE000${spans.length - 1}\uE001`;
    });
    text = text.replace(/\[([^\]\n]+)\]\(([^()\s]+)\)/g, (whole, label, url) => {
      const href = safeHref(url);
      if (href === null) return whole;
      return `<a href="${href}" target="_blank" rel="noopener noreferrer">${label}</a>`;
    });
    text = text.replace(/(\*\*|__)(?=\S)([\s\S]*?\S)\1/g, "<strong>$2</strong>");
    text = text.replace(/(^|[^\w*])\*(?=\S)([^*]*?\S)\*(?!\*)/g, "$1<em>$2</em>");
    text = text.replace(/(^|[^\w])_(?=\S)([^_]*?\S)_(?!\w)/g, "$1<em>$2</em>");
    return text.replace(/\uE000(\d+)\uE001/g, (_, i) => spans[Number(i)]);
  }

  const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([\w+#.-]*)/;
  const BULLET = /^ {0,3}[-*+]\s+(.*)$/;
  const ORDERED = /^ {0,3}(\d{1,9})[.)]\s+(.*)$/;
  const HEADING = /^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$/;
  const QUOTE = /^ {0,3}&gt;\s?(.*)$/;

  function isBlockStart(line) {
    return FENCE.test(line) || BULLET.test(line) || ORDERED.test(line) || HEADING.test(line) ||
        QUOTE.test(line);
  }

  // Renders escaped lines [start, end) as blocks; used again for the inside of block quotes.
  function renderBlocks(lines) {
    const out = [];
    let i = 0;
    while (i < lines.length) {
      const line = lines[i];
      if (line.trim() === "") {
        i++;
        continue;
      }
      const fence = FENCE.exec(line);
      if (fence) {
        const marker = fence[1];
        const body = [];
        i++;
        // An unclosed fence (an answer still streaming) runs to the end of the text.
        while (i < lines.length && !new RegExp(`^ {0,3}${marker[0]}{${marker.length},}\\s*$`)
                                         .test(lines[i])) {
          body.push(lines[i]);
          i++;
        }
        i++;
        const lang = fence[2] ? ` class="language-${fence[2]}" data-lang="${fence[2]}"` : "";
        out.push(`<pre><code${lang}>${body.join("\n")}</code></pre>`);
        continue;
      }
      const heading = HEADING.exec(line);
      if (heading) {
        const level = heading[1].length;
        out.push(`<h${level}>${renderInline(heading[2])}</h${level}>`);
        i++;
        continue;
      }
      if (QUOTE.test(line)) {
        const inner = [];
        while (i < lines.length && QUOTE.test(lines[i])) {
          inner.push(QUOTE.exec(lines[i])[1]);
          i++;
        }
        out.push(`<blockquote>${renderBlocks(inner)}</blockquote>`);
        continue;
      }
      const ordered = ORDERED.test(line);
      if (ordered || BULLET.test(line)) {
        const pattern = ordered ? ORDERED : BULLET;
        const items = [];
        let first = ordered ? Number(ORDERED.exec(line)[1]) : 1;
        while (i < lines.length) {
          const m = pattern.exec(lines[i]);
          if (m) {
            items.push(ordered ? m[2] : m[1]);
          } else if (lines[i].trim() !== "" && /^\s+\S/.test(lines[i]) && items.length > 0) {
            items[items.length - 1] += " " + lines[i].trim();  // continuation line
          } else {
            break;
          }
          i++;
        }
        const tag = ordered ? "ol" : "ul";
        const start = ordered && first !== 1 ? ` start="${first}"` : "";
        const lis = items.map((item) => `<li>${renderInline(item)}</li>`).join("");
        out.push(`<${tag}${start}>${lis}</${tag}>`);
        continue;
      }
      const para = [];
      while (i < lines.length && lines[i].trim() !== "" && (para.length === 0 ||
                                                             !isBlockStart(lines[i]))) {
        para.push(lines[i].trim());
        i++;
      }
      out.push(`<p>${renderInline(para.join("\n")).replace(/\n/g, "<br>")}</p>`);
    }
    return out.join("");
  }

  // Markdown text -> HTML string that is safe to assign to innerHTML.
  function render(text) {
    const source = String(text).replace(/\r\n?/g, "\n").replace(/[\uE000\uE001]/g, "");
    const escaped = escapeHtml(source);
    return renderBlocks(escaped.split("\n"));
  }

  return { render, escapeHtml };
})();

if (typeof module === "object" && module.exports) module.exports = RadixMarkdown;
