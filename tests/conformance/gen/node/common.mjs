// What the three Node clients share: the tools (real fetches against the loopback stub that
// tests/conformance/gen/polyglot.py starts), the scripted conversations, the canaries and the
// OTLP exporter for a transport.  Each client wires these into its own framework.
import { z } from 'zod';
import { OTLPTraceExporter as GrpcExporter } from '@opentelemetry/exporter-trace-otlp-grpc';
import { OTLPTraceExporter as ProtoExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { OTLPTraceExporter as JsonExporter } from '@opentelemetry/exporter-trace-otlp-http';

const STUB = process.env.STUB_URL;
// A fetch the stub holds for seconds: the tool gives up after this long.
export const CLIENT_TIMEOUT_MS = 250;

// CNRY-<case>-<nn><kind>-<hex>: kind a=argument, p=prompt, r=model reply, t=tool result,
// s=session/conversation id.  Fixed per case so a regenerated corpus keeps its truth.toml.
export function canary(abbr, hex, n, kind) {
  return `CNRY-${abbr}-${String(n).padStart(2, '0')}${kind}-${hex}`;
}

export function exporterFor(transport) {
  switch (transport) {
    case 'grpc':
      return new GrpcExporter({ url: `http://${process.env.OTLP_GRPC_ENDPOINT}` });
    case 'http-protobuf':
      return new ProtoExporter({ url: process.env.OTLP_HTTP_ENDPOINT });
    case 'http-json':
      return new JsonExporter({ url: process.env.OTLP_HTTP_ENDPOINT });
    default:
      throw new Error(`unknown transport ${transport}`);
  }
}

// What a careful tool author throws on a non-2xx reply: the status, the URL, Retry-After.
export class HttpStatusError extends Error {
  constructor(method, status, statusText, url, retryAfterS) {
    const wait = retryAfterS ? ` (retry after ${retryAfterS}s)` : '';
    super(`${method} ${url} failed: HTTP ${status} ${statusText}${wait}`);
    this.name = 'HttpStatusError';
    this.status = status;
    this.retryAfterS = retryAfterS;
  }
}

async function call(path, init = {}) {
  const url = `${STUB}${path}`;
  const res = await fetch(url, init);
  if (!res.ok) {
    const after = res.headers.get('retry-after');
    await res.body?.cancel();
    throw new HttpStatusError(init.method ?? 'GET', res.status, res.statusText, url, after ? Number(after) : undefined);
  }
  return res;
}

const ORDERS = new Map(); // the in-memory order book: every lookup misses

// name -> { description, schema (zod), run(args, resultCanary) }
export const TOOLS = {
  get_weather: {
    description: 'Current weather for a city.',
    schema: z.object({ city: z.string(), units: z.string().optional() }),
    async run({ city }, t) {
      const res = await call(`/weather?city=${encodeURIComponent(city)}`);
      return { ...(await res.json()), station: t };
    },
  },
  lookup_order: {
    description: 'Look an order up by id.',
    schema: z.object({ order_id: z.string(), note: z.string().optional() }),
    async run({ order_id }, t) {
      if (!ORDERS.has(order_id)) {
        // A structured error returned as a normal result, as many tool authors do.
        return { error: 'not_found', message: `no order ${order_id}`, ref: t };
      }
      return ORDERS.get(order_id);
    },
  },
  get_customer: {
    description: 'Fetch a customer record from the CRM.',
    schema: z.object({ customer_id: z.string() }),
    async run({ customer_id }) {
      return (await call(`/customers/${encodeURIComponent(customer_id)}`)).json();
    },
  },
  search_docs: {
    description: 'Search the knowledge base.',
    schema: z.object({ query: z.string() }),
    async run({ query }) {
      return (await call(`/search?q=${encodeURIComponent(query)}`)).json();
    },
  },
  delete_file: {
    description: 'Delete an exported file.',
    schema: z.object({ path: z.string() }),
    async run({ path }) {
      await call(`/files${path}`, { method: 'DELETE' });
      return { deleted: path };
    },
  },
  fetch_report: {
    description: 'Fetch a generated report.',
    schema: z.object({ report_id: z.string() }),
    async run({ report_id }) {
      const res = await call(`/slow/${encodeURIComponent(report_id)}`, {
        signal: AbortSignal.timeout(CLIENT_TIMEOUT_MS),
      });
      return res.json();
    },
  },
  export_report: {
    description: 'Export a generated report.',
    schema: z.object({ report_id: z.string() }),
    async run({ report_id }, _t, signal) {
      const res = await call(`/slow/${encodeURIComponent(report_id)}`, { signal });
      return res.json();
    },
  },
  summarize_ledger: {
    description: 'Summarize an account ledger.',
    schema: z.object({ account_id: z.string() }),
    async run({ account_id }) {
      const res = await call(`/ledger/${encodeURIComponent(account_id)}`);
      const ledger = JSON.parse(await res.text()); // the stub answers text: SyntaxError
      return { total: ledger.entries.length };
    },
  },
};

// The scripted conversations: one tool call each, then the model's final answer.  `extra`
// rows are failures only some frameworks can produce (their own timeout, an approval denied).
export function scenarios(abbr, hex, extra = []) {
  const c = (n, kind) => canary(abbr, hex, n, kind);
  const rows = [
    [1, 'get_weather', (a) => ({ city: a }), 'ok'],
    [2, 'lookup_order', (a) => ({ order_id: a }), 'structured not_found'],
    [3, 'get_weather', (a) => ({ city: 12345, units: a }), 'mistyped city'],
    [4, 'lookup_order', (a) => ({ note: a }), 'missing order_id'],
    [5, 'get_customer', (a) => ({ customer_id: a }), 'HTTP 404'],
    [6, 'search_docs', (a) => ({ query: a }), 'HTTP 429'],
    [7, 'delete_file', (a) => ({ path: `/srv/exports/${a}.csv` }), 'HTTP 403'],
    [8, 'fetch_report', (a) => ({ report_id: a }), 'client timeout'],
    [9, 'summarize_ledger', (a) => ({ account_id: a }), 'unexpected SyntaxError'],
    ...extra,
  ];
  return rows.map(([n, tool, args, what]) => ({
    n,
    tool,
    what,
    args: args(c(n, 'a')),
    prompt: `Please help with ${tool.replace('_', ' ')}, reference ${c(n, 'p')}`,
    reply: `Here is what I found: ${c(n, 'r')}`,
    result: c(n, 't'),
    session: `conv-${c(n, 's')}`,
  }));
}
