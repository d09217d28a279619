// Chat: pick a bot, talk as a named person, the person's threads (new, switch, end with
// "remember this conversation?"), replies streaming in as written, and the memory
// inspector beside every reply.
import { api, path, session, streamTurn } from "./api.js";
import { h, field, say, unsay, when, counted } from "./dom.js";
import { ask } from "./dialogs.js";
import { inspector } from "./inspector.js";
import { renderMarkdown } from "./markdown.js";

// The traces of replies given in this tab, by thread and reply seq (the server keeps the
// lines; a turn's trace is what this tab was answered).
const traces = new Map();
// The server's limit on a line (MAX_LINE_CHARS): a longer one is refused, not cut.
const MAX_LINE_CHARS = 1000000;
// BotSettings.bot_name's default: a bot never given a name is shown by its key name.
const UNNAMED = "AI";

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
  // A bot the address names that is not there (mistyped, deleted): said, not swapped silently.
  if (args[0] && !bots.includes(args[0])) say(`No bot named ${args[0]}: showing ${bots[0]}.`, "error");
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
  ui.inspector = h("div", { class: "inspector-slot" });
  clearInspector(ui);
  // No maxlength: it cut a longer paste without a word. The length is said beside the box.
  ui.input = h("textarea", { name: "text", rows: "2", required: true, disabled: true, placeholder: "Write a line…",
    oninput: () => ui.inputField.showError(lengthProblem(ui.input.value.trim())),
    onkeydown: (event) => {
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        ui.composer.requestSubmit();
      }
    } });
  ui.inputField = field("Message (Enter sends, Shift+Enter a new line)", ui.input);
  ui.send = h("button", { type: "submit", text: "Send", disabled: true });
  ui.composer = h("form", { class: "composer", onsubmit: (event) => { event.preventDefault(); send(ui); } },
    ui.inputField, ui.send);
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
  ui.personInput = h("input", { name: "user", required: true, autocomplete: "off", value: state.user,
    oninput: () => personTyped(ui, personField) });
  const personField = field("Talk as (the person's name)", ui.personInput);
  // What the form shows is where a line goes: a bot chosen in the list opens at once, for
  // the person named (an unopened list choice sent lines to the bot shown before).
  const open = async () => {
    const user = ui.personInput.value.trim();
    const problem = user.includes("/")
      ? "A person's name cannot hold \"/\" in the web app: the name is part of the page's address." : "";
    personField.showError(problem);
    Object.assign(state, { bot: botSelect.value, user: problem ? "" : user, thread: "" });
    if (!state.user) {
      showNobody(ui);
      ui.personInput.focus();
      return;
    }
    unsay(); // "Enter the person's name first": done
    await opening(ui, openPerson(ui, state));
  };
  const botSelect = h("select", { name: "bot", onchange: open }, bots.map((name) =>
    h("option", { value: name, selected: name === state.bot, text: name })));
  return h("form", { class: "who-talks", onsubmit: (event) => { event.preventDefault(); open(); } },
    field("Bot", botSelect), personField, h("button", { type: "submit", text: "Open" }));
}

/** A name typed but not opened yet: a line would still go to the person shown, so nothing
 * can be sent or ended until Open (or Enter), and the field says so. The name opened, typed
 * again, gives the thread back. */
function personTyped(ui, personField) {
  const typed = ui.personInput.value.trim();
  const opened = ui.state.user;
  if (!opened || !ui.shown) return;
  const elsewhere = typed !== opened;
  personField.showError(elsewhere ? `Open to talk as ${typed || "someone"}: this is still ${opened}'s thread.` : "");
  ui.input.disabled = ui.send.disabled = elsewhere;
  ui.end.disabled = elsewhere || !ui.endable;
}

/** Wait for a person or thread to open; one the server refuses (or cannot be reached for)
 * shows nobody and says why, rather than leaving the last person on screen in silence. */
async function opening(ui, work) {
  try {
    await work;
  } catch (error) {
    showNobody(ui);
    say(`Could not open ${ui.state.user}'s threads: ${refusal(error)}`, "error");
  }
}

/** No one opened (no name yet, or one refused): nothing of the last person shows, and
 * nothing can be sent or ended. */
function showNobody(ui) {
  ui.shown = false;
  if (ui.title.isConnected) history.replaceState(null, "", `#/chat/${encodeURIComponent(ui.state.bot)}`);
  ui.title.textContent = "No thread";
  ui.threads.replaceChildren();
  ui.messages.replaceChildren();
  clearInspector(ui);
  ui.input.disabled = ui.send.disabled = ui.end.disabled = true;
}

