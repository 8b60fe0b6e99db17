//! RE2 (Latin-1 mode) patterns rewritten for `regex-automata` with Unicode off, so both
//! engines give a rule's pattern the same byte meaning.
//!
//! RE2 reads the pattern's UTF-8 bytes as Latin-1 characters, so a non-ASCII character is
//! a run of byte literals here (`\xC3\xB1` for `ñ`); `\s` is RE2's `[\t\n\f\r ]` (the
//! `regex` crate's takes `\v` too); a `[` inside a class is a literal in RE2 and a nested
//! class here, so it is escaped, as are `&&` and `~~` (set operators here). `(?i)` folds
//! ASCII only in both.
#![forbid(unsafe_code)]

use regex_automata::meta::{self, Regex};
use regex_automata::util::syntax;

const SPACE: &str = r"\t\n\x0C\r ";

/// The pattern with RE2's byte meaning in the `regex` crate's syntax.
pub fn translate(pattern: &str) -> String {
    let chars: Vec<char> = pattern.chars().collect();
    let mut out = String::with_capacity(pattern.len() + 16);
    let mut i = 0;
    let mut in_class = false;
    let mut class_start = 0usize; // index in `chars` just after `[` or `[^`
    while i < chars.len() {
        let c = chars[i];
        if c == '\\' && i + 1 < chars.len() {
            let n = chars[i + 1];
            match n {
                's' if in_class => out.push_str(SPACE),
                's' => {
                    out.push('[');
                    out.push_str(SPACE);
                    out.push(']');
                }
                'S' => {
                    out.push_str("[^");
                    out.push_str(SPACE);
                    out.push(']');
                }
                'C' => out.push_str(if in_class { r"\x00-\xFF" } else { r"(?s:.)" }),
                _ if !n.is_ascii() => push_bytes(&mut out, n),
                _ => {
                    out.push('\\');
                    out.push(n);
                }
            }
            i += 2;
            continue;
        }
        if !c.is_ascii() {
            push_bytes(&mut out, c);
            i += 1;
            continue;
        }
        if in_class {
            match c {
                ']' if i > class_start => {
                    in_class = false;
                    out.push(']');
                }
                '[' if chars.get(i + 1) == Some(&':') => {
                    // a POSIX class [:name:] copies through to its closing ":]"
                    let mut j = i + 2;
                    while j + 1 < chars.len() && !(chars[j] == ':' && chars[j + 1] == ']') {
                        j += 1;
                    }
                    let end = (j + 2).min(chars.len());
                    out.extend(&chars[i..end]);
                    i = end;
                    continue;
                }
                '[' | '&' | '~' | '-' if c != '-' || chars.get(i + 1) == Some(&'-') => {
                    if c == '-' {
                        // `--` is a set difference here, a range or literal in RE2: keep the
                        // first as a literal
                        out.push_str(r"\-");
                    } else {
                        out.push('\\');
                        out.push(c);
                    }
                }
                _ => out.push(c),
            }
            i += 1;
            continue;
        }
        if c == '[' {
            in_class = true;
            out.push('[');
            i += 1;
            if chars.get(i) == Some(&'^') {
                out.push('^');
                i += 1;
            }
            class_start = i;
            if chars.get(i) == Some(&']') {
                out.push_str(r"\]");
                i += 1;
            }
            continue;
        }
        out.push(c);
        i += 1;
    }
    out
}

fn push_bytes(out: &mut String, c: char) {
    let mut buf = [0u8; 4];
    for b in c.encode_utf8(&mut buf).bytes() {
        out.push_str(&format!(r"\x{b:02X}"));
    }
}

/// A byte-level regex (Unicode off, any byte matchable), compiled from an RE2 pattern.
pub fn compile(pattern: &str) -> Result<Regex, String> {
    build(&translate(pattern))
}

/// A byte-level regex from a pattern already in this crate's syntax.
pub fn build(pattern: &str) -> Result<Regex, String> {
    meta::Builder::new()
        .syntax(syntax::Config::new().unicode(false).utf8(false))
        .configure(
            meta::Config::new()
                .utf8_empty(false)
                .nfa_size_limit(Some(256 << 20))
                .hybrid_cache_capacity(8 << 20),
        )
        .build(pattern)
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn space_is_re2s() {
        let r = compile(r"a\sb").unwrap();
        assert!(r.is_match(b"a\tb"));
        assert!(!r.is_match(b"a\x0Bb"));
    }

    #[test]
    fn literal_bracket_in_class() {
        let r = compile(r"[[x]+").unwrap();
        assert!(r.is_match(b"[x["));
    }

    #[test]
    fn non_ascii_is_bytes() {
        let r = compile("contrase(?:ñ|n)a").unwrap();
        assert!(r.is_match("contraseña".as_bytes()));
    }
}
