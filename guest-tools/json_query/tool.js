// `json_query`: a JMESPath query over a JSON (or JSON Lines) file in the
// workspace, so an agent reads the part of a large document it needs
// instead of the whole file. Built with `airlock build` (jco) by
// `just build-guests`; read-only, so its calls get read-only handles.

import jmespath from "jmespath";
import { defineTool, Output, ToolError } from "airlock-sdk";
import { readText } from "airlock-sdk/files";

/** The document in `text`: JSON, or one JSON value per line (an array)
 * when the file is JSON Lines. */
function parse(text, path) {
  const lines = /\.(jsonl|ndjson)$/i.test(path);
  try {
    if (!lines) return JSON.parse(text);
    return text.split("\n").filter((line) => line.trim() !== "").map((line) => JSON.parse(line));
  } catch (e) {
    throw new ToolError("invalid-input", `${path} is not ${lines ? "JSON Lines" : "JSON"}: ${e.message}`);
  }
}

export const tool = defineTool({
  name: "json_query",
  description: "Queries a JSON file with a JMESPath expression.",
  prompt:
    "Evaluates the JMESPath expression `query` over the JSON file at `file_path` " +
    "(absolute, or relative to the cwd; a .jsonl or .ndjson file is read as an array " +
    "of its lines) and returns the result as indented JSON. Use it to read one part " +
    "of a large JSON document: `dependencies | keys(@)`, `items[?status=='failed'].name`, " +
    "`length(items)`. `@` returns the whole document.",
  flags: ["read-only", "concurrency-safe", "idempotent", "search-or-read"],
  workspace: "read",
  inputSchema: {
    type: "object",
    properties: {
      file_path: { type: "string", description: "The JSON file: absolute, or relative to the cwd." },
      query: { type: "string", description: "A JMESPath expression (https://jmespath.org)." },
    },
    required: ["file_path", "query"],
    additionalProperties: false,
  },
  validate(input) {
    try {
      jmespath.compile(input.query);
    } catch (e) {
      return `the query does not parse: ${e.message}`;
    }
  },
  call(input, cx) {
    const path = cx.resolve(input.file_path);
    const document = parse(readText(path), input.file_path);
    const result = jmespath.search(document, input.query);
    return Output.text(JSON.stringify(result, null, 2) ?? "null");
  },
});
