// Memory: one person's threads and lines, the summaries kept (dates, categories) with their
// key points, a search box, and forgetting a thread or the person. A person, with their own
// key, deletes one line or one key point and corrects a key point (its old text kept as its
// history); each deletion is asked first. "Link another channel" (links.js) makes the person's
// identities on other channels one person.
import { api, path, session } from "./api.js";
import { h, append, field, say, when, counted } from "./dom.js";
import { confirmDanger } from "./dialogs.js";
import { linksCard, identityLabel } from "./links.js";

export async function renderMemory(section, args) {
  const me = session.me;
  section.append(h("h1", { tabindex: "-1", text: "Memory" }));
  const bots = session.builds ? (await api("GET", "/v1/bots")).bots : [me.bot];
  const bot = args[0] ?? bots[0];
  const user = args[1] ?? me.user;
  // The person last talked as in this tab is offered, not opened (they may be another bot's).
  if (session.builds) section.append(await chooser(bots, bot, user ?? (session.person || undefined)));
  if (!bot || !user) return;
  // Read first: a page of someone this key may not see shows the refusal and nothing else.
  const [{ threads }, { memories }, { key_points: points, threads: held }] = await Promise.all([
    api("GET", path`/v1/bots/${bot}/users/${user}/threads`),
    api("GET", path`/v1/bots/${bot}/users/${user}/memories`),
    api("GET", path`/v1/bots/${bot}/users/${user}/memory`),
  ]);
  const links = await linksCard(bot, user);
  section.querySelector("h1").textContent = `Memory of ${user} with ${bot}`;
  section.append(
    searchCard(bot, user),
    summariesCard(bot, user, memories, points),
    threadsCard(bot, user, threads, held),
    links,
    h("section", { class: "card danger-zone", "aria-labelledby": "forget-title" },
      h("h2", { id: "forget-title", text: "Forget" }),
      h("button", { type: "button", class: "danger", text: `Forget ${user}`, onclick: async () => {
        if (!await confirmDanger(`Forget ${user}`, `Forget everything ${user} said to ${bot}, every thread and every summary? This cannot be undone.`, "Forget everything")) return;
        const removed = await api("DELETE", path`/v1/bots/${bot}/users/${user}`);
        say(`Forgot ${counted(removed.threads, "thread")}, ${counted(removed.lines, "line")}, ${counted(removed.summaries, "summary", "summaries")}.`);
        window.dispatchEvent(new HashChangeEvent("hashchange"));
      } })));
}

async function chooser(bots, bot, user) {
  const botSelect = h("select", { name: "bot" }, bots.map((name) =>
    h("option", { value: name, selected: name === bot, text: name })));
  const people = bot ? (await api("GET", path`/v1/bots/${bot}/users`)).users : [];
  const listId = "people-list";
  const person = h("input", { name: "user", list: listId, autocomplete: "off", value: user ?? "", required: true });
  return h("form", { class: "card chooser", onsubmit: (event) => {
    event.preventDefault();
    location.hash = `#/memory/${encodeURIComponent(botSelect.value)}/${encodeURIComponent(person.value.trim())}`;
  } }, h("div", { class: "grid" }, field("Bot", botSelect), field("Person", person,
    { help: people.length ? `${counted(people.length, "person", "people")} talked with ${bot}.` : "No one has talked with this bot yet." })),
  h("datalist", { id: listId }, people.map((name) => h("option", { value: name }))),
  h("div", { class: "actions" }, h("button", { type: "submit", text: "Show memory" })));
}

function searchCard(bot, user) {
  const query = h("input", { type: "search", name: "q", required: true, autocomplete: "off" });
  const results = h("ol", { class: "plain results" });
  return h("section", { class: "card", "aria-labelledby": "search-title" },
    h("h2", { id: "search-title", text: "Search" }),
    h("form", { role: "search", class: "inline", onsubmit: async (event) => {
      event.preventDefault();
      const { matches } = await api("GET", `${path`/v1/bots/${bot}/search`}?${new URLSearchParams({ user, q: query.value, k: "10" })}`);
      const held = await api("GET", `${path`/v1/bots/${bot}/users/${user}/memory`}?${new URLSearchParams({ q: query.value })}`);
      results.replaceChildren(...(matches.length ? matches.map((match) => h("li", { class: "match" },
        h("p", { class: "meta", text: `score ${match.score.toFixed(3)} · thread ${match.thread} · ${when(match.created_at)} · ${match.role}` }),
        h("p", { class: "pre", text: match.text }),
        deleteLineButton(bot, user, match)))
        : [h("li", { class: "muted", text: "No line found." })]),
        ...held.key_points.map((point) => h("li", { class: "match key-point-match" },
          h("p", { class: "meta", text: `key point · kept ${when(point.kept_at)} · thread ${point.thread}` }),
          h("p", { class: "pre", text: point.text }))));
    } }, field(`Search what ${user} and the bot said`, query), h("button", { type: "submit", text: "Search" })),
    results);
}

function summariesCard(bot, user, memories, points) {
  return h("section", { class: "card", "aria-labelledby": "summaries-title" },
    h("h2", { id: "summaries-title", text: "Summaries kept" }),
    memories.length ? h("ul", { class: "plain summaries" }, memories.map((kept) => h("li", { class: "summary" },
      h("p", { class: "meta", text: `from thread ${kept.thread} · ${when(kept.covers_from)} → ${when(kept.covers_to)} · kept ${when(kept.created_at)}` }),
      kept.categories.length ? h("ul", { class: "tags", "aria-label": "categories" }, kept.categories.map((tag) => h("li", { text: tag }))) : null,
      h("ol", { class: "plain key-points", "aria-label": "key points" },
        points.filter((point) => point.summary_id === kept.id).map((point) => keyPointItem(bot, user, point))))))
      : h("p", { class: "muted", text: "No summaries kept. Ending a thread with “remember” may leave one: its key points, checked against what was said." }));
}

