//! Cleaning guest-controlled text before it reaches a model, a log or a
//! terminal: control characters, ANSI escape sequences, bidirectional
//! overrides and invisible characters (the "Trojan Source" and invisible
//! prompt-injection tricks) are removed, and lengths are capped.
//!
//! Tabs and newlines survive everywhere; carriage returns survive only in
//! text for a model (files with CRLF line endings must still match on edit).

use std::borrow::Cow;

/// Where cleaned text goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sink {
    /// A model: keeps `\t`, `\n` and `\r`.
    Model,
    /// A terminal or a log: keeps `\t` and `\n`.
    Terminal,
    /// One line of a table or log field: keeps nothing but printable text.
    Line,
}

/// Text cleaned for a sink, and how many characters were removed.
#[derive(Debug, PartialEq, Eq)]
pub struct Cleaned<'a> {
    /// The cleaned text.
    pub text: Cow<'a, str>,
    /// How many characters were removed.
    pub removed: usize,
}

/// Whether `c` is an invisible or direction-changing format character that
/// has no place in tool output: zero-width space, LRM/RLM, the bidi
/// embeddings, overrides and isolates, the BOM, and the tag characters.
fn is_invisible(c: char) -> bool {
    matches!(c,
        '\u{200B}' | '\u{200E}' | '\u{200F}'
        | '\u{202A}'..='\u{202E}'
        | '\u{2066}'..='\u{2069}'
        | '\u{FEFF}'
        | '\u{E0000}'..='\u{E007F}')
}

fn keeps(c: char, sink: Sink) -> bool {
    match c {
        '\t' => sink != Sink::Line,
        '\n' => sink != Sink::Line,
        '\r' => sink == Sink::Model,
        c if c.is_control() => false,
        c => !is_invisible(c),
    }
}

/// Cleans `text` for `sink`. ANSI CSI sequences (`ESC [ ... final`) are
/// removed whole; other escape sequences lose their `ESC` and become inert.
pub fn clean(text: &str, sink: Sink) -> Cleaned<'_> {
    if text.chars().all(|c| keeps(c, sink)) {
        return Cleaned {
            text: Cow::Borrowed(text),
            removed: 0,
        };
    }
    let mut out = String::with_capacity(text.len());
    let mut removed = 0;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' && chars.peek() == Some(&'[') {
            // CSI: ESC [ parameters/intermediates, then a final byte @..~.
            removed += 2;
            chars.next();
            for c in chars.by_ref() {
                removed += 1;
                if ('\u{40}'..='\u{7e}').contains(&c) {
                    break;
                }
            }
        } else if keeps(c, sink) {
            out.push(c);
        } else {
            removed += 1;
        }
    }
    Cleaned {
        text: Cow::Owned(out),
        removed,
    }
}

/// Cleans `text` for `sink` and caps it at `max_chars` characters, saying
/// what was cut.
pub fn clean_capped(text: &str, sink: Sink, max_chars: usize) -> String {
    let cleaned = clean(text, sink).text;
    cap(&cleaned, max_chars)
}

/// Caps `text` at `max_chars` characters, saying how many were cut.
pub fn cap(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        None => text.to_string(),
        Some((byte, _)) => {
            let cut = text[byte..].chars().count();
            format!("{}… [{cut} more characters cut]", &text[..byte])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_borrowed() {
        let c = clean("hello\tworld\n", Sink::Terminal);
        assert!(matches!(c.text, Cow::Borrowed(_)));
        assert_eq!(c.removed, 0);
    }

    #[test]
    fn strips_ansi_controls_and_invisibles() {
        let c = clean(
            "\u{1b}[31mred\u{1b}[0m\u{7}bell\u{202E}evil\u{E0041}\u{200B}",
            Sink::Model,
        );
        assert_eq!(c.text, "redbellevil");
        assert_eq!(c.removed, 2 + 3 + 2 + 2 + 4);
    }

    #[test]
    fn other_escapes_become_inert() {
        // OSC 0 (set the window title) loses its ESC and its BEL.
        let c = clean("\u{1b}]0;pwned\u{7}ok", Sink::Terminal);
        assert_eq!(c.text, "]0;pwnedok");
    }

    #[test]
    fn carriage_returns_survive_only_for_models() {
        assert_eq!(clean("a\r\nb", Sink::Model).text, "a\r\nb");
        assert_eq!(clean("a\r\nb", Sink::Terminal).text, "a\nb");
        assert_eq!(clean("a\r\n\tb", Sink::Line).text, "ab");
    }

    #[test]
    fn joiners_used_by_scripts_and_emoji_survive() {
        let family = "👩\u{200D}👩\u{200D}👧 می\u{200C}خواهم";
        assert_eq!(clean(family, Sink::Model).text, family);
    }

    #[test]
    fn caps_count_characters_not_bytes() {
        assert_eq!(cap("ééé", 3), "ééé");
        assert_eq!(cap("éééé", 2), "éé… [2 more characters cut]");
        assert_eq!(
            clean_capped("\u{1b}[1mabcdef", Sink::Line, 3),
            "abc… [3 more characters cut]"
        );
    }
}
