export function usd(v: string | number | undefined | null, digits = 4): string {
  if (v === undefined || v === null || v === '') return '—';
  const n = typeof v === 'string' ? Number(v) : v;
  if (!Number.isFinite(n)) return '—';
  if (n !== 0 && Math.abs(n) < 10 ** -digits) return '$' + n.toExponential(1);
  return '$' + n.toLocaleString('en-US', { minimumFractionDigits: 2, maximumFractionDigits: digits });
}

export function int(n: number | undefined | null): string {
  if (n === undefined || n === null) return '—';
  return n.toLocaleString('en-US');
}

export function ms(n: number | undefined | null): string {
  if (n === undefined || n === null || !Number.isFinite(n)) return '—';
  if (n >= 10000) return (n / 1000).toFixed(1) + ' s';
  if (n >= 100) return Math.round(n) + ' ms';
  return n.toFixed(1) + ' ms';
}

export function pct(n: number | undefined | null): string {
  if (n === undefined || n === null || !Number.isFinite(n)) return '—';
  return (n * 100).toFixed(n > 0 && n < 0.01 ? 2 : 1) + '%';
}

export function time(s: string | undefined | null): string {
  if (!s) return '—';
  const d = new Date(s);
  return d.toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'medium' });
}

/** A <input type="datetime-local"> value for d, in local time. */
export function localInput(d: Date): string {
  const p = (n: number) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}`;
}
