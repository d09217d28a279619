// The server's REST API. The key lives in sessionStorage (gone when the tab closes) and is
// sent only in the Authorization header: no cookie, so another site cannot make a browser
// act with it, and nothing for a CSRF token to guard.

const STORE = "membot.key";
const PERSON = "membot.person";

export const session = {
  get key() { return sessionStorage.getItem(STORE); },
  set key(value) {
    if (value) sessionStorage.setItem(STORE, value);
    else sessionStorage.removeItem(STORE);
    sessionStorage.removeItem(PERSON);
    this.me = null;
  },
  // The person last talked as in this tab: the chat opens with them again ("Talk with it").
  get person() { return sessionStorage.getItem(PERSON) ?? ""; },
  set person(value) { sessionStorage.setItem(PERSON, value); },
  me: null, // GET /v1/me: {scope, bot, user, ...}
  get builds() { return this.me && this.me.scope !== "person"; },
};

export class ApiError extends Error {
  constructor(status, type, message, stored = null) {
    super(message);
    this.status = status;
    this.type = type;
    this.stored = stored; // {thread, seq}: the line was stored before the turn failed
  }
}

/** A path with each interpolated part URL-encoded: path`/v1/bots/${name}`. */
export function path(strings, ...values) {
  return strings.reduce(
    (out, part, i) => out + part + (i < values.length ? encodeURIComponent(values[i]) : ""), "");
}

/** Call the API; resolves to the JSON answer (or the Response with raw), throws ApiError. */
export async function api(method, url, { json, body, raw, key } = {}) {
  const headers = {};
  const secret = key ?? session.key;
  if (secret) headers.Authorization = `Bearer ${secret}`;
  if (json !== undefined) {
    headers["Content-Type"] = "application/json";
    body = JSON.stringify(json);
  }
  let response;
  try {
    response = await fetch(url, { method, headers, body, credentials: "omit", cache: "no-store" });
  } catch {
    throw new ApiError(0, "network", "the server cannot be reached; is membot serve running?");
  }
  if (!response.ok) throw await errorOf(response);
  return raw ? response : response.json();
}

async function errorOf(response) {
  let type = "error";
  let message = `${response.status} ${response.statusText}`;
  let stored = null;
  try {
    const body = await response.json();
    ({ type, message, stored = null } = body.error);
  } catch { /* not JSON: keep the status line */ }
  return new ApiError(response.status, type, message, stored);
}

/** A streamed turn: yields {text} for each piece of the reply, then {turn} (or {error}). */
export async function* streamTurn(bot, request) {
  const response = await api("POST", path`/v1/bots/${bot}/turns`,
    { json: { ...request, stream: true }, raw: true });
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value;
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const data = event.split("\n").filter((line) => line.startsWith("data: "))
        .map((line) => line.slice(6)).join("\n");
      if (data) yield JSON.parse(data);
    }
  }
}
