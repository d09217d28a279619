// Bots: the list, a new bot, a bot's profile (every setting, with an error shown beside the
// field it is about), TOML export and import, and the bot's expertise documents.
import { api, path, session } from "./api.js";
import { h, field, say, when, download, counted } from "./dom.js";
import { confirmDanger } from "./dialogs.js";

let strategyNames = []; // the server's registered strategies (GET /v1/strategies)
const GROUPS = [
  ["Names", ["bot_name", "human_name"]],
  ["Model", ["llm", "llm_key_env", "prompt_style", "citations", "relevance_check", "reply_tokens",
    "context_size"]],
  ["Recall", ["strategy", "strategy_options", "threshold", "max_matches", "expand_before",
    "expand_after", "buffer_size", "window_size", "window_overlap", "share_across_people",
    "recall_roles", "recall_summaries", "thread_summary"]],
  ["Expertise", ["expertise_max_matches", "expertise_min_score"]],
  ["Ending conversations", ["remember_policy", "idle_timeout_minutes"]],
];
const HELP = {
  llm: "Empty: the server's model. smollm2, openai:MODEL[@BASE_URL] (admin keys only).",
  llm_key_env: "The environment variable holding the model's key (never stored).",
  prompt_style: "auto: a short prompt for a small model (the bundled one), the full one otherwise.",
  strategy_options: "The strategy's numbers, one NAME=VALUE a line.",
  threshold: "History matches scoring below this are left out.",
  context_size: "Tokens the model reads; the prompt gets context_size − reply_tokens.",
  recall_roles: "Which lines can be recalled, separated by commas.",
  remember_policy: "Checked before a summary is kept, e.g. “never keep health details”.",
  idle_timeout_minutes: "Threads idle this long end (0: never).",
};
const LONG_TEXT = new Set(["remember_policy"]);

export async function renderBots(section) {
  const { bots } = await api("GET", "/v1/bots");
  section.append(h("h1", { tabindex: "-1", text: "Bots" }));
  section.append(bots.length
    ? h("ul", { class: "cards" }, bots.map((name) => h("li", { class: "card" },
      h("a", { href: `#/bots/${encodeURIComponent(name)}`, class: "title", text: name }),
      h("span", { class: "links" },
        h("a", { href: `#/chat/${encodeURIComponent(name)}`, text: "Talk" }),
        h("a", { href: `#/memory/${encodeURIComponent(name)}`, text: "Memory" })))))
    : h("p", { text: "No bots yet." }));
  if (session.me.scope === "admin") section.append(newBotForm(), importAsNewForm());
}

function newBotForm() {
  const name = h("input", { name: "name", required: true, maxlength: "200", autocomplete: "off" });
  const botName = h("input", { name: "bot_name", placeholder: "AI" });
  const humanName = h("input", { name: "human_name", placeholder: "HUMAN" });
  const nameField = field("Name", name, { help: "How the bot is addressed in the API and keys." });
  return h("form", { class: "card", "aria-labelledby": "new-bot", onsubmit: async (event) => {
    event.preventDefault();
    const settings = {};
    if (botName.value.trim()) settings.bot_name = botName.value.trim();
    if (humanName.value.trim()) settings.human_name = humanName.value.trim();
    try {
      await api("POST", "/v1/bots", { json: { name: name.value.trim(), settings } });
    } catch (error) { nameField.showError(error.message); return; }
    say(`Bot ${name.value.trim()} created.`);
    location.hash = `#/bots/${encodeURIComponent(name.value.trim())}`;
  } },
  h("h2", { id: "new-bot", text: "New bot" }),
  h("div", { class: "grid" }, nameField, field("The bot's name in the prompt", botName),
    field("The person's name in the prompt", humanName)),
  h("div", { class: "actions" }, h("button", { type: "submit", text: "Create bot" })));
}

function importAsNewForm() {
  const name = h("input", { name: "name", required: true, autocomplete: "off" });
  const file = h("input", { type: "file", accept: ".toml,application/toml,text/plain", required: true });
  const fileField = field("Profile (TOML)", file);
  return h("form", { class: "card", "aria-labelledby": "import-bot", onsubmit: async (event) => {
    event.preventDefault();
    try {
      await api("POST", "/v1/bots", { json: { name: name.value.trim() } });
      await api("PUT", path`/v1/bots/${name.value.trim()}/profile`, { body: await file.files[0].text() });
    } catch (error) { fileField.showError(error.message); return; }
    location.hash = `#/bots/${encodeURIComponent(name.value.trim())}`;
  } },
  h("h2", { id: "import-bot", text: "New bot from a TOML profile" }),
  h("div", { class: "grid" }, field("Name of the imported bot", name), fileField),
  h("div", { class: "actions" }, h("button", { type: "submit", text: "Import" })));
}

