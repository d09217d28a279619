// The memory inspector: what one reply was built from — the recalled blocks (thread, dates,
// score, matched lines marked), the expertise passages, the citations linked to their hints,
// the token budget as a bar, the step timings and the exact prompt.
import { h, when } from "./dom.js";

let turns = 0;

/** The inspector of ``turn`` (a turn's JSON, as POST /v1/bots/{bot}/turns answers). */
export function inspector(turn) {
  turns += 1;
  const prefix = `t${turns}`;
  const anchor = (id) => `${prefix}-hint-${id}`;
  return h("div", { class: "inspector-body" },
    h("p", { class: "meta", text: `thread ${turn.thread} · reply line ${turn.reply_line?.seq ?? "–"}` +
      (turn.score == null ? "" : ` · score ${turn.score.toFixed(3)}`) }),
    section("Citations", citations(turn, anchor)),
    section("Recalled memory", historyHints(turn, anchor)),
    section("Expertise passages", expertise(turn, anchor)),
    section("Token budget", budget(turn.tokens)),
    section("Step timings", timings(turn.timings_ms)),
    turn.notes?.length ? section("Notes", h("ul", {}, turn.notes.map((note) => h("li", { text: note })))) : null,
    h("details", { class: "prompt" }, h("summary", { text: "The exact prompt" }),
      // The messages the model was sent, as sent; the filled template alone without them.
      (turn.messages?.length ? turn.messages : [{ role: "prompt", content: turn.prompt }]).map((message) =>
        h("div", { class: "prompt-message" }, h("p", { class: "meta", text: message.role }),
          h("pre", { class: "prompt-text", tabindex: "0", text: message.content })))));
}

function section(title, body) {
  return h("section", { class: "inspect" }, h("h3", { text: title }), body);
}

function citations(turn, anchor) {
  // The bot may ask for citations while its model cannot give them (the bundled one): then
  // membot finds the memories whose words the reply used.
  const off = (turn.notes || []).find((note) => note.startsWith("citations off"));
  const why = off?.replace(/^citations off: /, "");
  if (!turn.citations.length) {
    return h("p", { class: "muted", text: off ? `No citations: ${why}; the reply used no memory's words.` : "The reply cited nothing." });
  }
  const byWords = turn.citations.some((citation) => citation.found_by === "words");
  const list = h("ul", { class: "plain" }, turn.citations.map((citation) => h("li", {},
    h("button", { type: "button", class: "cite", text: citation.id,
      "aria-label": `Show hint ${citation.id}`,
      onclick: (event) => {
        const target = event.target.closest(".inspector-body").querySelector(`#${anchor(citation.id)}`);
        if (!target) return;
        target.scrollIntoView({ block: "nearest" });
        target.classList.add("flash");
        target.focus();
        setTimeout(() => target.classList.remove("flash"), 1500);
      } }),
    ` ${citation.source} · score ${citation.score.toFixed(3)}`)));
  if (!byWords) return list;
  const how = `Found by the reply's words (${why || "the model cannot cite"}): the reply used these memories' words, which says where it came from, not that it read them right.`;
  return h("div", {}, h("p", { class: "muted", text: how }), list);
}

function historyHints(turn, anchor) {
  const hints = turn.history_matches;
  if (!hints.length && !turn.recalled.length) return h("p", { class: "muted", text: "Nothing was recalled." });
  const shown = new Set();
  const items = hints.map((hint) => {
    if (hint.block) shown.add(blockKey(hint.block));
    return h("li", { id: anchor(hint.id), tabindex: "-1", class: "hint" },
      h("div", { class: "hint-head" }, h("span", { class: "badge", text: hint.id }),
        ` ${hint.kind} · score ${hint.score.toFixed(3)}`),
      hint.block ? block(hint.block) : hint.summary ? summary(hint.summary) : h("p", { class: "pre", text: hint.text }));
  });
  // Blocks recalled but left out of the prompt (over the budget) are listed too.
  const left = turn.recalled.filter((each) => !shown.has(blockKey(each)));
  items.push(...left.map((each) => h("li", { class: "hint left-out" },
    h("div", { class: "hint-head", text: `not in the prompt · score ${each.score.toFixed(3)}` }), block(each))));
  return h("ol", { class: "plain hints" }, items);
}

