// Files for JavaScript tools: StarlingMonkey and QuickJS have no file API
// over WASI, so this module opens files through `wasi:filesystem` itself,
// in the directories the operator granted to the call (the preopens). Build
// with the `tool-component-with-files` world (`airlock build` does).
//
//     import { readText } from "airlock-sdk/files";
//     const text = readText(cx.resolve(input.path));
//
// Paths are absolute (what `Context.resolve` returns). A failure is a
// `ToolError` of kind `io` with the errno name, or `permission-denied` for
// a path outside every granted directory.

import { getDirectories } from "wasi:filesystem/preopens@0.2.12";
import { ToolError } from "./index.js";

/** WASI's error codes as errno names, with the text the model reads. */
const ERRNO = {
  "access": ["EACCES", "Permission denied"],
  "already": ["EALREADY", "Operation already in progress"],
  "bad-descriptor": ["EBADF", "Bad file descriptor"],
  "busy": ["EBUSY", "Device or resource busy"],
  "exist": ["EEXIST", "File exists"],
  "file-too-large": ["EFBIG", "File too large"],
  "insufficient-space": ["ENOSPC", "No space left on device"],
  "invalid": ["EINVAL", "Invalid argument"],
  "io": ["EIO", "Input/output error"],
  "is-directory": ["EISDIR", "Is a directory"],
  "loop": ["ELOOP", "Too many levels of symbolic links"],
  "name-too-long": ["ENAMETOOLONG", "File name too long"],
  "no-entry": ["ENOENT", "No such file or directory"],
  "not-directory": ["ENOTDIR", "Not a directory"],
  "not-empty": ["ENOTEMPTY", "Directory not empty"],
  "not-permitted": ["EPERM", "Operation not permitted"],
  "read-only": ["EROFS", "Read-only file system"],
};

/** A file operation that failed: `code` is the errno name (`ENOENT`...). */
export class FileError extends ToolError {
  constructor(code, message) {
    super("io", message);
    this.code = code;
  }
}

function fileError(e, path) {
  const [code, text] = ERRNO[e?.payload] ?? ["EIO", String(e?.payload ?? e?.message ?? e)];
  return new FileError(code, `${path}: ${text}`);
}

/** The granted directory holding `path`, and `path` relative to it. */
function locate(path) {
  const inside = getDirectories()
    .filter(([, root]) => path === root || path.startsWith(root.replace(/\/$/, "") + "/"))
    .sort((a, b) => b[1].length - a[1].length);
  if (inside.length === 0) {
    throw new ToolError("permission-denied",
      `${path} is outside the directories this call can reach`);
  }
  const [dir, root] = inside[0];
  return [dir, path.slice(root.length).replace(/^\/+/, "") || "."];
}

function open(path, openFlags, flags) {
  const [dir, relative] = locate(path);
  try {
    return dir.openAt({ symlinkFollow: true }, relative, openFlags, flags);
  } catch (e) {
    throw fileError(e, path);
  }
}

/** The bytes of the file at `path`; more than `limit` bytes is an `EFBIG`
 * error naming the size. */
export function readBytes(path, limit = 64 * 1024 * 1024) {
  const file = open(path, {}, { read: true });
  try {
    const size = Number(file.stat().size);
    if (size > limit) {
      throw new FileError("EFBIG", `${path}: ${size} bytes, over the ${limit} bytes this tool reads`);
    }
    const bytes = new Uint8Array(size);
    let at = 0;
    while (at < size) {
      const [chunk, end] = file.read(BigInt(Math.min(size - at, 1 << 20)), BigInt(at));
      bytes.set(chunk, at);
      at += chunk.length;
      if (end || chunk.length === 0) break;
    }
    return bytes.subarray(0, at);
  } catch (e) {
    throw e instanceof ToolError ? e : fileError(e, path);
  }
}

/** The file at `path` as UTF-8 text. */
export function readText(path, limit) {
  return new TextDecoder().decode(readBytes(path, limit));
}

/** Replaces (or creates) the file at `path` with `text` as UTF-8. */
export function writeText(path, text) {
  const file = open(path, { create: true, truncate: true }, { write: true });
  const bytes = new TextEncoder().encode(text);
  try {
    let at = 0;
    while (at < bytes.length) {
      at += Number(file.write(bytes.subarray(at), BigInt(at)));
    }
  } catch (e) {
    throw fileError(e, path);
  }
}