export async function renderBot(section, [bot]) {
  const profile = await api("GET", path`/v1/bots/${bot}`);
  strategyNames = Object.keys((await api("GET", "/v1/strategies")).strategies);
  section.append(
    h("h1", { tabindex: "-1", text: `Bot ${bot}` }),
    h("p", { class: "links" },
      h("a", { href: `#/chat/${encodeURIComponent(bot)}`, text: "Talk with it" }),
      h("a", { href: `#/memory/${encodeURIComponent(bot)}`, text: "Its memory" })),
    profileForm(bot, profile.settings),
    tomlCard(bot),
    await documentsCard(bot));
}

// -- the profile -------------------------------------------------------------------------

function profileForm(bot, settings) {
  const controls = {};
  const fields = {};
  const templateNames = Object.keys(settings).filter((name) => name.endsWith("_fmt") || name.startsWith("no_"));
  const grouped = new Set([...GROUPS.flatMap(([, names]) => names), ...templateNames]);
  const others = Object.keys(settings).filter((name) => !grouped.has(name));
  const groups = [...GROUPS, ["Prompt templates", templateNames], ["Other", others]];
  const formError = h("p", { class: "error", role: "alert" });
  const fieldsets = groups.filter(([, names]) => names.length).map(([legend, names]) =>
    h("fieldset", { class: legend === "Prompt templates" ? "templates" : "" }, h("legend", { text: legend }),
      names.filter((name) => name in settings).map((name) => {
        controls[name] = controlFor(name, settings[name], templateNames.includes(name));
        fields[name] = field(name, controls[name],
          { help: HELP[name], wide: templateNames.includes(name) || LONG_TEXT.has(name) });
        return fields[name];
      })));
  const form = h("form", { class: "card profile", "aria-labelledby": "profile-title", novalidate: true,
    onsubmit: async (event) => {
      event.preventDefault();
      Object.values(fields).forEach((box) => box.showError(""));
      formError.textContent = "";
      const changed = {};
      for (const [name, control] of Object.entries(controls)) {
        const value = readControl(control, settings[name]);
        if (JSON.stringify(value) !== JSON.stringify(settings[name])) changed[name] = value;
      }
      if (!Object.keys(changed).length) { say("Nothing changed."); return; }
      try {
        const saved = await api("PATCH", path`/v1/bots/${bot}`, { json: changed });
        Object.assign(settings, saved.settings);
        say(`Saved ${Object.keys(changed).join(", ")}.`);
      } catch (error) {
        const name = fieldNamed(error.message, Object.keys(changed));
        if (name) { fields[name].showError(error.message); controls[name].focus(); }
        else formError.textContent = error.message;
      }
    } },
  h("h2", { id: "profile-title", text: "Profile" }), formError, fieldsets,
  h("div", { class: "actions sticky" }, h("button", { type: "submit", text: "Save profile" })));
  return form;
}

function controlFor(name, value, template) {
  const adminOnly = (name === "llm" || name === "llm_key_env") && session.me.scope !== "admin";
  const common = { name, disabled: adminOnly };
  if (typeof value === "boolean") return h("input", { ...common, type: "checkbox", checked: value });
  if (typeof value === "number") return h("input", { ...common, type: "number", step: "any", inputmode: "decimal", value: String(value) });
  if (name === "strategy") {
    const names = strategyNames.includes(value) ? strategyNames : [value, ...strategyNames];
    return h("select", common, names.map((each) => h("option", { value: each, selected: each === value, text: each })));
  }
  if (Array.isArray(value)) return h("input", { ...common, value: value.join(", ") });
  if (value && typeof value === "object") {
    return h("textarea", { ...common, rows: "3", value: Object.entries(value).map(([k, v]) => `${k}=${v}`).join("\n") });
  }
  if (template || LONG_TEXT.has(name)) return h("textarea", { ...common, rows: template ? "4" : "2", value: value ?? "" });
  return h("input", { ...common, value: value ?? "" });
}

function readControl(control, original) {
  if (typeof original === "boolean") return control.checked;
  if (typeof original === "number") return control.value.trim() === "" ? control.value : Number(control.value);
  if (Array.isArray(original)) return control.value.split(",").map((part) => part.trim()).filter(Boolean);
  if (original && typeof original === "object") {
    const values = {};
    for (const line of control.value.split("\n")) {
      if (!line.trim()) continue;
      const [key, ...rest] = line.split("=");
      values[key.trim()] = rest.join("=").trim() === "" ? rest.join("=") : Number(rest.join("="));
    }
    return values;
  }
  return control.value;
}

