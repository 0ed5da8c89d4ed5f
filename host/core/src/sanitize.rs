//! Cleaning guest-controlled text before it reaches a model, a log or a
//! terminal, and capping its length. Text is cleaned once, where it enters
//! the host (a guest's descriptor and output in `engine::bindings`, its log
//! lines in `engine::state`, an MCP server's tools and results in
//! `mcp_client`); JSON is cleaned string by string, keys included.
//!
//! What is removed is a set of Unicode classes, not a list of characters:
//! every control character (`Cc`, C0 and C1: ANSI CSI sequences go whole,
//! other escape sequences lose their `ESC` and become inert), every format
//! character (`Cf`: bidirectional marks, embeddings, overrides and
//! isolates, zero-width characters, the soft hyphen, the BOM, tag
//! characters), the line and paragraph separators (`Zl`, `Zp`) and every
//! other default-ignorable code point (variation selectors, Mongolian free
//! variation selectors, Hangul fillers, the combining grapheme joiner,
//! the tag block): the "Trojan Source" and invisible prompt-injection
//! tricks.
//!
//! Exceptions: `\t` and `\n` survive in text bodies; `\r` survives only in
//! text for a model and only before `\n` (files with CRLF line endings must
//! still match on edit); one-line text keeps no line break at all, and a
//! log line shows a newline as a literal `\n`. The zero-width joiner and
//! non-joiner survive only alone between two visible non-ASCII characters
//! (emoji sequences, Persian and Indic spelling), never beside ASCII,
//! whitespace or each other.

use crate::descriptor::Descriptor;
use serde_json::Value;
use std::borrow::Cow;
use unicode_general_category::{GeneralCategory, get_general_category};

/// Where cleaned text goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sink {
    /// A model: keeps `\t`, `\n`, and `\r` before `\n`.
    Model,
    /// A terminal: keeps `\t` and `\n`.
    Terminal,
    /// One line of a table or a field: keeps nothing but printable text.
    Line,
    /// One log line: keeps `\t`; a newline becomes the two characters `\n`.
    Log,
}

/// Text cleaned for a sink, and how many characters were removed.
#[derive(Debug, PartialEq, Eq)]
pub struct Cleaned<'a> {
    /// The cleaned text.
    pub text: Cow<'a, str>,
    /// How many characters were removed.
    pub removed: usize,
}

/// Whether `c` is removed from every sink (tab, newline and carriage
/// return aside, which depend on the sink, and the joiners, which depend
/// on their neighbours): a control, a format character, a line or
/// paragraph separator, or another default-ignorable code point.
fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(
            get_general_category(c),
            GeneralCategory::Format
                | GeneralCategory::LineSeparator
                | GeneralCategory::ParagraphSeparator
        )
        || is_ignorable_non_format(c)
}

/// The default-ignorable code points (Unicode's derived property
/// `Default_Ignorable_Code_Point`) that are not format characters: the
/// combining grapheme joiner, the Hangul fillers, the Khmer inherent
/// vowels, the Mongolian free variation selectors, the variation
/// selectors, the reserved U+2065 and U+FFF0..U+FFF8, and the whole tag
/// and variation-selector supplement block U+E0000..U+E0FFF.
fn is_ignorable_non_format(c: char) -> bool {
    matches!(c,
        '\u{034F}'
        | '\u{115F}'..='\u{1160}'
        | '\u{17B4}'..='\u{17B5}'
        | '\u{180B}'..='\u{180F}'
        | '\u{2065}'
        | '\u{3164}'
        | '\u{FE00}'..='\u{FE0F}'
        | '\u{FFA0}'
        | '\u{FFF0}'..='\u{FFF8}'
        | '\u{E0000}'..='\u{E0FFF}')
}

/// What becomes of one character.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fate {
    Keep,
    Drop,
    /// Replaced by this text.
    Escape(&'static str),
    /// A carriage return: kept before `\n` in text for a model.
    Return,
    /// A zero-width joiner or non-joiner: kept between two joinable
    /// characters.
    Joiner,
}

fn fate(c: char, sink: Sink) -> Fate {
    match (c, sink) {
        ('\t', Sink::Line) | ('\n', Sink::Line) => Fate::Drop,
        ('\t', _) => Fate::Keep,
        ('\n', Sink::Log) => Fate::Escape("\\n"),
        ('\n', _) => Fate::Keep,
        ('\r', Sink::Model) => Fate::Return,
        ('\u{200C}' | '\u{200D}', _) => Fate::Joiner,
        (c, _) if is_unsafe(c) => Fate::Drop,
        _ => Fate::Keep,
    }
}

/// Whether a joiner may stand next to `c`: a visible non-ASCII character.
fn joinable(c: char) -> bool {
    !c.is_ascii() && !c.is_whitespace() && !is_unsafe(c) && !matches!(c, '\u{200C}' | '\u{200D}')
}

