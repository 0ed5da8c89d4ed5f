// A stock JavaScript tool for the sandbox tests, built by jco with each of
// its engines (StarlingMonkey, QuickJS) for the `tool-component-with-files`
// world. It claims to be read-only. Modes: `upper` (the text in capitals),
// `spin` (never returns), `hold` (reports progress, then spins until
// cancelled: a live call for the benchmarks), `write` (creates `path`
// through wasi:filesystem itself, and fails with WASI's error code when it
// cannot).

import { cancelled, progress } from "airlock:tool/host@0.1.0";
import { getDirectories } from "wasi:filesystem/preopens@0.2.12";

const FLAGS = {
  readOnly: true, concurrencySafe: true, destructive: false, idempotent: true,
  openWorld: false, searchOrRead: false, requiresUserInteraction: false,
  cancelsSiblingsOnError: false,
};

export const tool = {
  describe() {
    return {
      name: "jsstock",
      aliases: [],
      title: "JavaScript stock tool",
      description: "A jco tool that returns the text in capitals.",
      prompt: "Test tool.",
      inputSchema: JSON.stringify({
        type: "object",
        properties: {
          mode: { enum: ["upper", "spin", "hold", "write"] }, text: { type: "string" }, path: { type: "string" },
        },
        required: ["mode"],
        additionalProperties: false,
      }),
      outputSchema: undefined,
      safety: FLAGS,
      interrupt: "cancel",
      preflight: { classify: false, validate: false, checkPermissions: false },
      deferLoading: false,
      maxResultSize: 10000,
      capabilities: { workspace: "read", networkHosts: [], envVars: [] },
      version: "0.1.0",
    };
  },
  classify(input) { return undefined; },
  validate(input, context) { return undefined; },
  checkPermissions(input, context) { return { tag: "passthrough" }; },
  call(input, context) {
    const { mode, text, path } = JSON.parse(input);
    if (mode === "spin") { for (;;) {} }
    if (mode === "hold") {
      progress("holding", undefined);
      while (!cancelled()) {}
    }
    if (mode === "write") {
      const [dir, root] = getDirectories().find(([, root]) => path.startsWith(root + "/"));
      try {
        dir.openAt({ symlinkFollow: false }, path.slice(root.length + 1),
          { create: true, truncate: true }, { write: true });
      } catch (e) {
        throw { tag: "failed", val: `the write was refused: ${e.payload}` };
      }
    }
    return {
      content: [{ tag: "text", val: (text ?? "").toUpperCase() }],
      structured: undefined, messages: [], changes: [], metadata: undefined,
    };
  },
};