/** One key point: its text and history, corrected in place or deleted (asked first). */
function keyPointItem(bot, user, point) {
  const where = path`/v1/bots/${bot}/users/${user}/key-points/${point.summary_id}/${point.number}`;
  const item = h("li", { class: "key-point" });
  const history = point.corrections.length ? h("details", { class: "history" },
    h("summary", { text: `Corrected ${point.corrections.length === 1 ? "once" : `${point.corrections.length} times`}` }),
    h("ol", { class: "plain" }, point.corrections.map((fix) => h("li", { class: "meta", text: `${when(fix.corrected_at)}: “${fix.old}” → “${fix.new}”` })))) : null;
  const correct = h("button", { type: "button", class: "quiet", text: "Correct", onclick: () => {
    const box = h("textarea", { name: "point", rows: 2, value: point.text, required: true });
    const form = h("form", { class: "correct", onsubmit: async (event) => {
      event.preventDefault();
      await api("PUT", where, { json: { text: box.value } });
      say("Key point corrected: the bot uses the new text from the next turn.");
      window.dispatchEvent(new HashChangeEvent("hashchange"));
    } }, field("Corrected key point", box, { wide: true }),
    h("div", { class: "actions" }, h("button", { type: "submit", text: "Save correction" }),
      h("button", { type: "button", class: "quiet", text: "Cancel", onclick: () => form.replaceWith(actions) })));
    actions.replaceWith(form);
    box.focus();
  } });
  const remove = h("button", { type: "button", class: "danger", text: "Delete", onclick: async () => {
    if (!await confirmDanger("Delete key point", `Delete this key point and its history? “${point.text}”`, "Delete key point")) return;
    await api("DELETE", where);
    say("Key point deleted.");
    window.dispatchEvent(new HashChangeEvent("hashchange"));
  } });
  const actions = h("span", { class: "links" }, correct, remove);
  return append(item, [h("p", { class: "pre summary-text", text: point.text }), history, actions]);
}

/** Delete one line (asked first); the line's entry goes from the page. */
function deleteLineButton(bot, user, line) {
  return h("button", { type: "button", class: "danger", text: "Delete line", "aria-label": `Delete line: ${line.text.slice(0, 60)}`, onclick: async (event) => {
    if (!await confirmDanger("Delete line", `Delete this line for good, from search and recall? “${line.text.slice(0, 200)}”`, "Delete line")) return;
    await api("DELETE", path`/v1/bots/${bot}/users/${user}/lines/${line.id}`);
    event.target.closest("li").remove();
    say("Line deleted.");
  } });
}

/** The threads; ``held``: the person's memory by thread (each naming its identity), where a
 * linked identity's lines are read (a person key acts only as its own identity). */
function threadsCard(bot, user, threads, held) {
  const linesOf = new Map(held.map((each) => [`${each.person || user}\u0000${each.thread}`, each.lines]));
  return h("section", { class: "card", "aria-labelledby": "threads-title" },
    h("h2", { id: "threads-title", text: "Threads" }),
    threads.length ? h("ul", { class: "plain" }, threads.map((thread) =>
      threadItem(bot, user, thread, linesOf.get(`${thread.user ?? user}\u0000${thread.thread}`) ?? [])))
      : h("p", { class: "muted", text: "No threads." }));
}

function threadItem(bot, user, thread, heldLines) {
  // A linked identity's thread (two identities may each have a thread of one name) is its
  // own: its lines come with the person's memory, and only a bot or admin key, which may
  // act as that identity, forgets it here.
  const owner = thread.user ?? user;
  const base = path`/v1/bots/${bot}/users/${owner}/threads/${thread.thread}`;
  const own = owner === user;
  const lines = h("ol", { class: "lines", hidden: true });
  const toggle = h("button", { type: "button", class: "quiet", "aria-expanded": "false", text: "Lines",
    onclick: async () => {
      const open = toggle.getAttribute("aria-expanded") === "true";
      toggle.setAttribute("aria-expanded", String(!open));
      lines.hidden = open;
      if (open || lines.childElementCount) return;
      const shown = own ? (await api("GET", `${base}/lines?limit=1000`)).lines : heldLines;
      lines.append(...shown.map((line) => h("li", { class: `line ${line.role}` },
        h("span", { class: "seq", text: `${line.seq}` }),
        h("span", { class: "role", text: line.speaker || line.role }),
        h("span", { class: "text", text: line.text }),
        h("time", { text: when(line.created_at) }),
        deleteLineButton(bot, user, line))));
    } });
  const forget = h("button", { type: "button", class: "danger", text: "Forget thread", onclick: async () => {
    if (!await confirmDanger("Forget thread", `Forget thread ${thread.thread}: its ${counted(thread.lines, "line")} and any summary kept from it?`, "Forget thread")) return;
    await api("DELETE", base);
    say(`Forgot thread ${thread.thread}.`);
    window.dispatchEvent(new HashChangeEvent("hashchange"));
  } });
  return h("li", { class: "thread-item" },
    h("div", { class: "row" },
      h("span", { class: "title", text: thread.thread },
        owner !== user ? h("span", { class: "badge", text: identityLabel(owner) }) : null),
      h("span", { class: "meta", text: `${counted(thread.lines, "line")} · ${when(thread.created_at)} → ${when(thread.last_line_at)}${thread.ended_at ? ` · ended ${when(thread.ended_at)}` : ""}` }),
      h("span", { class: "links" }, toggle, own || session.builds ? forget : null)),
    lines);
}