/// Cleans `text` for `sink`. ANSI CSI sequences (`ESC [ ... final`) are
/// removed whole; other escape sequences lose their `ESC` and become inert.
pub fn clean(text: &str, sink: Sink) -> Cleaned<'_> {
    if text.chars().all(|c| fate(c, sink) == Fate::Keep) {
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
            continue;
        }
        let keep = match fate(c, sink) {
            Fate::Keep => true,
            Fate::Drop => false,
            Fate::Escape(escaped) => {
                out.push_str(escaped);
                continue;
            }
            Fate::Return => chars.peek() == Some(&'\n'),
            Fate::Joiner => {
                out.chars().next_back().is_some_and(joinable)
                    && chars.peek().copied().is_some_and(joinable)
            }
        };
        if keep {
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

/// Cleans `text` for `sink` in place; returns how many characters were
/// removed.
pub fn clean_in_place(text: &mut String, sink: Sink) -> usize {
    let Cleaned {
        text: cleaned,
        removed,
    } = clean(text, sink);
    if let Cow::Owned(cleaned) = cleaned {
        *text = cleaned;
    }
    removed
}

/// Cleans every string in `value` in place, walking it without recursion:
/// object keys as one line ([`Sink::Line`]; of keys that clean to the same
/// text, the last in order wins), string values as text for a model
/// ([`Sink::Model`]). Returns how many characters were removed.
pub fn clean_json(value: &mut Value) -> usize {
    let mut removed = 0;
    let mut stack = vec![value];
    while let Some(value) = stack.pop() {
        match value {
            Value::String(text) => removed += clean_in_place(text, Sink::Model),
            Value::Array(items) => stack.extend(items.iter_mut()),
            Value::Object(map) => {
                if map
                    .keys()
                    .any(|k| k.chars().any(|c| fate(c, Sink::Line) != Fate::Keep))
                {
                    for (mut key, item) in std::mem::take(map) {
                        removed += clean_in_place(&mut key, Sink::Line);
                        map.insert(key, item);
                    }
                }
                stack.extend(map.values_mut());
            }
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }
    removed
}

/// Cleans a tool's descriptor in place: the title and version as one line,
/// the description and prompt as text for a model, and every string in
/// its schemas ([`clean_json`]). Names, aliases, hosts and variable names
/// are checked by [`Descriptor::problems`], not cleaned: a cleaned name
/// would differ from the one the tool answers to.
pub fn clean_descriptor(d: &mut Descriptor) {
    clean_in_place(&mut d.title, Sink::Line);
    clean_in_place(&mut d.version, Sink::Line);
    clean_in_place(&mut d.description, Sink::Model);
    clean_in_place(&mut d.prompt, Sink::Model);
    clean_json(&mut d.input_schema);
    if let Some(schema) = &mut d.output_schema {
        clean_json(schema);
    }
}

/// Cleans `text` for `sink` and caps it at `max_chars` characters, saying
/// what was cut.
pub fn clean_capped(text: &str, sink: Sink, max_chars: usize) -> String {
    let cleaned = clean(text, sink).text;
    cap(&cleaned, max_chars)
}

/// Caps `text` at `max_chars` characters, saying how many were cut. A
/// carriage return whose newline is cut goes too, so it cannot stand alone.
pub fn cap(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        None => text.to_string(),
        Some((byte, _)) => {
            let head = text[..byte].strip_suffix('\r').unwrap_or(&text[..byte]);
            let cut = text[head.len()..].chars().count();
            format!("{head}… [{cut} more characters cut]")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

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
        assert_eq!(
            clean("paid\rPAID", Sink::Model).text,
            "paidPAID",
            "a lone carriage return would overwrite the line on a terminal"
        );
    }

    #[test]
    fn joiners_used_by_scripts_and_emoji_survive() {
        let family = "👩\u{200D}👩\u{200D}👧 می\u{200C}خواهم";
        assert_eq!(clean(family, Sink::Model).text, family);
        assert_eq!(clean(family, Sink::Line).text, family);
    }

    #[test]
    fn caps_count_characters_not_bytes() {
        assert_eq!(cap("ééé", 3), "ééé");
        assert_eq!(cap("éééé", 2), "éé… [2 more characters cut]");
        assert_eq!(
            clean_capped("\u{1b}[1mabcdef", Sink::Line, 3),
            "abc… [3 more characters cut]"
        );
        assert_eq!(
            clean_capped("ab\r\ncd", Sink::Model, 3),
            "ab… [4 more characters cut]",
            "a carriage return is not left without its newline"
        );
    }

    #[test]
    fn joiners_hiding_between_ascii_or_in_runs_are_removed() {
        let c = clean(
            "a\u{200D}b\u{200C}c é\u{200D}\u{200D}é \u{200C}é",
            Sink::Model,
        );
        assert_eq!(c.text, "abc é\u{200D}é é");
        assert_eq!(c.removed, 4);
    }

    #[test]
    fn the_reported_invisibles_are_removed() {
        let dirty = "a\u{2060}b\u{180E}c\u{00AD}d\u{061C}e\u{2028}f\u{2029}g\u{FE0F}h\
                     \u{E0101}i\u{180B}j\u{85}k\u{9B}l\u{7F}m\u{3164}n\u{034F}o";
        let c = clean(dirty, Sink::Model);
        assert_eq!(c.text, "abcdefghijklmno");
        assert_eq!(c.removed, 14);
    }

    #[test]
    fn log_lines_cannot_forge_a_new_line() {
        let c = clean(
            "done\n2026-01-01T00:00:00Z ERROR forged\r\u{2028}x\ty",
            Sink::Log,
        );
        assert_eq!(c.text, "done\\n2026-01-01T00:00:00Z ERROR forgedx\ty");
        assert_eq!(c.removed, 2);
        assert!(!c.text.contains('\n'));
    }

    #[test]
    fn json_keys_and_strings_are_cleaned_at_every_depth() {
        let mut v = json!({
            "type": "object",
            "properties": {"pa\u{1b}[2Jth\u{E0041}": {
                "description": "line one\nline\u{202E} two\u{7}",
                "pattern": "^a\\n\u{0}b$",
                "enum": ["x\u{2060}", 1, null, [true, "\u{FEFF}y"]]
            }},
            "k\ny": "v"
        });
        let removed = clean_json(&mut v);
        assert_eq!(
            v,
            json!({
                "type": "object",
                "properties": {"path": {
                    "description": "line one\nline two",
                    "pattern": "^a\\nb$",
                    "enum": ["x", 1, null, [true, "y"]]
                }},
                "ky": "v"
            })
        );
        assert_eq!(removed, 4 + 1 + 2 + 1 + 1 + 1 + 1);
    }

    #[test]
    fn descriptors_are_cleaned_field_by_field() {
        let mut d = Descriptor::new("t", "Reads\u{202E} files.\nCarefully.");
        d.title = "Read\nfiles\u{1b}[1m".into();
        d.prompt = "Use it\u{E0049}\u{E0047}.".into();
        d.version = "1.0\u{200B}".into();
        d.input_schema = json!({"type": "object", "description": "\u{7}x"});
        d.output_schema = Some(json!({"type": "object", "title": "y\u{2066}"}));
        clean_descriptor(&mut d);
        assert_eq!(d.title, "Readfiles");
        assert_eq!(d.description, "Reads files.\nCarefully.");
        assert_eq!(d.prompt, "Use it.");
        assert_eq!(d.version, "1.0");
        assert_eq!(d.input_schema["description"], "x");
        assert_eq!(d.output_schema.unwrap()["title"], "y");
    }

    /// Every format character (`Cf`) of Unicode 16.0, from its
    /// `UnicodeData.txt`: the crate's table must agree, so that no format
    /// character slips through and no other character is taken for one.
    #[test]
    fn the_format_table_is_unicode_16s() {
        const CF: &[(u32, u32)] = &[
            (0x00AD, 0x00AD),
            (0x0600, 0x0605),
            (0x061C, 0x061C),
            (0x06DD, 0x06DD),
            (0x070F, 0x070F),
            (0x0890, 0x0891),
            (0x08E2, 0x08E2),
            (0x180E, 0x180E),
            (0x200B, 0x200F),
            (0x202A, 0x202E),
            (0x2060, 0x2064),
            (0x2066, 0x206F),
            (0xFEFF, 0xFEFF),
            (0xFFF9, 0xFFFB),
            (0x110BD, 0x110BD),
            (0x110CD, 0x110CD),
            (0x13430, 0x1343F),
            (0x1BCA0, 0x1BCA3),
            (0x1D173, 0x1D17A),
            (0xE0001, 0xE0001),
            (0xE0020, 0xE007F),
        ];
        let listed = |c: u32| CF.iter().any(|&(lo, hi)| (lo..=hi).contains(&c));
        let mut count = 0;
        for c in (0..=0x10FFFF).filter_map(char::from_u32) {
            let format = get_general_category(c) == GeneralCategory::Format;
            assert_eq!(format, listed(c as u32), "U+{:04X}", c as u32);
            count += usize::from(format);
            if format && !matches!(c, '\u{200C}' | '\u{200D}') {
                assert_eq!(fate(c, Sink::Model), Fate::Drop, "U+{:04X}", c as u32);
            }
        }
        assert_eq!(count, 170);
    }

    /// The classes the cleaning must remove, stated apart from the code
    /// that removes them: C0 and C1 controls, format characters, line and
    /// paragraph separators, tags, variation selectors (standard,
    /// supplement, Mongolian), and the other default-ignorables.
    fn forbidden(c: char) -> bool {
        let cp = c as u32;
        (cp < 0x20 || (0x7F..=0x9F).contains(&cp))
            || matches!(
                get_general_category(c),
                GeneralCategory::Format
                    | GeneralCategory::LineSeparator
                    | GeneralCategory::ParagraphSeparator
            )
            || (0xE0000..=0xE007F).contains(&cp)
            || (0xFE00..=0xFE0F).contains(&cp)
            || (0xE0100..=0xE01EF).contains(&cp)
            || (0x180B..=0x180F).contains(&cp)
            || matches!(
                cp,
                0x034F | 0x115F | 0x1160 | 0x17B4 | 0x17B5 | 0x3164 | 0xFFA0
            )
    }

    /// Fails with the offending character when `text` holds anything
    /// `sink` must not receive.
    fn assert_clean(text: &str, sink: Sink) {
        let chars: Vec<char> = text.chars().collect();
        for (i, &c) in chars.iter().enumerate() {
            let allowed = match c {
                '\t' => sink != Sink::Line,
                '\n' => matches!(sink, Sink::Model | Sink::Terminal),
                '\r' => sink == Sink::Model && chars.get(i + 1) == Some(&'\n'),
                '\u{200C}' | '\u{200D}' => {
                    let visible = |c: Option<&char>| {
                        c.is_some_and(|&c| !c.is_ascii() && !c.is_whitespace() && !forbidden(c))
                    };
                    i > 0 && visible(chars.get(i - 1)) && visible(chars.get(i + 1))
                }
                c => !forbidden(c),
            };
            assert!(
                allowed,
                "U+{:04X} at {i} for {sink:?} in {text:?}",
                c as u32
            );
        }
    }

    /// Characters from every class, weighted towards the dangerous ones,
    /// with letters (ASCII and not) and `[` to give escapes and joiners
    /// their contexts.
    fn dirty_char() -> impl Strategy<Value = char> {
        static FORMAT: std::sync::LazyLock<Vec<char>> = std::sync::LazyLock::new(|| {
            (0..=0x10FFFF)
                .filter_map(char::from_u32)
                .filter(|&c| get_general_category(c) == GeneralCategory::Format)
                .collect()
        });
        let format = FORMAT.clone();
        prop_oneof![
            3 => prop::char::range('\0', '\u{1F}'),
            2 => prop::char::range('\u{7F}', '\u{9F}'),
            3 => prop::sample::select(format),
            2 => prop::char::range('\u{E0000}', '\u{E007F}'),
            1 => prop::char::range('\u{FE00}', '\u{FE0F}'),
            1 => prop::char::range('\u{E0100}', '\u{E01EF}'),
            1 => prop::char::range('\u{180B}', '\u{180F}'),
            2 => prop::sample::select(vec![
                '\u{2028}', '\u{2029}', '\u{200C}', '\u{200D}', '\u{3164}', '\u{034F}', '\u{1b}',
                '[', '\r', '\n', '\t', ' ',
            ]),
            3 => prop::char::range('a', 'z'),
            3 => prop::sample::select(vec!['é', 'ж', 'م', 'क', '👩', '😀', '中', '€']),
            2 => any::<char>(),
        ]
    }

    fn dirty_string() -> impl Strategy<Value = String> {
        prop::collection::vec(dirty_char(), 0..40).prop_map(|v| v.into_iter().collect())
    }

    fn dirty_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            dirty_string().prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::btree_map(dirty_string(), inner, 0..6)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn no_sink_receives_a_forbidden_character(text in dirty_string()) {
            for sink in [Sink::Model, Sink::Terminal, Sink::Line, Sink::Log] {
                let once = clean(&text, sink).text.into_owned();
                assert_clean(&once, sink);
                assert_clean(&clean_capped(&text, sink, 7), sink);
                prop_assert_eq!(&clean(&once, sink).text, &once, "cleaning is idempotent");
            }
        }

        #[test]
        fn no_json_string_or_key_keeps_a_forbidden_character(mut value in dirty_json()) {
            clean_json(&mut value);
            let mut stack = vec![&value];
            while let Some(v) = stack.pop() {
                match v {
                    Value::String(s) => assert_clean(s, Sink::Model),
                    Value::Array(items) => stack.extend(items),
                    Value::Object(map) => {
                        for (key, item) in map {
                            assert_clean(key, Sink::Line);
                            stack.push(item);
                        }
                    }
                    _ => {}
                }
            }
        }
    }
}
