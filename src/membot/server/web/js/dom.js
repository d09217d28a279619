// Building the page from DOM nodes only: text goes in as text nodes (never parsed as HTML),
// so whatever a person, a model or a document wrote is shown, not run.

/** An element: h("button", {type: "button", onclick: f}, "Save"). Properties named on* are
 * listeners; "text" sets textContent; "class" the class; other values are attributes (or
 * properties, for values that are not strings: checked, disabled, ...). */
export function h(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(props ?? {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else if (name === "text") node.textContent = value;
    else if (name === "class") node.className = value;
    else if (name === "value") node.value = value; // a textarea has no value attribute
    else if (typeof value !== "string" && name in node) node[name] = value;
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  return append(node, children);
}

/** Append children: nodes as they are, anything else as a text node. */
export function append(node, children) {
  for (const child of [children].flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

let counter = 0;
/** A unique id for label/for and aria-describedby pairs. */
export function uid(prefix = "id") {
  counter += 1;
  return `${prefix}-${counter}`;
}

/** "2026-11-23T11:55:11Z" → "2026-11-23 11:55" in the browser's time zone. */
export function when(iso) {
  if (!iso) return "";
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return String(iso);
  const pad = (n) => String(n).padStart(2, "0");
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())} ` +
    `${pad(date.getHours())}:${pad(date.getMinutes())}`;
}

/** A labelled control: the label, the control and the place its error is shown. */
export function field(labelText, control, { help, wide } = {}) {
  control.id ||= uid("f");
  const error = h("p", { class: "error", id: `${control.id}-error`, "aria-live": "polite" });
  const described = [error.id];
  let helpNode = null;
  if (help) {
    // Text, or nodes with text (a command shown as <code>): never HTML.
    helpNode = h("p", { class: "help", id: `${control.id}-help` }, help);
    described.unshift(helpNode.id);
  }
  control.setAttribute("aria-describedby", described.join(" "));
  const box = h("div", { class: wide ? "field wide" : "field" },
    h("label", { for: control.id, text: labelText }), control, helpNode, error);
  box.showError = (message) => {
    error.textContent = message || "";
    if (message) control.setAttribute("aria-invalid", "true");
    else control.removeAttribute("aria-invalid");
  };
  return box;
}

/** "1 passage", "3 passages": a count with its noun. */
export function counted(count, one, many = `${one}s`) {
  return `${count} ${count === 1 ? one : many}`;
}

// A message goes when clicked (module scripts run once the page is parsed: #status is there).
document.getElementById("status")?.addEventListener("click", (event) => { event.currentTarget.textContent = ""; });

/** Say something in the status line (read out by screen readers). */

export function say(message, kind = "info") {
  const status = document.getElementById("status");
  status.className = `status ${kind}`;
  status.textContent = message;
  clearTimeout(say.timer);
  // An error stays longer, and goes when clicked: it used to stay for good, over the Send button.
  say.timer = setTimeout(() => { status.textContent = ""; }, kind === "error" ? 15000 : 6000);
}

/** Take back what the status line says: it asked for something that has now been done. */
export function unsay() {
  clearTimeout(say.timer);
  document.getElementById("status").textContent = "";
}

/** Offer text as a file download (no server round trip). */
export function download(name, text, type) {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const link = h("a", { href: url, download: name, hidden: true });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}
