// Every number the dashboard shows comes from gatehouse's admin API, the
// same endpoints the CLI uses. The browser authenticates with the session
// cookie the login set; calls that change anything carry the session's
// CSRF token, which the page holds in memory only.

export class ApiError extends Error {
  constructor(
    message: string,
    readonly status: number,
    readonly code: string = '',
    readonly param: string = '',
  ) {
    super(message);
  }
}

let csrfToken = '';
let onSessionEnded: () => void = () => {};

export function setCSRF(token: string) {
  csrfToken = token;
}

/** Called when the admin API says the session is over (401). */
export function whenSessionEnds(fn: () => void) {
  onSessionEnded = fn;
}

export async function api<T>(method: string, path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { Accept: 'application/json' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (method !== 'GET' && method !== 'HEAD') headers['X-CSRF-Token'] = csrfToken;
  let resp: Response;
  try {
    resp = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: 'same-origin',
    });
  } catch {
    throw new ApiError('The gateway did not answer; is it running?', 0);
  }
  if (resp.status === 204) return undefined as T;
  const text = await resp.text();
  let data: any = undefined;
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      throw new ApiError(`Unexpected answer from ${path} (HTTP ${resp.status}).`, resp.status);
    }
  }
  if (!resp.ok) {
    const e = data?.error ?? {};
    const err = new ApiError(e.message || `HTTP ${resp.status}`, resp.status, e.code || '', e.param || '');
    if (resp.status === 401 && !path.startsWith('/ui/api/')) onSessionEnded();
    throw err;
  }
  return data as T;
}

export const get = <T>(path: string) => api<T>('GET', path);

/** A query string from the set fields of params. */
export function query(params: Record<string, string | number | undefined | null>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  }
  const s = q.toString();
  return s ? '?' + s : '';
}

export interface List<T> {
  object: 'list';
  data: T[];
  has_more: boolean;
  next_after?: string;
}

/** Every page of an admin list, up to max items. */
export async function all<T extends { id: string }>(path: string, max = 5000): Promise<T[]> {
  const out: T[] = [];
  let after = '';
  for (;;) {
    const sep = path.includes('?') ? '&' : '?';
    const page = await get<List<T>>(`${path}${sep}limit=500${after ? '&after=' + encodeURIComponent(after) : ''}`);
    out.push(...page.data);
    if (!page.has_more || !page.next_after || out.length >= max) return out;
    after = page.next_after;
  }
}
