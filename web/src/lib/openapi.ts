// Just enough of OpenAPI 3.1 to browse docs/openapi.yaml: operations by
// tag, and schemas with their $refs resolved.

export type Schema = Record<string, any>;

export interface Operation {
  method: string;
  path: string;
  id: string;
  summary: string;
  description: string;
  tags: string[];
  parameters: any[];
  requestBody?: any;
  responses: Record<string, any>;
  security?: any;
}

export interface Doc {
  info: { title: string; version: string; description?: string };
  tags?: { name: string; description?: string }[];
  paths: Record<string, Record<string, any>>;
  components?: Record<string, Record<string, any>>;
}

const methods = ['get', 'post', 'put', 'patch', 'delete'];

export function operations(doc: Doc): Operation[] {
  const out: Operation[] = [];
  for (const [path, item] of Object.entries(doc.paths ?? {})) {
    for (const m of methods) {
      const op = item[m];
      if (!op) continue;
      out.push({
        method: m.toUpperCase(),
        path,
        id: op.operationId ?? `${m}-${path}`,
        summary: op.summary ?? '',
        description: op.description ?? '',
        tags: op.tags ?? ['other'],
        parameters: [...(item.parameters ?? []), ...(op.parameters ?? [])].map((p) => resolve(doc, p)),
        requestBody: op.requestBody ? resolve(doc, op.requestBody) : undefined,
        responses: Object.fromEntries(Object.entries(op.responses ?? {}).map(([k, v]) => [k, resolve(doc, v)])),
        security: op.security,
      });
    }
  }
  return out;
}

/** Follows a local $ref (#/components/…) to what it names. */
export function resolve(doc: Doc, v: any, depth = 0): any {
  if (!v || typeof v !== 'object' || typeof v.$ref !== 'string' || depth > 20) return v;
  const parts = v.$ref.replace(/^#\//, '').split('/');
  let cur: any = doc;
  for (const p of parts) cur = cur?.[p.replace(/~1/g, '/').replace(/~0/g, '~')];
  return resolve(doc, cur, depth + 1);
}

export function refName(v: any): string {
  return typeof v?.$ref === 'string' ? v.$ref.split('/').pop() : '';
}

/** A schema's type in a word or two, for a table cell. */
export function typeOf(doc: Doc, s: Schema | undefined): string {
  if (!s) return 'any';
  const name = refName(s);
  const r = resolve(doc, s);
  if (!r) return name || 'any';
  if (r.const !== undefined) return JSON.stringify(r.const);
  if (r.enum) return r.enum.map((e: unknown) => JSON.stringify(e)).join(' | ');
  if (r.oneOf || r.anyOf) return (r.oneOf ?? r.anyOf).map((x: Schema) => typeOf(doc, x)).join(' | ');
  const t = Array.isArray(r.type) ? r.type.join(' | ') : r.type;
  if (t === 'array') return `array of ${typeOf(doc, r.items)}`;
  if (name) return name;
  return t ?? (r.properties || r.allOf ? 'object' : 'any');
}

/** The properties of an object schema, allOf merged. */
export function properties(doc: Doc, s: Schema | undefined): { props: Record<string, Schema>; required: string[] } {
  const r = resolve(doc, s);
  const props: Record<string, Schema> = {};
  const required: string[] = [];
  if (!r || typeof r !== 'object') return { props, required };
  for (const part of r.allOf ?? []) {
    const sub = properties(doc, part);
    Object.assign(props, sub.props);
    required.push(...sub.required);
  }
  Object.assign(props, r.properties ?? {});
  required.push(...(r.required ?? []));
  return { props, required };
}
