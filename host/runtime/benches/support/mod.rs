//! What several benches share: a generated text corpus.

/// Writes `files` files of `bytes` each of pseudo-random English-like text
/// (12 words a line) to `dir`, the same every time.
pub fn corpus(dir: &std::path::Path, files: usize, bytes: usize) {
    const WORDS: [&str; 16] = [
        "the",
        "agent",
        "calls",
        "a",
        "tool",
        "sandboxed",
        "running",
        "wasm",
        "parsed",
        "input",
        "host",
        "granted",
        "reading",
        "files",
        "stopped",
        "epoch",
    ];
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    for f in 0..files {
        let mut text = String::with_capacity(bytes + 64);
        let mut word = 0;
        while text.len() < bytes {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            text.push_str(WORDS[(state % 16) as usize]);
            word += 1;
            text.push(if word % 12 == 0 { '\n' } else { ' ' });
        }
        std::fs::write(dir.join(format!("part{f:02}.txt")), text).expect("the corpus is written");
    }
}
