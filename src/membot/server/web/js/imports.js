// Import: a ChatGPT or Claude export uploaded as a person's history with a bot, then its
// progress (bytes read, lines stored) followed until it is done, and what it left out.
// The job's id is in the address (#/import/BOT/ID), so a reload follows it again.
import { api, path, session } from "./api.js";
import { h, field, say, counted } from "./dom.js";

const POLL_MS = 700;
const RUNNING = new Set(["queued", "running"]);

export async function renderImport(section, args) {
  section.append(h("h1", { tabindex: "-1", text: "Import your history" }));
  const [bot, job] = args;
  if (bot && job) {
    const progress = progressCard(bot);
    section.append(progress);
    await follow(bot, job, progress);
    return;
  }
  const bots = session.builds ? (await api("GET", "/v1/bots")).bots : [session.me.bot];
  section.append(
    h("p", { text: "Bring years of conversations: the export ChatGPT or Claude mails you, as downloaded (.zip) or its conversations.json. Each conversation becomes a thread; sent again, nothing is stored twice." }),
    uploadForm(bots, bot ?? bots[0]));
}

function uploadForm(bots, bot) {
  const botSelect = h("select", { name: "bot" }, bots.map((name) =>
    h("option", { value: name, selected: name === bot, text: name })));
  const person = h("input", { name: "user", autocomplete: "off", required: true, value: session.person || "" });
  const file = h("input", { type: "file", name: "file", accept: ".zip,.json,application/zip,application/json", required: true });
  const format = h("select", { name: "format" },
    h("option", { value: "", text: "Told from the file" }),
    h("option", { value: "chatgpt", text: "ChatGPT" }),
    h("option", { value: "claude", text: "Claude" }));
  const fileField = field("Export file", file, { help: "ChatGPT: Settings → Data controls → Export data. Claude: Settings → Privacy → Export data." });
  const submit = h("button", { type: "submit", text: "Import" });
  const fields = [
    session.builds ? field("Bot", botSelect) : null,
    session.builds ? field("Person", person, { help: "Whose history this is." }) : null,
    fileField,
    field("Format", format),
  ];
  return h("form", { class: "card", "aria-label": "Import an export", onsubmit: async (event) => {
    event.preventDefault();
    fileField.showError("");
    if (!file.files.length) { fileField.showError("choose the export's file first"); return; }
    const body = new FormData();
    body.append("file", file.files[0], file.files[0].name);
    if (format.value) body.append("format", format.value);
    if (session.builds) body.append("user", person.value.trim());
    const target = session.builds ? botSelect.value : session.me.bot;
    submit.disabled = true;
    try {
      const job = await api("POST", path`/v1/bots/${target}/imports`, { body });
      location.hash = `#/import/${encodeURIComponent(target)}/${encodeURIComponent(job.id)}`;
    } catch (error) {
      fileField.showError(error.message);
      submit.disabled = false;
    }
  } }, h("div", { class: "grid" }, fields), h("div", { class: "actions" }, submit));
}

function progressCard(bot) {
  return h("section", { class: "card import-progress", "aria-labelledby": "import-title", "aria-busy": "true" },
    h("h2", { id: "import-title", text: `Importing into ${bot}` }),
    h("progress", { max: "1", value: "0", "aria-label": "bytes read" }),
    h("p", { class: "meta import-counts", "aria-live": "polite" }),
    h("div", { class: "import-report" }));
}

/** Read the job until it is no longer running, showing each answer. */
async function follow(bot, id, card) {
  for (;;) {
    if (!card.isConnected) return; // the person went to another page
    const job = await api("GET", path`/v1/bots/${bot}/imports/${id}`);
    show(card, job);
    if (!RUNNING.has(job.status)) {
      card.setAttribute("aria-busy", "false");
      if (job.status === "done") say(`Imported ${counted(job.added, "line")} from ${job.file}.`);
      return;
    }
    await new Promise((done) => setTimeout(done, POLL_MS));
  }
}

function show(card, job) {
  const bar = card.querySelector("progress");
  bar.value = job.total_bytes ? job.bytes_read / job.total_bytes : 0;
  const megabytes = (bytes) => (bytes / 1e6).toFixed(1);
  card.querySelector(".import-counts").textContent =
    `${job.file} (${job.format}) · ${job.status} · ${megabytes(job.bytes_read)} of ${megabytes(job.total_bytes)} MB read · ` +
    `${counted(job.lines_read, "line")} read, ${job.added} stored`;
  if (RUNNING.has(job.status)) return;
  card.querySelector(".import-report").replaceChildren(...report(job));
}

function report(job) {
  const parts = [];
  if (job.error) parts.push(h("p", { class: "error-box", role: "alert", text: job.error }));
  if (job.status === "done") {
    const already = job.already_stored ? ` (${job.already_stored} were stored already)` : "";
    parts.push(h("p", { text: `Stored ${counted(job.added, "line")} of ${counted(job.conversations, "conversation")}${already}.` }));
  }
  const skipped = Object.entries(job.skipped);
  if (skipped.length) {
    parts.push(h("h3", { text: "Not stored, as membot keeps no such lines" }),
      h("ul", {}, skipped.map(([kind, count]) => h("li", { text: `${count} ${kind}` }))));
  }
  if (job.malformed) {
    const more = job.malformed - job.problems.length;
    parts.push(h("h3", { text: `Skipped as malformed: ${job.malformed}` }),
      h("ul", { class: "problems" }, job.problems.map((problem) => h("li", { text: problem })),
        more > 0 ? h("li", { class: "muted", text: `… and ${more} more` }) : null));
  }
  parts.push(h("p", { class: "links" },
    h("a", { href: `#/memory/${encodeURIComponent(job.bot)}/${encodeURIComponent(job.user)}`, text: `See ${job.user}'s memory` }),
    h("a", { href: "#/import", text: "Import another" })));
  return parts;
}
