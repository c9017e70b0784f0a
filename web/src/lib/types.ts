// The shapes of the admin API's answers (docs/openapi.yaml is the
// reference); only the fields the dashboard reads.

export interface Budget {
  usd: number;
  period: 'day' | 'week' | 'month' | 'total';
}

export interface Spend {
  usd: string;
  remaining_usd?: string;
  period_start?: string;
  resets_at?: string;
}

export interface Project {
  id: string;
  name: string;
  rpm: number;
  tpm: number;
  budget?: Budget;
  spend?: Spend;
  models?: string[];
  providers?: string[];
  read_only: boolean;
}

export interface Key {
  id: string;
  prefix: string;
  project_id: string;
  name: string;
  rpm: number;
  tpm: number;
  budget?: Budget;
  spend?: Spend;
  models?: string[];
  providers?: string[];
  expires_at?: string;
  revoked_at?: string;
  last_used_at?: string;
  created_at: string;
  read_only: boolean;
  status: 'active' | 'revoked' | 'expired';
  key?: string; // the secret, in the answer to create and rotate only
}

export interface Customer {
  id: string;
  project_id: string;
  external_id: string;
  name: string;
  daily_usd?: number;
  monthly_usd?: number;
  on_exceed: string;
  daily_spend?: Spend;
  monthly_spend?: Spend;
}

export interface UsageRow {
  bucket?: string;
  key?: string;
  project?: string;
  model?: string;
  provider?: string;
  customer?: string;
  requests: number;
  errors: number;
  prompt_tokens: number;
  completion_tokens: number;
  cached_tokens: number;
  cost_usd: string;
  cache_hits: number;
  latency_ms_p50?: number | null;
  latency_ms_p95?: number | null;
  ttft_ms_p50?: number | null;
  ttft_ms_p95?: number | null;
}

export interface Usage {
  data: UsageRow[];
  from: string;
  to: string;
}

export interface LogRecord {
  request_id: string;
  time: string;
  endpoint: string;
  key_id: string;
  project_id: string;
  project: string;
  customer: string;
  model: string;
  served_model: string;
  provider: string;
  deployment: string;
  status: number;
  error_kind: string;
  prompt_tokens: number;
  completion_tokens: number;
  cached_tokens: number;
  reasoning_tokens: number;
  cost_usd: string;
  usage_source: string;
  latency_ms: number;
  ttft_ms: number;
  overhead_ms: number;
  cache: string;
  attempts: number;
  stream: boolean;
  labels: Record<string, string>;
  request_body?: string;
  response_body?: string;
}

export interface Logs {
  object: 'list';
  data: LogRecord[];
  next_cursor: string | null;
}
