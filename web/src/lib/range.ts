// The time ranges the overview offers, and the bucket width each is
// drawn with (the usage API's interval).

export type RangeKey = 'hour' | 'day' | 'week' | 'month' | 'custom';
export type Interval = 'minute' | 'hour' | 'day';

export const ranges: { key: RangeKey; label: string; ms: number }[] = [
  { key: 'hour', label: 'Last hour', ms: 3600e3 },
  { key: 'day', label: 'Last day', ms: 86400e3 },
  { key: 'week', label: 'Last week', ms: 7 * 86400e3 },
  { key: 'month', label: 'Last 30 days', ms: 30 * 86400e3 },
  { key: 'custom', label: 'Custom', ms: 0 },
];

export const intervalMs: Record<Interval, number> = { minute: 60e3, hour: 3600e3, day: 86400e3 };

/** The bucket width for a window: at most a few hundred points. */
export function intervalFor(from: Date, to: Date): Interval {
  const span = to.getTime() - from.getTime();
  if (span <= 3 * 3600e3) return 'minute';
  if (span <= 10 * 86400e3) return 'hour';
  return 'day';
}

/** The start of every bucket of the window, in seconds (uPlot's x). */
export function buckets(from: Date, to: Date, iv: Interval): number[] {
  const step = intervalMs[iv];
  const out: number[] = [];
  for (let t = Math.floor(from.getTime() / step) * step; t < to.getTime(); t += step) out.push(t / 1000);
  return out;
}
