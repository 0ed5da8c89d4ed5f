# Airlock's recipes. `just --list` shows them.

# Where `airlock` looks for tools by default (see `config::default_tool_dir`).
tools_dir := env_var_or_default("XDG_DATA_HOME", env_var("HOME") + "/.local/share") + "/airlock/tools"

# The guest build shares its target directory with the build scripts of
# `host` and `tests`, so nothing is compiled twice.
guest_target := "target/guests"

default:
    @just --list

# Build every tool in guest-tools/ (Rust to wasm32-wasip2, release, size-optimised; Python with componentize-py; JavaScript with jco) and install it where airlock finds it.
build-guests:
    #!/usr/bin/env bash
    set -euo pipefail
    packages=()
    for manifest in guest-tools/*/Cargo.toml; do
        packages+=(--package "$(sed -n 's/^name = "\(.*\)"$/\1/p' "$manifest" | head -n1)")
    done
    # The flags of the build scripts' guest build (`reproducible_flags` in
    # host/bundled/build/guests.rs), in its order, so the two share their
    # artifacts and build the same bytes.
    sysroot="$(rustc --print sysroot)"
    commit="$(rustc -vV | sed -n 's/^commit-hash: //p')"
    CARGO_ENCODED_RUSTFLAGS="$(printf '%s\x1f%s\x1f%s' \
            "-Ctarget-feature=+simd128" \
            "--remap-path-prefix=${CARGO_HOME:-$HOME/.cargo}=/cargo" \
            "--remap-path-prefix=$sysroot/lib/rustlib/src/rust=/rustc/$commit")" \
        CARGO_INCREMENTAL=0 cargo build --profile guest --target wasm32-wasip2 --target-dir {{guest_target}} "${packages[@]}"
    mkdir -p "{{tools_dir}}"
    for wasm in {{guest_target}}/wasm32-wasip2/guest/airlock_tool_*.wasm; do
        name="$(basename "$wasm")"
        cp "$wasm" "{{tools_dir}}/${name#airlock_tool_}"
    done
    echo "installed $(ls {{guest_target}}/wasm32-wasip2/guest/airlock_tool_*.wasm | wc -l) Rust tools in {{tools_dir}}"
    # The Python and JavaScript tools, built as a tool author builds one
    # (componentize-py and jco; `airlock build` names what is missing), by
    # the `airlock` binary in AIRLOCK when set (CI's, which `cargo test`
    # built: `cargo run -p airlock-cli` resolves that one package's
    # features and builds wasmtime again), else by `cargo run`.
    airlock() {
        if [ -n "${AIRLOCK:-}" ]; then "$AIRLOCK" "$@"; else cargo run -q -p airlock-cli -- "$@"; fi
    }
    for project in guest-tools/*/; do
        [ -f "$project/Cargo.toml" ] && continue
        airlock build "$project"
        airlock install "$project/$(basename "$project").wasm"
    done

# Run the test suites (the README's test command).
test:
    cargo test

# Run the demo on the bundled tools (the README's demo command).
demo:
    cargo run -p airlock-cli -- demo

# Formatting and lints, for the host and for the guests' own target.
lint:
    cargo fmt --all --check
    cargo clippy --workspace --all-targets -- -D warnings
    cargo clippy --profile guest --target wasm32-wasip2 --target-dir {{guest_target}} $(for m in guest-tools/*/Cargo.toml tests/guests/*/Cargo.toml; do echo --package $(sed -n 's/^name = "\(.*\)"$/\1/p' $m | head -n1); done) -- -D warnings

# Run every benchmark and write BENCHMARKS.md (needs python3; installs hyperfine, ripgrep and rust-src when missing); AIRLOCK_PEER_WASSETTE and AIRLOCK_PEER_WASSETTE_PLUGINS add Wassette side by side, AIRLOCK_PEER_HYPER_MCP hyper-mcp (BENCHMARKS.md says how).
bench:
    python3 scripts/bench.py

# Run each fuzz target for SECONDS (default 600); needs nightly and cargo-fuzz.
fuzz seconds="600":
    #!/usr/bin/env bash
    set -euo pipefail
    cargo build -p airlock-bundled --features bundled-tools   # builds the first-party guests into {{guest_target}}
    corpus=tests/fuzz/corpus
    mkdir -p $corpus/component_load $corpus/input_path
    # One run of a component takes seconds in the sanitized build, and
    # libFuzzer runs every seed before its time limit counts: a short run
    # (CI's 30 s) takes only the smallest few (all 26 took 191 s, the 24
    # under 2 MiB 158 s, the 4 smallest 37 s). A run of 600 s or more takes
    # them all.
    seeds=$(( {{seconds}} < 600 ? {{seconds}} / 10 + 1 : 1000 ))
    ls -1Sr {{guest_target}}/wasm32-wasip2/guest/*.wasm | head -n "$seeds" \
        | xargs -I{} cp {} $corpus/component_load/
    printf '\000{"file_path": "README.md", "offset": 2}' > $corpus/input_path/read
    printf '\001{"pattern": "fn (\\\\w+)", "output_mode": "content", "-C": 1}' > $corpus/input_path/grep
    printf '\002{"pattern": "**/*.rs"}' > $corpus/input_path/glob
    printf '\003{"path": "src"}' > $corpus/input_path/ls
    cd tests/fuzz
    cargo +nightly fuzz run input_path -- -max_total_time={{seconds}} -timeout=20
    cargo +nightly fuzz run component_load -- -max_total_time={{seconds}} -timeout=120 -rss_limit_mb=6144
