// "Link another channel" on a person's Memory page: a link code to enter on another channel
// (shown with its expiry counting down, and where to enter it), a field to enter a code made
// elsewhere, and the identities linked with this one, each unlinked after asking.
// The code travels only in JSON bodies, never in an address.
import { api, path } from "./api.js";
import { h, field, say } from "./dom.js";
import { confirmDanger } from "./dialogs.js";

const SMS = "sms-"; // how the store names a person who texts: a keyed hash of the number

/** An identity as a person reads it: a phone as "text messages", never its hash. */
export function identityLabel(name) {
  return name.startsWith(SMS) ? "text messages" : name;
}

/** The card, filled with the person's linked identities. */
export async function linksCard(bot, user) {
  const base = path`/v1/bots/${bot}/users/${user}`;
  const list = h("ul", { class: "plain identities", "aria-label": "Linked identities" });
  const codeBox = h("div", { class: "link-code-box", hidden: true });
  const refresh = async () => showLinked(list, bot, user, await api("GET", `${base}/links`), refresh);
  const getCode = h("button", { type: "button", text: "Get a code", onclick: async () => {
    getCode.disabled = true;
    try {
      showCode(codeBox, await api("POST", `${base}/link-codes`));
    } catch (error) {
      say(error.message, "error");
    } finally {
      getCode.disabled = false;
    }
  } });
  const card = h("section", { class: "card links-card", "aria-labelledby": "links-title" },
    h("h2", { id: "links-title", text: "Link another channel" }),
    h("p", { text: `Talk with ${bot} in the web app, through the API or MCP, and by text message? Link them, and they are one person with one memory. Get a code here and enter it on the other channel within 10 minutes, or enter a code you got there.` }),
    h("div", { class: "actions" }, getCode),
    codeBox,
    enterForm(base, refresh),
    h("h3", { text: "Linked identities" }),
    list);
  await refresh();
  return card;
}

/** The code, its expiry counting down, and where to enter it. */
function showCode(box, made) {
  const ends = new Date(made.expires_at).getTime();
  const left = h("span", { class: "countdown", role: "timer" });
  const code = h("output", { class: "link-code", text: made.code, "aria-label": "Link code" });
  box.replaceChildren(
    h("p", {}, "Your link code: ", code, " · expires in ", left),
    h("p", { class: "help" }, "Enter it within 10 minutes on your other channel: in the web app or the API signed in as that identity, in “Enter a code” on its Memory page; by text message, text ",
      h("code", { text: `LINK ${made.code}` }), " to the bot's number; over MCP, call ",
      h("code", { text: "link_with_code" }), ". It works once."));
  box.hidden = false;
  clearInterval(box.timer);
  const tick = () => {
    const seconds = Math.max(0, Math.round((ends - Date.now()) / 1000));
    left.textContent = `${Math.floor(seconds / 60)}:${String(seconds % 60).padStart(2, "0")}`;
    if (seconds === 0 || !box.isConnected) {
      clearInterval(box.timer);
      // An expired code leaves the page: it could only mislead.
      if (box.isConnected) box.replaceChildren(h("p", { class: "muted", text: "That code has expired: get a new one." }));
    }
  };
  tick();
  box.timer = setInterval(tick, 1000);
}

function enterForm(base, refresh) {
  const input = h("input", { name: "link-code", autocomplete: "off", spellcheck: "false", required: true, maxlength: "64" });
  const codeField = field("Enter a code from another channel", input, { help: "As it was shown, e.g. K7QF-3M9P: case, spaces and hyphens do not matter." });
  const submit = h("button", { type: "submit", text: "Link" });
  return h("form", { class: "inline", "aria-label": "Enter a link code", onsubmit: async (event) => {
    event.preventDefault();
    codeField.showError("");
    submit.disabled = true;
    try {
      await api("POST", `${base}/links`, { json: { code: input.value } });
      input.value = "";
      say("Linked: the identities below are one person now.");
      await refresh();
    } catch (error) {
      codeField.showError(error.message);
      input.focus();
    } finally {
      submit.disabled = false;
    }
  } }, codeField, submit);
}

/** The identities linked with ``user``, the others each with Unlink. */
function showLinked(list, bot, user, { linked }, refresh) {
  const phones = linked.filter((name) => name.startsWith(SMS));
  const label = (name) => !name.startsWith(SMS) || phones.length === 1 ? identityLabel(name)
    : `text messages (phone ${phones.indexOf(name) + 1})`;
  const others = linked.filter((name) => name !== user);
  if (!others.length) {
    list.replaceChildren(h("li", { class: "muted", text: `${user} is not linked with any other channel.` }));
    return;
  }
  list.replaceChildren(...linked.map((name) => h("li", { class: "identity row" },
    h("span", { class: "title", text: label(name) }),
    name === user ? h("span", { class: "meta", text: "this identity" })
      : h("button", { type: "button", class: "danger", text: "Unlink", "aria-label": `Unlink ${label(name)}`, onclick: async () => {
        if (!await confirmDanger("Unlink", `Unlink ${label(name)} from ${user}? From now on they are two people to ${bot}; what each said stays with it.`, "Unlink")) return;
        try {
          await api("DELETE", path`/v1/bots/${bot}/users/${user}/links/${name}`);
          say(`Unlinked ${label(name)}.`);
          await refresh();
        } catch (error) {
          say(error.message, "error");
        }
      } }))));
}
