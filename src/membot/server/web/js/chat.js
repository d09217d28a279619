// Chat: pick a bot, talk as a named person, the person's threads (new, switch, end with
// "remember this conversation?"), replies streaming in as written, and the memory
// inspector beside every reply.
import { api, path, session, streamTurn } from "./api.js";
import { h, field, say, when } from "./dom.js";
import { ask } from "./dialogs.js";
import { inspector } from "./inspector.js";
import { renderMarkdown } from "./markdown.js";

// The traces of replies given in this tab, by thread and reply seq (the server keeps the
// lines; a turn's trace is what this tab was answered).
const traces = new Map();

function traceKey(state) {
  return JSON.stringify([state.bot, state.user, state.thread]);
}

export async function renderChat(section, args) {
  const me = session.me;
  const bots = session.builds ? (await api("GET", "/v1/bots")).bots : [me.bot];
  section.append(h("h1", { tabindex: "-1", text: "Chat" }));
  if (!bots.length) {
    section.append(h("p", {}, "No bots yet: ", h("a", { href: "#/bots", text: "make one" }), "."));
    return;
  }
  const state = {
    bot: bots.includes(args[0]) ? args[0] : bots[0],
    user: me.user ?? args[1] ?? session.person,
    thread: args[2] ?? "",
  };
  const ui = layout(section, state, bots);
  if (state.user) await openPerson(ui, state);
  else ui.personInput?.focus();
}

function layout(section, state, bots) {
  const ui = { state };
  ui.threads = h("ul", { class: "threads plain" });
  ui.messages = h("ol", { class: "messages", role: "log", "aria-live": "polite", "aria-label": "Conversation" });
  ui.title = h("h2", { class: "thread-title", text: "No thread" });
  ui.inspector = h("div", { class: "inspector-slot" },
    h("p", { class: "muted", text: "Send a line: what the reply recalled shows here." }));
  // maxlength: the server's limit on a line (MAX_LINE_CHARS), so a longer one cannot be typed.
  ui.input = h("textarea", { name: "text", rows: "2", required: true, disabled: true, maxlength: "32000", placeholder: "Write a line…",
    onkeydown: (event) => {
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        ui.composer.requestSubmit();
      }
    } });
  ui.send = h("button", { type: "submit", text: "Send", disabled: true });
  ui.composer = h("form", { class: "composer", onsubmit: (event) => { event.preventDefault(); send(ui); } },
    field("Message (Enter sends, Shift+Enter a new line)", ui.input), ui.send);
  ui.end = h("button", { type: "button", class: "quiet", text: "End thread", disabled: true, onclick: () => endThread(ui) });
  section.append(h("div", { class: "chat" },
    h("aside", { class: "side", "aria-label": "Bot, person and threads" },
      whoForm(ui, state, bots),
      h("h2", { text: "Threads" }), ui.threads,
      h("button", { type: "button", class: "quiet", text: "New thread", onclick: () => newThread(ui) })),
    h("section", { class: "conversation", "aria-label": "Conversation" },
      h("div", { class: "row" }, ui.title, ui.end), ui.messages, ui.composer),
    h("aside", { class: "inspector", "aria-label": "Memory inspector" },
      h("h2", { text: "Memory inspector" }), ui.inspector)));
  return ui;
}

function whoForm(ui, state, bots) {
  if (!session.builds) {
    return h("p", { class: "who-talks" }, "You are ", h("strong", { text: state.user }),
      ", talking with ", h("strong", { text: state.bot }), ".");
  }
  const botSelect = h("select", { name: "bot" }, bots.map((name) =>
    h("option", { value: name, selected: name === state.bot, text: name })));
  ui.personInput = h("input", { name: "user", required: true, autocomplete: "off", value: state.user });
  return h("form", { class: "who-talks", onsubmit: async (event) => {
    event.preventDefault();
    Object.assign(state, { bot: botSelect.value, user: ui.personInput.value.trim(), thread: "" });
    if (state.user) await openPerson(ui, state);
  } }, field("Bot", botSelect), field("Talk as (the person's name)", ui.personInput),
  h("button", { type: "submit", text: "Open" }));
}

async function openPerson(ui, state) {
  const threads = await loadThreads(ui, state);
  if (!state.thread) {
    const open = threads.filter((each) => !each.ended_at).at(-1);
    state.thread = open ? open.thread : newName();
  }
  await showThread(ui, state);
}

async function loadThreads(ui, state) {
  const { threads } = await api("GET", path`/v1/bots/${state.bot}/users/${state.user}/threads`);
  const names = threads.map((each) => each.thread);
  const listed = names.includes(state.thread) || !state.thread ? threads
    : [...threads, { thread: state.thread, lines: 0, created_at: null, ended_at: null }];
  ui.threads.replaceChildren(...listed.map((each) => h("li", {},
    h("button", { type: "button", class: "thread", "aria-current": each.thread === state.thread ? "true" : false,
      onclick: () => { state.thread = each.thread; showThread(ui, state); } },
    h("span", { class: "name", text: each.thread }),
    h("span", { class: "meta", text: `${each.lines} lines${each.ended_at ? " · ended" : ""}` })))));
  return threads;
}