/** The inspector shows one reply of the thread on screen, never one of another. */
function clearInspector(ui) {
  ui.inspector.replaceChildren(h("p", { class: "muted", text: "Send a line: what the reply recalled shows here." }));
}

/** How the bot's lines are labelled: the name its profile gives it (what its prompts call
 * it), or its key name when it has none or this key may not read the profile. */
async function botLabel(bot) {
  try {
    const { settings } = await api("GET", path`/v1/bots/${bot}`);
    return settings.bot_name && settings.bot_name !== UNNAMED ? settings.bot_name : bot;
  } catch {
    return bot;
  }
}

async function openPerson(ui, state) {
  const run = ui.run = (ui.run ?? 0) + 1;
  const label = await botLabel(state.bot);
  if (ui.run !== run) return; // another bot or person was opened meanwhile
  ui.botLabel = label;
  const threads = await loadThreads(ui, state);
  if (ui.run !== run) return;
  if (!state.thread) {
    const open = threads.filter((each) => !each.ended_at).at(-1);
    state.thread = open ? open.thread : newName();
  }
  await showThread(ui, state);
}

async function loadThreads(ui, state) {
  const { bot, user } = state;
  // A linked person's threads include their other identities' (an SMS conversation, say):
  // the chat talks as this identity, in its own threads; the Memory page shows them all.
  const threads = (await api("GET", path`/v1/bots/${bot}/users/${user}/threads`)).threads
    .filter((each) => (each.user ?? user) === user);
  // Answered after another person or bot was opened (a reply's refresh, late): not theirs.
  if (state.bot !== bot || state.user !== user) return threads;
  const names = threads.map((each) => each.thread);
  const listed = names.includes(state.thread) || !state.thread ? threads
    : [...threads, { thread: state.thread, lines: 0, created_at: null, ended_at: null }];
  ui.threads.replaceChildren(...listed.map((each) => h("li", {},
    h("button", { type: "button", class: "thread", "aria-current": each.thread === state.thread ? "true" : false,
      onclick: () => { state.thread = each.thread; opening(ui, showThread(ui, state)); } },
    h("span", { class: "name", text: each.thread }),
    h("span", { class: "meta", text: `${counted(each.lines, "line")}${each.ended_at ? " · ended" : ""}` })))));
  // A thread with no lines yet is not on the server: there is nothing to end.
  ui.endable = names.includes(state.thread);
  ui.end.disabled = !ui.endable;
  return threads;
}

