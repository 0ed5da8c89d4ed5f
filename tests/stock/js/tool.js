// A stock JavaScript tool for the sandbox tests, built by jco with each of
// its engines (StarlingMonkey, QuickJS). Modes: `upper` (the text in
// capitals), `spin` (never returns).

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
        properties: { mode: { enum: ["upper", "spin"] }, text: { type: "string" } },
        required: ["mode"],
        additionalProperties: false,
      }),
      outputSchema: undefined,
      safety: FLAGS,
      interrupt: "cancel",
      preflight: { classify: false, validate: false, checkPermissions: false },
      deferLoading: false,
      maxResultSize: 10000,
      capabilities: { workspace: "none", networkHosts: [], envVars: [] },
      version: "0.1.0",
    };
  },
  classify(input) { return undefined; },
  validate(input, context) { return undefined; },
  checkPermissions(input, context) { return { tag: "passthrough" }; },
  call(input, context) {
    const { mode, text } = JSON.parse(input);
    if (mode === "spin") { for (;;) {} }
    return {
      content: [{ tag: "text", val: (text ?? "").toUpperCase() }],
      structured: undefined, messages: [], changes: [], metadata: undefined,
    };
  },
};
