// Merged into jco's Rolldown configuration by `airlock build`: the WIT
// imports (`airlock:tool/host`, `wasi:*`) are the component's imports, not
// modules to bundle.
export default {
  external: [/^airlock:/, /^wasi:/],
};
