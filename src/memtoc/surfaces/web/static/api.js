// The HTTP API client: the bearer token, JSON requests and readable errors.
//
// The token arrives once in the URL fragment (#token=…, printed by `memtoc serve`); it is moved
// into sessionStorage (scoped to this tab, gone when it closes) and removed from the address bar
// so it is not left in history or screenshots. Every /v1 request sends it as a bearer header.

const TOKEN_KEY = "memtoc.token";

/** An API failure carrying the HTTP status and the server's message. */
export class ApiError extends Error {
  constructor(status, message, path) {
    super(message);
    this.status = status;
    this.path = path;
  }
}

/** Read `#token=…` (if present) into sessionStorage and return the rest of the fragment. */
export function adoptTokenFromHash() {
  const params = new URLSearchParams(location.hash.replace(/^#/, ""));
  const token = params.get("token");
  if (token) {
    sessionStorage.setItem(TOKEN_KEY, token);
    params.delete("token");
    const rest = params.toString();
    history.replaceState(null, "", location.pathname + location.search + (rest ? "#" + rest : ""));
  }
  return params;
}

export function setToken(token) {
  sessionStorage.setItem(TOKEN_KEY, token.trim());
}

export function hasToken() {
  return Boolean(sessionStorage.getItem(TOKEN_KEY));
}

/** Build `/v1/path?query` leaving out empty parameters. */
function url(path, params) {
  const query = new URLSearchParams();
  for (const [key, value] of Object.entries(params || {})) {
    if (value !== undefined && value !== null && value !== "") query.set(key, String(value));
  }
  const qs = query.toString();
  return "/v1/" + path + (qs ? "?" + qs : "");
}

async function request(method, path, params, body) {
  const headers = { Accept: "application/json" };
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) headers.Authorization = "Bearer " + token;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const target = url(path, params);
  let response;
  try {
    response = await fetch(target, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (err) {
    throw new ApiError(0, "the memtoc server does not answer (" + err.message + ")", target);
  }
  const text = await response.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!response.ok) {
    const detail = data && (data.detail || data.error || data.message);
    const message = typeof detail === "string" ? detail : text.slice(0, 300) || response.statusText;
    throw new ApiError(response.status, message, target);
  }
  return data;
}

export const api = {
  status: () => request("GET", "status"),
  projects: () => request("GET", "projects"),
  toc: (project) => request("GET", "toc", { project }),
  // A page of up to 500 children from `offset` (the view's `more` says how many follow).
  node: (id, project, tier = "L1", offset = 0) =>
    request("GET", "nodes/" + encodeURIComponent(id), { project, tier, offset, limit: 500 }),
  grip: (id, before = 3, after = 3) =>
    request("GET", "grips/" + encodeURIComponent(id), { before, after }),
  timeline: (project, level, since, until) =>
    request("GET", "timeline", { project, level, since, until }),
  // no project: every project (the API's default is the store's only project)
  search: (q, project, limit = 12) =>
    request("GET", "search", { q, project, all: project ? null : "true", limit }),
  bookmarks: (project, limit = 8) => request("GET", "bookmarks", { project, limit }),
  recall: (query, budget, project) => request("POST", "recall", null, { query, budget, project }),
};