async function showThread(ui, state) {
  // Each opening counts: one overtaken by a later (two bots chosen quickly) draws nothing,
  // or both would draw their lines into the one list.
  const run = ui.run = (ui.run ?? 0) + 1;
  // A chat left while it loaded (another page opened) must not write that page's address:
  // its next refresh would open the chat again (a flaky browser test).
  if (!ui.title.isConnected) return;
  history.replaceState(null, "", `#/chat/${[state.bot, state.user, state.thread].map(encodeURIComponent).join("/")}`);
  if (session.builds) session.person = state.user;
  ui.title.textContent = `Thread ${state.thread}`;
  // Closed while the thread loads: a line sent meanwhile would be shown twice.
  ui.shown = false;
  ui.input.disabled = ui.send.disabled = ui.end.disabled = true;
  ui.messages.replaceChildren();
  clearInspector(ui);
  const threads = await loadThreads(ui, state);
  if (ui.run !== run) return;
  let lines = [];
  if (threads.some((each) => each.thread === state.thread)) { // a new thread has no lines yet
    ({ lines } = await api("GET", path`/v1/bots/${state.bot}/users/${state.user}/threads/${state.thread}/lines?limit=1000`));
    if (ui.run !== run) return;
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
  ui.shown = true;
  ui.input.disabled = ui.send.disabled = false;
  ui.input.focus();
}

function message(ui, line, turn) {
  const bot = line.role === "bot";
  const body = h("div", { class: "body" });
  if (bot) body.append(renderMarkdown(line.text));
  else body.textContent = line.text;
  const item = h("li", { class: `msg ${line.role}` },
    h("div", { class: "who" }, line.speaker || (bot ? ui.botLabel : line.role === "human" ? ui.state.user : line.role),
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
  const tooLong = lengthProblem(text);
  ui.inputField.showError(tooLong);
  if (tooLong) return;
  ui.send.disabled = true;
  ui.input.value = "";
  const line = message(ui, { role: "human", text, created_at: new Date().toISOString() });
  ui.messages.append(line);
  const body = h("div", { class: "body" });
  const reply = h("li", { class: "msg bot", "aria-busy": "true" },
    h("div", { class: "who" }, ui.botLabel, h("time", { text: when(new Date().toISOString()) })), body);
  ui.messages.append(reply);
  let written = "";
  let begun = false; // the reply began: the line is stored, whatever happens next
  // Where the line went: another bot, person or thread may be open when the reply ends.
  const sent = { bot: state.bot, user: state.user, thread: state.thread };
  try {
    for await (const event of streamTurn(sent.bot, { user: session.builds ? sent.user : undefined, thread: sent.thread, text })) {
      begun = true;
      if (traceKey(sent) === traceKey(state)) ui.end.disabled = false; // on the server now: it can end
      if (event.text !== undefined) {
        written += event.text;
        body.replaceChildren(renderMarkdown(written));
        reply.scrollIntoView({ block: "end" });
      } else if (event.turn) {
        body.replaceChildren(renderMarkdown(event.turn.response));
        remember(sent, event.turn);
        attachTrace(ui, reply, event.turn);
        if (reply.isConnected && traceKey(sent) === traceKey(state)) showTrace(ui, reply, event.turn);
      } else if (event.error) {
        body.append(h("p", { class: "error", role: "alert", text: event.error.message }));
      }
    }
  } catch (error) {
    if (!error.stored && !begun && !refusedByMembot(error)) {
      // No answer to read (the connection lost, a proxy's page): the line may be stored or
      // not. The thread is shown as the server holds it; the box gets the line back only
      // where it is not there.
      say(`The answer was lost (${error.message}): the thread is shown as the server holds it.`, "error");
      if (traceKey(sent) === traceKey(state)) {
        await showThread(ui, state);
        const said = [...ui.messages.querySelectorAll(".msg.human .body")].at(-1)?.textContent;
        if (said !== text && !ui.input.value) ui.input.value = text;
      }
      return;
    }
    if (!error.stored && !begun) {
      // Refused before anything was stored (too long, a key no longer valid): nothing may
      // look sent. The line goes back in the box, the reason beside it, not as the bot's words.
      line.remove();
      reply.remove();
      if (!ui.input.value) ui.input.value = text;
      ui.inputField.showError(`Not sent: ${refusal(error)}`);
      return; // nothing changed on the server: the threads stand as listed
    }
    // Stored before the turn failed (the model or the store down, the connection lost
    // midway): it stays where it is.
    body.replaceChildren(h("p", { class: "error", role: "alert", text: error.message }));
    reply.scrollIntoView({ block: "end" });
  } finally {
    reply.removeAttribute("aria-busy");
    ui.send.disabled = false;
    ui.input.focus();
  }
  await loadThreads(ui, state);
}

/** Why ``text`` cannot be sent, or "" when it can: over the server's limit it is refused. */
function lengthProblem(text) {
  const count = [...text].length; // characters, as the server counts them (not UTF-16 units)
  return count > MAX_LINE_CHARS
    ? `Too long to send: ${count} characters, and a line is limited to ${MAX_LINE_CHARS}. Shorten it or send it in parts.`
    : "";
}

/** Whether membot itself answered the error (its JSON, a status it gives): then a line
 * without ``stored`` was refused before it was stored. */
function refusedByMembot(error) {
  return error.status >= 400 && error.type !== "error";
}

/** What to tell the person whose line the server refused. */
function refusal(error) {
  if (error.status !== 401) return error.message;
  // The key was revoked or expired after signing in: only a new sign-in helps.
  return `this key is no longer valid (${error.message}). Sign out, then sign in again with a valid key.`;
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
  await opening(ui, showThread(ui, ui.state));
  if (ui.shown) say(`New thread ${ui.state.thread}.`);
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
    kept ? h("p", { class: "pre summary-text", text: kept.text }) : null,
    // Writing on here takes the thread up again (as when an ended thread is opened): say so.
    h("p", { class: "muted", text: "A new line takes this conversation up again; New thread starts another." })));
  ui.messages.lastElementChild.scrollIntoView({ block: "end" });
  await loadThreads(ui, state);
}

function newName() {
  const now = new Date();
  const pad = (n) => String(n).padStart(2, "0");
  return `chat-${now.getFullYear()}-${pad(now.getMonth() + 1)}-${pad(now.getDate())}-` +
    `${pad(now.getHours())}${pad(now.getMinutes())}${pad(now.getSeconds())}`;
}