/** The setting an error message is about: the server names it (``prompt_fmt may not use
 * {X}``, ``bot setting threshold wants a number``, ``threshold must lie between``). */
function fieldNamed(message, names) {
  const found = names.filter((name) => new RegExp(`(^|[^\\w.])${name}([^\\w]|$)`).test(message));
  return found.sort((a, b) => message.indexOf(a) - message.indexOf(b))[0]
    ?? (names.length === 1 ? names[0] : null);
}

// -- TOML --------------------------------------------------------------------------------

function tomlCard(bot) {
  const file = h("input", { type: "file", accept: ".toml,application/toml,text/plain" });
  const fileField = field("Replace the profile with a TOML file", file);
  return h("section", { class: "card", "aria-labelledby": "toml-title" },
    h("h2", { id: "toml-title", text: "Export and import" }),
    h("div", { class: "actions" }, h("button", { type: "button", class: "quiet", text: "Export TOML",
      onclick: async () => {
        const response = await api("GET", path`/v1/bots/${bot}/profile`, { raw: true });
        download(`${bot}.toml`, await response.text(), "application/toml");
      } })),
    h("form", { onsubmit: async (event) => {
      event.preventDefault();
      if (!file.files.length) { fileField.showError("choose a file first"); return; }
      try {
        await api("PUT", path`/v1/bots/${bot}/profile`, { body: await file.files[0].text() });
      } catch (error) { fileField.showError(error.message); return; }
      say("Profile imported.");
      window.dispatchEvent(new HashChangeEvent("hashchange"));
    } }, fileField, h("div", { class: "actions" }, h("button", { type: "submit", text: "Import TOML" }))));
}

// -- documents ---------------------------------------------------------------------------

async function documentsCard(bot) {
  const list = h("div", { class: "documents" });
  const files = h("input", { type: "file", multiple: true, name: "files", accept: ".txt,.md,.markdown,.html,.htm,.pdf" });
  const filesField = field("Upload documents (text, Markdown, HTML, PDF)", files);
  const refresh = async () => {
    const { documents } = await api("GET", path`/v1/bots/${bot}/documents`);
    list.replaceChildren(documents.length ? documentTable(bot, documents, refresh)
      : h("p", { text: "No documents yet." }));
  };
  const upload = h("form", { onsubmit: async (event) => {
    event.preventDefault();
    filesField.showError("");
    if (!files.files.length) { filesField.showError("choose one or more files first"); return; }
    const body = new FormData();
    for (const each of files.files) body.append("files", each, each.name);
    try {
      const { documents } = await api("POST", path`/v1/bots/${bot}/documents`, { body });
      say(`Added ${documents.map((d) => `${d.name} (${counted(d.chunks, "passage")})`).join(", ")}.`);
    } catch (error) { filesField.showError(error.message); return; }
    files.value = "";
    await refresh();
  } }, filesField, h("div", { class: "actions" }, h("button", { type: "submit", text: "Upload" })));
  await refresh();
  return h("section", { class: "card", "aria-labelledby": "documents-title" },
    h("h2", { id: "documents-title", text: "Expertise documents" }), upload, list);
}

function documentTable(bot, documents, refresh) {
  return h("ul", { class: "plain" }, documents.map((doc) => {
    const passages = h("ol", { class: "chunks", hidden: true });
    const toggle = h("button", { type: "button", class: "quiet", "aria-expanded": "false", text: "Passages",
      onclick: async () => {
        const open = toggle.getAttribute("aria-expanded") === "true";
        toggle.setAttribute("aria-expanded", String(!open));
        passages.hidden = open;
        if (open || passages.childElementCount) return;
        const { chunks } = await api("GET", path`/v1/bots/${bot}/documents/${doc.name}/chunks`);
        passages.append(...chunks.map((chunk) => h("li", {},
          chunk.heading ? h("strong", { text: chunk.heading }) : null, h("p", { class: "pre", text: chunk.text }))));
      } });
    const remove = h("button", { type: "button", class: "danger", text: "Remove", onclick: async () => {
      if (!await confirmDanger("Remove document", `Remove ${doc.name} and its ${counted(doc.chunks, "passage")} from ${bot}?`, "Remove")) return;
      await api("DELETE", path`/v1/bots/${bot}/documents/${doc.name}`);
      say(`Removed ${doc.name}.`);
      await refresh();
    } });
    return h("li", { class: "document" },
      h("div", { class: "row" },
        h("span", { class: "title", text: doc.name }),
        h("span", { class: "meta", text: `${doc.title} · ${doc.media} · ${counted(doc.chunks, "passage")} · added ${when(doc.added_at)}` }),
        h("span", { class: "links" }, toggle, remove)),
      passages);
  }));
}
