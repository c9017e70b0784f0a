import { api, setCSRF, whenSessionEnds } from './api';

interface SessionInfo {
  logged_in: boolean;
  csrf_token?: string;
  expires_at?: string;
  name?: string;
  role?: 'admin' | 'viewer';
}

export const session = $state({ checked: false, loggedIn: false, expiresAt: '', notice: '', name: '', readOnly: false });

function opened(s: SessionInfo) {
  if (!s.logged_in) {
    session.loggedIn = false;
    return;
  }
  setCSRF(s.csrf_token ?? '');
  session.loggedIn = true;
  session.expiresAt = s.expires_at ?? '';
  session.name = s.name ?? '';
  // A viewer may look but not change: the admin API refuses its changes
  // (403), so the pages do not offer them.
  session.readOnly = s.role === 'viewer';
  session.notice = '';
}

whenSessionEnds(() => {
  setCSRF('');
  session.loggedIn = false;
  session.notice = 'Your session has ended; log in again.';
});

/** Asks the gateway whether the cookie this browser holds is a live session. */
export async function check() {
  try {
    opened(await api<SessionInfo>('GET', '/ui/api/session'));
  } catch (e) {
    session.notice = (e as Error).message;
    session.loggedIn = false;
  } finally {
    session.checked = true;
  }
}

export async function login(adminKey: string) {
  opened(await api<SessionInfo>('POST', '/ui/api/login', { admin_key: adminKey }));
}

export async function logout() {
  try {
    await api('POST', '/ui/api/logout');
  } finally {
    setCSRF('');
    session.loggedIn = false;
    session.notice = 'Logged out.';
  }
}
