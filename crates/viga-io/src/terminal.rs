//! Text from outside (an object's name in a scene, a model's words, a program's output) as
//! it may be printed to a person's terminal. A control character in such text is an
//! instruction to the terminal: an escape sequence can move the cursor, rewrite earlier
//! lines, set the window title or, on some terminals, answer back into the shell; a
//! bidirectional override reorders what the eye reads. So every such character is shown as
//! its code (`\u{1b}`) instead, and line breaks and tabs stay.

use std::borrow::Cow;

/// `text` with every control character but line breaks and tabs, and every bidirectional
/// override, shown as `\u{..}`.
pub fn terminal_safe(text: &str) -> Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return Cow::Borrowed(text);
    }
    let mut shown = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if needs_escape(c) {
            shown.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        } else {
            shown.push(c);
        }
    }
    Cow::Owned(shown)
}

fn needs_escape(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_shown_as_codes_and_plain_text_is_kept() {
        assert!(matches!(terminal_safe("Cube.001 [MESH]"), Cow::Borrowed(_)));
        assert_eq!(
            terminal_safe("line one\n\tline two"),
            "line one\n\tline two"
        );
        assert_eq!(
            terminal_safe("Lamp\u{1b}]0;pwned\u{7}\u{1b}[2J"),
            "Lamp\\u{1b}]0;pwned\\u{7}\\u{1b}[2J"
        );
        assert_eq!(
            terminal_safe("a\rb\u{7f}c\u{9b}d"),
            "a\\u{d}b\\u{7f}c\\u{9b}d"
        );
        assert_eq!(terminal_safe("abc\u{202e}fed"), "abc\\u{202e}fed");
    }
}
