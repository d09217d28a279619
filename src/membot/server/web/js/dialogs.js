// Questions asked in a <dialog> of the page (not window.confirm): keyboard-friendly, styled,
// and Escape always means "cancel".
import { h } from "./dom.js";

/** Ask ``question``; resolves to the value of the button chosen, or null for cancel.
 * choices: [{label, value, danger?}], the first is focused. */
export function ask(title, question, choices) {
  return new Promise((resolve) => {
    const buttons = choices.map((choice) => h("button", {
      type: "button",
      class: choice.danger ? "danger" : choice.quiet ? "quiet" : "",
      text: choice.label,
      onclick: () => dialog.close(String(choices.indexOf(choice))),
    }));
    const titleId = `dialog-title-${Date.now()}`;
    const dialog = h("dialog", { "aria-labelledby": titleId },
      h("h2", { id: titleId, text: title }),
      h("p", { text: question }),
      h("div", { class: "actions" }, buttons));
    dialog.addEventListener("close", () => {
      const index = Number.parseInt(dialog.returnValue, 10);
      dialog.remove();
      resolve(Number.isNaN(index) ? null : choices[index].value);
    });
    document.body.append(dialog);
    dialog.showModal();
    buttons[0].focus();
  });
}

/** Yes or cancel, for what cannot be undone. */
export async function confirmDanger(title, question, action) {
  const choice = await ask(title, question,
    [{ label: "Cancel", value: false, quiet: true }, { label: action, value: true, danger: true }]);
  return choice === true;
}
