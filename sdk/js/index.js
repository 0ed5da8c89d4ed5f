// Write an Airlock tool in JavaScript: `defineTool({...})` returns the
// `tool` export of the `airlock:tool` world, which jco componentize turns
// into a component. The same concepts and names as the Rust SDK: a
// descriptor (name, prompt, flags, what the tool asks for), an input
// schema, optional preflight checks, typed errors, context changes.
//
//     import { defineTool, Output } from "airlock-sdk";
//     export const tool = defineTool({
//       name: "shout",
//       description: "Returns the text in capitals.",
//       flags: ["read-only", "concurrency-safe"],
//       inputSchema: { type: "object", properties: { text: { type: "string" } }, required: ["text"] },
//       call: (input) => Output.text(input.text.toUpperCase()),
//     });
//
// The SDK never decides what a tool may touch: the host mounts what the
// operator granted, within what the tool asked for.

import * as host from "airlock:tool/host@0.1.0";

/** The safety flags, by their WIT names. */
export const FLAGS = [
  "read-only", "concurrency-safe", "destructive", "idempotent", "open-world",
  "search-or-read", "requires-user-interaction", "cancels-siblings-on-error",
];

const camel = (name) => name.replace(/-(\w)/g, (_, c) => c.toUpperCase());

function wireFlags(flags) {
  const unknown = flags.filter((f) => !FLAGS.includes(f));
  if (unknown.length) throw new Error(`unknown flags: ${unknown.join(", ")}`);
  return Object.fromEntries(FLAGS.map((f) => [camel(f), flags.includes(f)]));
}

/** A failed call: `kind` is a WIT tool-error case (`invalid-input`,
 * `not-found`, `permission-denied`, `conflict`, `cancelled`, `timeout`,
 * `failed`, or `io` with the errno name in `code`, as `FileError` from
 * `airlock-sdk/files` makes); write the message for the model. */
export class ToolError extends Error {
  constructor(kind, message) {
    super(message);
    this.kind = kind;
  }
}

/** A successful result, and the changes it asks of the agent's context. */
export class Output {
  constructor() {
    this.content = [];
    this.structured = undefined;
    this.changes = [];
  }
  static text(text) { return new Output().andText(text); }
  static json(value) {
    const out = new Output();
    out.content.push({ tag: "json", val: JSON.stringify(value) });
    return out;
  }
  andText(text) { this.content.push({ tag: "text", val: text }); return this; }
  withStructured(value) { this.structured = value; return this; }
  setCwd(path) { this.changes.push({ tag: "set-cwd", val: path }); return this; }
  setEnv(name, value) { this.changes.push({ tag: "set-env", val: { name, value } }); return this; }
  unsetEnv(name) { this.changes.push({ tag: "unset-env", val: name }); return this; }
  setState(key, value) { this.changes.push({ tag: "set-state", val: { key, value } }); return this; }
  recordFileRead(path) { this.changes.push({ tag: "record-file-read", val: path }); return this; }
}

function normalize(path) {
  const parts = [];
  for (const part of path.split("/")) {
    if (part === "" || part === ".") continue;
    if (part === "..") parts.pop();
    else parts.push(part);
  }
  return "/" + parts.join("/");
}

/** What a call knows about the agent it serves. */
export class Context {
  constructor(cx) {
    this.cwd = cx.cwd;
    this.toolUseId = cx.toolUseId;
    this.agentId = cx.agentId;
    this.mounts = cx.mounts.map((m) => ({ path: m.path, writable: m.writable }));
    this.state = Object.fromEntries(cx.state.map((s) => [s.key, s.value]));
  }
  /** `path` (absolute, or relative to the cwd) normalised, inside a mount;
   * a `permission-denied` error naming the reachable directories if not. */
  resolve(path) {
    const joined = normalize(path.startsWith("/") ? path : `${this.cwd}/${path}`);
    if (!this.mountOf(joined)) {
      const reachable = this.mounts.map((m) => m.path).join(", ") || "none";
      throw new ToolError("permission-denied",
        `${path} is outside the directories this tool can reach (${reachable})`);
    }
    return joined;
  }
  mountOf(path) {
    return this.mounts
      .filter((m) => path === m.path || path.startsWith(m.path.replace(/\/$/, "") + "/"))
      .sort((a, b) => b.path.length - a.path.length)[0];
  }
  progress(message, fraction) { host.progress(message, fraction); }
  log(level, message) { host.log(level, message); }
  cancelled() { return host.cancelled(); }
}

function wireError(e) {
  if (e instanceof ToolError && e.kind === "io") {
    return { tag: "io", val: { code: e.code ?? "EIO", message: e.message } };
  }
  if (e instanceof ToolError) return { tag: e.kind, val: e.message };
  return { tag: "failed", val: `${e?.name ?? "Error"}: ${e?.message ?? String(e)}` };
}

function wireOutput(out) {
  if (typeof out === "string") out = Output.text(out);
  return {
    content: out.content,
    structured: out.structured === undefined ? undefined : JSON.stringify(out.structured),
    messages: [],
    changes: out.changes,
    metadata: undefined,
  };
}

/** Declares a tool and returns the `tool` export. `flags` are honest
 * claims the host enforces; `workspace` (`none`, `read`, `read-write`),
 * `network` (host patterns) and `env` (names) are what it asks for.
 * `validate(input, cx)` returns an error message or nothing; `classify(input)`
 * returns the flags of one input or nothing. */
export function defineTool(spec) {
  for (const field of ["name", "description", "inputSchema", "call"]) {
    if (spec[field] === undefined) throw new Error(`defineTool: ${field} is required`);
  }
  const parse = (input) => {
    try {
      return JSON.parse(input);
    } catch (e) {
      throw { tag: "invalid-input", val: `the input is not JSON: ${e.message}` };
    }
  };
  return {
    describe() {
      return {
        name: spec.name,
        aliases: spec.aliases ?? [],
        title: spec.title ?? spec.name,
        description: spec.description,
        prompt: spec.prompt ?? spec.description,
        inputSchema: JSON.stringify(spec.inputSchema),
        outputSchema: spec.outputSchema === undefined ? undefined : JSON.stringify(spec.outputSchema),
        safety: wireFlags(spec.flags ?? []),
        interrupt: spec.interrupt ?? "cancel",
        preflight: { classify: !!spec.classify, validate: !!spec.validate, checkPermissions: false },
        deferLoading: false,
        maxResultSize: spec.maxResultSize ?? 50000,
        capabilities: {
          workspace: spec.workspace ?? "none",
          networkHosts: spec.network ?? [],
          envVars: spec.env ?? [],
        },
        version: spec.version ?? "0.1.0",
      };
    },
    classify(input) {
      if (!spec.classify) return undefined;
      const flags = spec.classify(parse(input));
      return flags ? wireFlags(flags) : undefined;
    },
    validate(input, cx) {
      if (!spec.validate) return undefined;
      const message = spec.validate(parse(input), new Context(cx));
      if (message) throw message;
      return undefined;
    },
    checkPermissions() {
      return { tag: "passthrough" };
    },
    call(input, cx) {
      const value = parse(input);
      const context = new Context(cx);
      try {
        const message = spec.validate?.(value, context);
        if (message) throw new ToolError("invalid-input", message);
        return wireOutput(spec.call(value, context));
      } catch (e) {
        throw wireError(e);
      }
    },
  };
}
