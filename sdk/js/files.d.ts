// Types of `airlock-sdk/files` (files.js): files through wasi:filesystem,
// in the directories granted to the call. Paths are absolute.

import { ToolError } from "./index.js";

/** A file operation that failed; `code` is the errno name (`ENOENT`...). */
export class FileError extends ToolError {
  constructor(code: string, message: string);
  code: string;
}

/** The bytes of the file at `path`; over `limit` (64 MiB) is `EFBIG`. */
export function readBytes(path: string, limit?: number): Uint8Array;

/** The file at `path` as UTF-8 text. */
export function readText(path: string, limit?: number): string;

/** Replaces (or creates) the file at `path` with `text` as UTF-8. */
export function writeText(path: string, text: string): void;