async function showThread(ui, state) {
  history.replaceState(null, "", `#/chat/${[state.bot, state.user, state.thread].map(encodeURIComponent).join("/")}`);
  if (session.builds) session.person = state.user;
  ui.title.textContent = `Thread ${state.thread}`;
  ui.end.disabled = false;
  // Closed while the thread loads: a line sent meanwhile would be shown twice.
  ui.input.disabled = ui.send.disabled = true;
  ui.messages.replaceChildren();
  const threads = await loadThreads(ui, state);
  let lines = [];
  if (threads.some((each) => each.thread === state.thread)) { // a new thread has no lines yet
    ({ lines } = await api("GET", path`/v1/bots/${state.bot}/users/${state.user}/threads/${state.thread}/lines?limit=1000`));
  }
  const known = traces.get(traceKey(state)) ?? new Map();
  for (const line of lines) ui.messages.append(message(ui, line, known.get(line.seq)));
  const ended = threads.find((each) => each.thread === state.thread)?.ended_at;
  if (ended) {  // writing here takes it up again: say so before it happens
    ui.messages.append(h("li", { class: "msg system ending" },
      h("div", { class: "who" }, "Thread ended", h("time", { text: when(ended) })),
      h("p", { text: "A new line takes this conversation up again; end it again to remember what is said next." })));
  }
  ui.messages.lastElementChild?.scrollIntoView({ block: "end" });
  ui.input.disabled = ui.send.disabled = false;
  ui.input.focus();
}

function message(ui, line, turn) {
  const bot = line.role === "bot";
  const body = h("div", { class: "body" });
  if (bot) body.append(renderMarkdown(line.text));
  else body.textContent = line.text;
  const item = h("li", { class: `msg ${line.role}` },
    h("div", { class: "who" }, line.speaker || (bot ? ui.state.bot : line.role === "human" ? ui.state.user : line.role),
      h("time", { text: when(line.created_at) })),
    body);
  if (turn) attachTrace(ui, item, turn);
  return item;
}

function attachTrace(ui, item, turn) {
  const button = h("button", { type: "button", class: "quiet inspect-button", text: "Inspect memory",
    "aria-label": `Inspect the memory of reply ${turn.reply_line?.seq ?? ""}`,
    onclick: () => showTrace(ui, item, turn) });
  item.append(button);
}

function showTrace(ui, item, turn) {
  for (const each of ui.messages.querySelectorAll(".msg.selected")) each.classList.remove("selected");
  item.classList.add("selected");
  ui.inspector.replaceChildren(inspector(turn));
}

async function send(ui) {
  const { state } = ui;
  const text = ui.input.value.trim();
  if (!text || ui.send.disabled) return;
  ui.send.disabled = true;
  ui.input.value = "";
  ui.messages.append(message(ui, { role: "human", text, created_at: new Date().toISOString() }));
  const body = h("div", { class: "body" });
  const reply = h("li", { class: "msg bot", "aria-busy": "true" },
    h("div", { class: "who" }, state.bot, h("time", { text: when(new Date().toISOString()) })), body);
  ui.messages.append(reply);
  let written = "";
  try {
    for await (const event of streamTurn(state.bot, { user: session.builds ? state.user : undefined, thread: state.thread, text })) {
      if (event.text !== undefined) {
        written += event.text;
        body.replaceChildren(renderMarkdown(written));
        reply.scrollIntoView({ block: "end" });
      } else if (event.turn) {
        body.replaceChildren(renderMarkdown(event.turn.response));
        remember(state, event.turn);
        attachTrace(ui, reply, event.turn);
        showTrace(ui, reply, event.turn);
      } else if (event.error) {
        body.append(h("p", { class: "error", role: "alert", text: event.error.message }));
      }
    }
  } catch (error) {
    // Refused before anything was stored (too long, no key): the line goes back in the box.
    // One stored before the turn failed (the model or the store down) stays where it is.
    body.replaceChildren(h("p", { class: "error", role: "alert", text: error.message }));
    if (!error.stored && !ui.input.value) ui.input.value = text;
    reply.scrollIntoView({ block: "end" });
  } finally {
    reply.removeAttribute("aria-busy");
    ui.send.disabled = false;
    ui.input.focus();
  }
  await loadThreads(ui, state);
}

function remember(state, turn) {
  const key = traceKey(state);
  if (!traces.has(key)) traces.set(key, new Map());
  traces.get(key).set(turn.reply_line?.seq, turn);
}

async function newThread(ui) {
  if (!ui.state.user) {  // a thread is someone's: without a name it could only fail later
    say("Enter the person's name first (Talk as), then Open.", "error");
    ui.personInput?.focus();
    return;
  }
  ui.state.thread = newName();
  await showThread(ui, ui.state);
  say(`New thread ${ui.state.thread}.`);
}

async function endThread(ui) {
  const { state } = ui;
  const remember = await ask("End this thread", "Remember this conversation? The bot keeps its key points about you for later threads.",
    [{ label: "Yes, remember it", value: true }, { label: "No", value: false }, { label: "Cancel", value: null, quiet: true }]);
  if (remember === null) return;
  let ending;
  try {
    ending = await api("POST", path`/v1/bots/${state.bot}/users/${state.user}/threads/${state.thread}/end`, { json: { remember } });
  } catch (error) { say(error.message, "error"); return; }
  const kept = ending.remembered;
  ui.messages.append(h("li", { class: "msg system ending" },
    h("div", { class: "who", text: "Thread ended" }),
    h("p", { text: kept ? `Remembered (${ending.decision})${kept.categories.length ? ` [${kept.categories.join(", ")}]` : ""}:` : `Nothing kept: ${ending.reason}` }),
    kept ? h("p", { class: "pre summary-text", text: kept.text }) : null));
  ui.messages.lastElementChild.scrollIntoView({ block: "end" });
  await loadThreads(ui, state);
}

function newName() {
  const now = new Date();
  const pad = (n) => String(n).padStart(2, "0");
  return `chat-${now.getFullYear()}-${pad(now.getMonth() + 1)}-${pad(now.getDate())}-` +
    `${pad(now.getHours())}${pad(now.getMinutes())}${pad(now.getSeconds())}`;
}
