// Markdown for replies, built as DOM nodes from a short whitelist: headings, paragraphs,
// lists, quotes, code, emphasis and links (http and https only). Nothing is parsed as HTML,
// so a reply holding <script> or an onerror attribute shows as the text it is.
import { h } from "./dom.js";

const LIST_ITEM = /^\s*([-*+]|\d{1,9}[.)])\s+/;
const FENCE = /^\s*```/;
const HEADING = /^(#{1,6})\s+(.*)$/;
const QUOTE = /^\s*>\s?/;
const INLINE = new RegExp([
  "(`+)([^`]|[^`][\\s\\S]*?[^`])\\1(?!`)", // code
  "\\*\\*(\\S[\\s\\S]*?)\\*\\*", // strong
  "__(\\S[\\s\\S]*?)__",
  "\\*(\\S[\\s\\S]*?)\\*", // emphasis
  "\\b_(\\S[\\s\\S]*?)_\\b",
  "\\[([^\\]\\n]+)\\]\\(([^()\\s]+)\\)", // link
  "(https?://[^\\s<>()]+[^\\s<>().,;:!?'\"])", // a bare URL
].join("|"));

function isBlockStart(line) {
  return FENCE.test(line) || HEADING.test(line) || LIST_ITEM.test(line) || QUOTE.test(line);
}

/** A DocumentFragment of the Markdown ``text``. */
export function renderMarkdown(text) {
  const fragment = document.createDocumentFragment();
  const lines = String(text ?? "").replace(/\r\n?/g, "\n").split("\n");
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (!line.trim()) { i += 1; continue; }
    if (FENCE.test(line)) {
      const code = [];
      for (i += 1; i < lines.length && !FENCE.test(lines[i]); i += 1) code.push(lines[i]);
      i += 1;
      fragment.append(h("pre", {}, h("code", { text: code.join("\n") })));
    } else if (HEADING.test(line)) {
      const [, marks, words] = line.match(HEADING);
      // Inside a reply: h3 at most, below the page's own headings.
      fragment.append(inline(h(`h${Math.min(marks.length + 2, 6)}`), words));
      i += 1;
    } else if (LIST_ITEM.test(line)) {
      const ordered = /^\s*\d/.test(line);
      const list = h(ordered ? "ol" : "ul");
      for (; i < lines.length && LIST_ITEM.test(lines[i]); i += 1) {
        list.append(inline(h("li"), lines[i].replace(LIST_ITEM, "")));
      }
      fragment.append(list);
    } else if (QUOTE.test(line)) {
      const quoted = [];
      for (; i < lines.length && QUOTE.test(lines[i]); i += 1) quoted.push(lines[i].replace(QUOTE, ""));
      fragment.append(h("blockquote", {}, renderMarkdown(quoted.join("\n"))));
    } else {
      const words = [];
      for (; i < lines.length && lines[i].trim() && !isBlockStart(lines[i]); i += 1) words.push(lines[i]);
      fragment.append(inline(h("p"), words.join("\n")));
    }
  }
  return fragment;
}

function inline(parent, text, inLink = false) {
  let rest = text;
  while (rest) {
    const m = INLINE.exec(rest);
    if (!m) { plain(parent, rest); break; }
    plain(parent, rest.slice(0, m.index));
    if (m[1]) parent.append(h("code", { text: m[2] }));
    else if (m[3] || m[4]) parent.append(inline(h("strong"), m[3] || m[4], inLink));
    else if (m[5] || m[6]) parent.append(inline(h("em"), m[5] || m[6], inLink));
    else if (inLink) plain(parent, m[0]); // no link inside a link
    else if (m[7]) parent.append(link(m[7], m[8]));
    else parent.append(link(m[9], m[9]));
    rest = rest.slice(m.index + m[0].length);
  }
  return parent;
}

function plain(parent, text) {
  text.split("\n").forEach((part, index) => {
    if (index) parent.append(h("br"));
    if (part) parent.append(document.createTextNode(part));
  });
}

/** A link only to http(s); anything else (javascript:, data:, ...) stays text. */
function link(label, target) {
  let url = null;
  try { url = new URL(target); } catch { /* not an absolute URL */ }
  if (!url || !["http:", "https:"].includes(url.protocol)) {
    return document.createTextNode(label === target ? label : `${label} (${target})`);
  }
  return inline(h("a", { href: url.href, rel: "noopener noreferrer nofollow", target: "_blank" }), label, true);
}
