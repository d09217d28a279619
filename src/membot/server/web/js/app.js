// The app: sign-in, the navigation, and a router over location.hash (#/bots, #/chat/...),
// so the server serves one page and every view has an address to return to.
import { api, ApiError, session } from "./api.js";
import { h, field, say } from "./dom.js";
import { renderBots, renderBot } from "./bots.js";
import { renderChat } from "./chat.js";
import { renderMemory } from "./memory.js";
import { renderImport } from "./imports.js";

const main = document.getElementById("main");
const PAGES = { bots: renderBots, bot: renderBot, chat: renderChat, memory: renderMemory, import: renderImport };

/** A fresh view: pages render into it, and a page left midway writes into a detached node. */
function view() {
  const section = h("div", { class: "view" });
  main.replaceChildren(section);
  return section;
}

async function route() {
  const hash = location.hash;
  if (hash.startsWith("#signin=")) {
    await redeemLink(decodeURIComponent(hash.slice("#signin=".length)));
    return;
  }
  if (!session.key) { signedOut(); renderSignIn(view()); return; }
  if (!session.me) {
    try { session.me = await api("GET", "/v1/me"); } catch (error) {
      session.key = null;
      signedOut();
      renderSignIn(view(), error.message);
      return;
    }
  }
  signedIn();
  const [name, ...args] = hash.replace(/^#\/?/, "").split("/").filter(Boolean).map(decodeURIComponent);
  let page = PAGES[name] ? name : session.builds ? "bots" : "chat";
  if (page === "bots" && args.length) page = "bot";
  if ((page === "bots" || page === "bot") && !session.builds) page = "chat";
  markNav(page === "bot" ? "bots" : page);
  const section = view();
  try {
    await PAGES[page](section, args);
  } catch (error) {
    showFailure(section, error);
  }
  const heading = section.querySelector("h1");
  if (heading && document.activeElement === document.body) heading.focus();
}

/** What a page shows when the server refuses it: the message, and nothing of the page. */
export function showFailure(section, error) {
  section.replaceChildren(
    h("h1", { tabindex: "-1", text: error instanceof ApiError && error.status === 403 ? "Not allowed" : "Something went wrong" }),
    h("p", { class: "error-box", role: "alert", text: error.message }));
  if (error instanceof ApiError && error.status === 401) {
    session.key = null;
    route();
  }
}

function renderSignIn(section, problem) {
  const input = h("input", { type: "password", name: "key", autocomplete: "off", spellcheck: "false", required: true });
  const keyField = field("API key", input,
    { help: ["A key from ", h("code", { text: "membot keys create" }), ", or the one membot serve printed. Kept only in this tab."] });
  const form = h("form", { class: "card signin", onsubmit: async (event) => {
    event.preventDefault();
    session.key = input.value.trim();
    try {
      session.me = await api("GET", "/v1/me");
    } catch (error) {
      session.key = null;
      keyField.showError(error.message);
      input.focus();
      return;
    }
    location.hash = session.builds ? "#/bots" : "#/chat";
    route();
  } }, keyField, h("div", { class: "actions" }, h("button", { type: "submit", text: "Sign in" })));
  section.append(
    h("h1", { tabindex: "-1", text: "Sign in" }),
    h("p", { text: "Admin and bot keys build bots; a person's key talks with its bot." }),
    form);
  if (problem) keyField.showError(problem);
  input.focus();
}

/** The sign-in link membot serve printed: trade its one-time key for this tab's own. */
async function redeemLink(code) {
  history.replaceState(null, "", location.pathname); // the code leaves the address bar
  try {
    const made = await api("POST", "/v1/web/signin", { key: code });
    session.key = made.key;
    say("Signed in as the local admin.");
  } catch (error) {
    session.key = null;
    signedOut();
    renderSignIn(view(), `The sign-in link did not work: ${error.message}`);
    return;
  }
  location.hash = "#/bots";
}

function signedIn() {
  const me = session.me;
  const nav = document.getElementById("nav");
  const links = session.builds ? [["bots", "Bots"], ["chat", "Chat"], ["memory", "Memory"], ["import", "Import"]]
    : [["chat", "Chat"], ["memory", "Memory"], ["import", "Import"]];
  nav.replaceChildren(h("ul", {}, links.map(([page, label]) =>
    h("li", {}, h("a", { href: `#/${page}`, "data-page": page, text: label })))));
  const who = me.scope === "admin" ? "admin" : me.scope === "bot" ? `bot ${me.bot}` : `${me.user} · ${me.bot}`;
  document.getElementById("who").textContent = who;
  document.getElementById("signout").hidden = false;
}

function signedOut() {
  document.getElementById("nav").replaceChildren();
  document.getElementById("who").textContent = "";
  document.getElementById("signout").hidden = true;
}

function markNav(page) {
  for (const link of document.querySelectorAll("#nav a")) {
    if (link.dataset.page === page) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
}

document.getElementById("signout").addEventListener("click", () => {
  session.key = null;
  location.hash = "";
  route();
});
window.addEventListener("hashchange", route);
route();
