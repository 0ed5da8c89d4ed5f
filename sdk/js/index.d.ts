// Types of the Airlock JavaScript SDK (index.js), for TypeScript and for
// editors checking JavaScript. The wire types are jco's bindings of the
// `airlock:tool` WIT world; these are the SDK's own, over them.

/** A safety flag, by its WIT name. */
export type Flag =
  | "read-only" | "concurrency-safe" | "destructive" | "idempotent" | "open-world"
  | "search-or-read" | "requires-user-interaction" | "cancels-siblings-on-error";

/** The safety flags, by their WIT names. */
export const FLAGS: readonly Flag[];

/** A WIT `tool-error` case. */
export type ErrorKind =
  | "invalid-input" | "not-found" | "permission-denied" | "conflict" | "io"
  | "cancelled" | "timeout" | "failed";

/** A failed call; write the message for the model. */
export class ToolError extends Error {
  constructor(kind: ErrorKind, message: string);
  kind: ErrorKind;
  /** The errno name, for kind `io`. */
  code?: string;
}

/** A successful result, and the changes it asks of the agent's context. */
export class Output {
  static text(text: string): Output;
  static json(value: unknown): Output;
  andText(text: string): this;
  /** Structured output: the whole result, matching `outputSchema`. */
  withStructured(value: unknown): this;
  setCwd(path: string): this;
  setEnv(name: string, value: string): this;
  unsetEnv(name: string): this;
  /** Kept for this tool's next calls (`Context.state`). */
  setState(key: string, value: string): this;
  recordFileRead(path: string): this;
}

/** A directory a call can reach, by its path inside the sandbox. */
export interface Mount {
  path: string;
  writable: boolean;
}

export type LogLevel = "trace" | "debug" | "info" | "warn" | "error";

/** What a call knows about the agent it serves. */
export class Context {
  readonly cwd: string;
  readonly toolUseId: string;
  readonly agentId?: string;
  readonly mounts: Mount[];
  readonly state: Record<string, string>;
  /** `path` (absolute, or relative to the cwd) normalised, inside a
   * mount; throws a `permission-denied` ToolError if it is outside them. */
  resolve(path: string): string;
  progress(message: string, fraction?: number): void;
  log(level: LogLevel, message: string): void;
  cancelled(): boolean;
}

/** What `defineTool` takes; `Input` is the type `inputSchema` describes. */
export interface ToolSpec<Input = any> {
  name: string;
  description: string;
  /** A JSON Schema object; the host checks every input against it. */
  inputSchema: object;
  call(input: Input, cx: Context): Output | string;
  title?: string;
  prompt?: string;
  aliases?: string[];
  flags?: Flag[];
  workspace?: "none" | "read" | "read-write";
  /** Host patterns the tool asks to reach. */
  network?: string[];
  /** Environment variable names the tool asks for. */
  env?: string[];
  interrupt?: "cancel" | "block";
  outputSchema?: object;
  maxResultSize?: number;
  version?: string;
  /** An error message for the model, or nothing; runs before the call is
   * allowed, with no filesystem. */
  validate?(input: Input, cx: Context): string | undefined | void;
  /** The flags of this input, or nothing for the declared ones. */
  classify?(input: Input): Flag[] | undefined | void;
}

/** Declares a tool; export the result as `tool`. */
export function defineTool<Input = any>(spec: ToolSpec<Input>): object;