function blockKey(each) {
  return `${each.person}/${each.thread}/${each.lines[0]?.seq}`;
}

function block(each) {
  const first = each.lines[0]?.created_at;
  const last = each.lines.at(-1)?.created_at;
  const matched = new Set(each.matched_seqs);
  return h("div", { class: "block" },
    h("p", { class: "meta", text: `thread ${each.thread} · ${when(first)}${last && when(last) !== when(first) ? ` → ${when(last)}` : ""}` +
      (each.carried_over ? " · carried over from an earlier turn" : "") }),
    h("ol", { class: "lines" }, each.lines.map((line) => {
      const row = h("li", { class: `line ${line.role}` },
        h("span", { class: "seq", text: `${line.seq}` }),
        h("span", { class: "role", text: line.speaker || line.role }),
        matched.has(line.seq) ? h("mark", { class: "text", text: line.text }) : h("span", { class: "text", text: line.text }));
      if (matched.has(line.seq)) row.setAttribute("aria-label", `matched line ${line.seq}`);
      return row;
    })));
}

function summary(kept) {
  return h("div", { class: "block" },
    h("p", { class: "meta", text: `summary of thread ${kept.thread} · ${when(kept.covers_from)} → ${when(kept.covers_to)}` +
      (kept.categories.length ? ` · ${kept.categories.join(", ")}` : "") }),
    h("p", { class: "pre", text: kept.text }));
}

function expertise(turn, anchor) {
  if (!turn.expertise_matches.length) return h("p", { class: "muted", text: "No passage of the bot's documents." });
  return h("ol", { class: "plain hints" }, turn.expertise_matches.map((hint) =>
    h("li", { id: anchor(hint.id), tabindex: "-1", class: "hint" },
      h("div", { class: "hint-head" }, h("span", { class: "badge", text: hint.id }),
        ` ${hint.chunk ? `${hint.chunk.document}${hint.chunk.heading ? ` — ${hint.chunk.heading}` : ""}` : "passage"} · score ${hint.score.toFixed(3)}`),
      h("p", { class: "pre", text: hint.chunk ? hint.chunk.text : hint.text }))));
}

function budget(tokens) {
  const total = tokens.context_size || tokens.budget + tokens.reply_limit || 1;
  const parts = [
    ["recalled", "recalled memory", tokens.recalled ?? 0],
    ["rest", "rest of the prompt", Math.max(0, (tokens.prompt ?? 0) - (tokens.recalled ?? 0))],
    ["free", "unused budget", Math.max(0, (tokens.budget ?? 0) - (tokens.prompt ?? 0))],
    ["reply", "kept for the reply", tokens.reply_limit ?? 0],
  ];
  const label = `prompt ${tokens.prompt} of ${tokens.budget} tokens; ${tokens.recalled ?? 0} recalled; ` +
    `${tokens.reply_limit} kept for the reply`;
  const bar = h("div", { class: "bar", role: "img", "aria-label": label });
  for (const [kind, , size] of parts) {
    const piece = h("span", { class: `piece ${kind}` });
    piece.style.width = `${(100 * size) / total}%`; // CSSOM, which the policy allows
    bar.append(piece);
  }
  return h("div", {}, bar,
    h("ul", { class: "legend" }, parts.map(([kind, name, size]) =>
      h("li", {}, h("span", { class: `swatch ${kind}` }), ` ${name}: ${size}`))),
    h("p", { class: "meta", text: label + (tokens.response != null ? `; the reply took ${tokens.response} tokens` : "") }));
}

function timings(ms) {
  return h("table", { class: "timings" }, h("tbody", {}, Object.entries(ms ?? {}).map(([step, value]) =>
    h("tr", {}, h("th", { scope: "row", text: step }), h("td", { text: `${value.toFixed(1)} ms` })))));
}
