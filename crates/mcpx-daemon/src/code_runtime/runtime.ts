// The mcpx code-mode runtime: served by the daemon (`GET /v1/code/runtime`) and
// written by `mcpx run`/`mcpx exec` beside the script, so it always matches the
// running daemon. It is the script's one way out: tool calls go as JSON lines on
// stdout and their results come back as JSON lines on stdin (docs/code-mode.md,
// "The channel"). Nothing else leaves: the sandbox grants no file system, network,
// environment or subprocess.

/** One tool of a namespace: its real name, and whether it declares an `outputSchema`. */
interface ToolName {
  tool: string;
  structured: boolean;
}

/** One server's namespace: the server's real name and its tools, by function name. */
interface Namespace {
  server: string;
  tools: Record<string, ToolName>;
}

/** What the CLI passes to `install`: the namespaces to define, by identifier. */
export interface Table {
  namespaces: Record<string, Namespace>;
}

/** An error a tool call rejects with. */
export class ToolError extends Error {
  /** mcpx's error kind (`rpc`, `server`, `timeout`, ...), or `tool` for an `isError` result. */
  kind: string;
  /** The JSON-RPC error code, for `rpc`. */
  code?: number;
  /** The whole `CallToolResult`, for an `isError` result. */
  result?: unknown;
  constructor(message: string, kind: string, code?: number, result?: unknown) {
    super(message);
    this.name = "ToolError";
    this.kind = kind;
    this.code = code;
    this.result = result;
  }
}

const encoder = new TextEncoder();
const pending = new Map<number, (answer: Answer) => void>();
let next = 1;
let reading = false;
// The server and tool of each namespace function, for `mcpx.raw`.
const targets = new WeakMap<object, [string, string]>();

interface Answer {
  id: number;
  result?: Record<string, unknown>;
  error?: { kind: string; message: string; code?: number };
}

// Writes one frame; the whole line in one write, so concurrent calls never interleave.
function send(frame: unknown): void {
  const bytes = encoder.encode(JSON.stringify(frame) + "\n");
  let written = 0;
  while (written < bytes.length) {
    written += Deno.stdout.writeSync(bytes.subarray(written));
  }
}

// Reads answers from stdin while any call waits, and hands each to its caller.
async function read(): Promise<void> {
  if (reading) return;
  reading = true;
  const lines = Deno.stdin.readable.pipeThrough(new TextDecoderStream());
  let buffer = "";
  for await (const chunk of lines) {
    buffer += chunk;
    let end;
    while ((end = buffer.indexOf("\n")) >= 0) {
      const line = buffer.slice(0, end);
      buffer = buffer.slice(end + 1);
      if (!line.trim()) continue;
      const answer = JSON.parse(line) as Answer;
      const resolve = pending.get(answer.id);
      pending.delete(answer.id);
      resolve?.(answer);
    }
  }
}

async function call(
  server: string,
  tool: string,
  args: unknown,
  wantRaw: boolean,
  structured?: boolean,
): Promise<unknown> {
  const id = next++;
  const answer = new Promise<Answer>((resolve) => pending.set(id, resolve));
  send({ call: id, server, tool, arguments: args ?? {} });
  read();
  const { result, error } = await answer;
  if (error) throw new ToolError(error.message, error.kind, error.code);
  if (wantRaw) return result;
  if (result?.isError) {
    const texts = (result.content as { type: string; text?: string }[] | undefined ?? [])
      .filter((c) => c.type === "text").map((c) => c.text).join("\n");
    throw new ToolError(texts || `${server}.${tool} returned an error`, "tool", undefined, result);
  }
  // The declared result type: the structured content of a tool with an `outputSchema`
  // (a tool the declarations do not know: whenever it sent some), else the whole result.
  const useStructured = structured ?? result?.structuredContent !== undefined;
  return useStructured && result?.structuredContent !== undefined ? result.structuredContent : result;
}

function namespace(ns: Namespace): Record<string, unknown> {
  return new Proxy({}, {
    get(_target, name) {
      // Not a tool: what `await` and `JSON.stringify` look for on any object.
      if (typeof name !== "string" || name === "then" || name === "toJSON") return undefined;
      const known = Object.hasOwn(ns.tools, name) ? ns.tools[name] : undefined;
      const tool = known?.tool ?? name;
      const f = (args?: unknown) => call(ns.server, tool, args, false, known?.structured);
      targets.set(f, [ns.server, tool]);
      return f;
    },
  });
}

/** Defines one global per server and `mcpx`; log output goes to stderr. */
export function install(table: Table): void {
  const g = globalThis as Record<string, unknown>;
  for (const [ident, ns] of Object.entries(table.namespaces)) g[ident] = namespace(ns);
  g.mcpx = {
    ToolError,
    raw<A>(tool: (args: A) => Promise<unknown>): (args: A) => Promise<unknown> {
      const t = targets.get(tool);
      if (!t) throw new TypeError("mcpx.raw takes a tool function, such as mcpx.raw(everything.echo)");
      return (args: A) => call(t[0], t[1], args, true);
    },
  };
  for (const k of ["log", "info", "debug"] as const) {
    console[k] = (...args: unknown[]) => console.error(...args);
  }
}

/** Loads the script (`load`), runs its default export (a value, a promise or a function) and sends what it gives. */
export async function main(load: () => Promise<{ default?: unknown }>): Promise<void> {
  try {
    // Loaded here, so an error thrown at the script's top level is reported like any other.
    const script = await load();
    let value = script.default;
    if (typeof value === "function") value = await value();
    value = await value;
    if (typeof value === "string") send({ text: value });
    else if (value === undefined) send({ none: true });
    else send({ value });
  } catch (e) {
    const error = e as { name?: string; message?: string; stack?: string; kind?: string; cause?: unknown };
    // The causes say what was refused ("fetch failed: ...: Operation not permitted").
    let message = error?.message ?? String(e);
    let cause = error?.cause;
    for (let depth = 0; cause !== undefined && cause !== null && depth < 4; depth++) {
      const c = cause as { message?: string; cause?: unknown };
      message += `: ${c.message ?? String(cause)}`;
      cause = c.cause;
    }
    send({ fail: { name: error?.name ?? "Error", message, stack: error?.stack, kind: error?.kind } });
  }
  Deno.exit(0);
}
