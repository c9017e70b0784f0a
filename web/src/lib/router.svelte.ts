// A router of a few pages under /ui/: the path is the page, the query
// string its filters, so every view can be bookmarked and reloaded.

export const pages = [
  { path: '', title: 'Overview' },
  { path: 'projects', title: 'Projects' },
  { path: 'keys', title: 'Keys' },
  { path: 'providers', title: 'Providers' },
  { path: 'logs', title: 'Request log' },
  { path: 'api', title: 'API reference' },
] as const;

const base = '/ui/';

function current() {
  const p = location.pathname.startsWith(base) ? location.pathname.slice(base.length) : '';
  const [page = '', ...rest] = p.split('/');
  return { page, rest: rest.join('/'), search: location.search };
}

export const route = $state(current());

window.addEventListener('popstate', () => Object.assign(route, current()));

export function navigate(to: string, replace = false) {
  const url = base + to.replace(/^\/+/, '');
  if (url === location.pathname + location.search) return;
  if (replace) history.replaceState(null, '', url);
  else history.pushState(null, '', url);
  Object.assign(route, current());
}

/** An onclick for <a href="/ui/…"> that stays in the app. */
export function link(e: MouseEvent) {
  const a = e.currentTarget as HTMLAnchorElement;
  if (e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
  e.preventDefault();
  navigate(a.pathname.slice(base.length) + a.search);
}

/** Replaces the query string of the current page (filters). */
export function setQuery(params: Record<string, string>) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v) q.set(k, v);
  const s = q.toString();
  navigate(route.page + (route.rest ? '/' + route.rest : '') + (s ? '?' + s : ''), true);
}
