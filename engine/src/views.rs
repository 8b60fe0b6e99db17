//! The decoded views of a value that the engine scans besides its bytes as they are.
//!
//! JSON string escapes, percent and form encoding, terminal colour codes, HTML character
//! references, invisible characters and a streamed response's deltas (a JSON array of
//! strings) each give a `View`: the decoded bytes plus the map from their offsets back to
//! the parent's, so a finding in a view is masked in place in the raw value. At most
//! `MAX_VIEWS` of them, `MAX_DECODE_DEPTH` levels deep; base64 runs that decode to text are
//! read by `decode_base64` and `glued_base64`. Every pattern is fixed-width or a class run,
//! so building views is linear in the value.
#![forbid(unsafe_code)]

use regex_automata::meta::Regex;

use crate::translate::build;
use crate::validators::{a2b_base64_loose, a2b_base64_strict};

const MAX_VIEWS: usize = 6;
const MAX_DECODE_DEPTH: usize = 3;
pub const BASE64_MIN_CHARS: usize = 32;
pub const GLUE_STARTS: usize = 3;
pub const GLUE_REACH_BYTES: usize = 512;
pub const MAX_BASE64_DEPTH: usize = 2;

pub struct Patterns {
    json_escape: Regex,
    percent: Regex,
    invisible: Regex,
    ansi: Regex,
    form_space: Regex,
    html: Regex,
    pub base64_text: Regex,
    pub base64_run: Regex,
    text_stretch: Regex,
    pub marker: Regex,
    pub marker_full: Regex,
}

impl Patterns {
    pub fn new() -> Self {
        let b = |p: &str| build(p).expect("built-in pattern");
        Patterns {
            json_escape: b(r#"\\(?:u[0-9a-fA-F]{4}|["\\/bfnrt])"#),
            percent: b(r"%[0-9A-Fa-f]{2}|\+"),
            invisible: b(r"(?:\xE2\x80[\x8B-\x8D]|\xE2\x81\xA0|\xEF\xBB\xBF|\xC2\xAD)+"),
            ansi: b(r"\x1B\[[0-9;?]*[ -/]*[@-~]"),
            form_space: b(r"[A-Za-z]\+[A-Za-z\-]"),
            html: b(r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|amp|lt|gt|quot|apos);"),
            base64_text: b(r"(?:[A-Za-f][A-Za-z0-9+/_\-]{3}){8}"),
            base64_run: b(r"[A-Za-z0-9+/_\-]{32,}={0,2}"),
            text_stretch: b(r"[\t\n\r\x20-\x7E]{24,}"),
            marker: b(r"\[REDACTED:[A-Za-z0-9_.\-]+(?::hmac=[0-9a-f]{16})?\]"),
            marker_full: b(r"^\[REDACTED:[A-Za-z0-9_.\-]+(?::hmac=[0-9a-f]{16})?\]$"),
        }
    }
}

/// A decoded copy of the value plus the map from its offsets back to its parent's.
pub struct View {
    pub data: Vec<u8>,
    pub parent: Option<usize>,
    pub depth: usize,
    d_pos: Vec<usize>,
    d_len: Vec<usize>,
    r_pos: Vec<usize>,
    r_len: Vec<usize>,
    pub joined: bool,
}

impl View {
    pub fn root(data: Vec<u8>) -> Self {
        View {
            data,
            parent: None,
            depth: 0,
            d_pos: vec![],
            d_len: vec![],
            r_pos: vec![],
            r_len: vec![],
            joined: false,
        }
    }

    fn to_parent(&self, pos: usize, end: bool) -> usize {
        // Start offsets belong to the escape at or before them; end offsets to the one before.
        let k = if end {
            self.d_pos.partition_point(|&d| d < pos)
        } else {
            self.d_pos.partition_point(|&d| d <= pos)
        };
        if k == 0 {
            return pos;
        }
        let i = k - 1;
        let into = pos - self.d_pos[i];
        if into < self.d_len[i] {
            return self.r_pos[i] + if end { self.r_len[i] } else { 0 };
        }
        self.r_pos[i] + self.r_len[i] + into - self.d_len[i]
    }
}

/// An offset in view `index` mapped back to the raw value.
pub fn to_raw(views: &[View], index: usize, mut pos: usize, end: bool) -> usize {
    let mut at = index;
    while let Some(parent) = views[at].parent {
        pos = views[at].to_parent(pos, end);
        at = parent;
    }
    pos
}

/// Whether view `index` is a string array's joined deltas or decoded from them.
pub fn from_joined(views: &[View], index: usize) -> bool {
    let mut at = Some(index);
    while let Some(i) = at {
        if views[i].joined {
            return true;
        }
        at = views[i].parent;
    }
    false
}

/// The view whose escapes are `parts[1::2]`, each decoded by `decode`.
fn view_of(
    views: &[View],
    parent: usize,
    parts: Vec<(usize, usize)>,
    decode: &dyn Fn(&[u8]) -> Vec<u8>,
) -> View {
    let src = &views[parent].data;
    let mut data = Vec::with_capacity(src.len());
    let (mut d_pos, mut d_len, mut r_pos, mut r_len) = (vec![], vec![], vec![], vec![]);
    for (k, &(a, b)) in parts.iter().enumerate() {
        if k % 2 == 1 {
            let decoded = decode(&src[a..b]);
            d_pos.push(data.len());
            d_len.push(decoded.len());
            r_pos.push(a);
            r_len.push(b - a);
            data.extend_from_slice(&decoded);
        } else {
            data.extend_from_slice(&src[a..b]);
        }
    }
    View {
        data,
        parent: Some(parent),
        depth: views[parent].depth + 1,
        d_pos,
        d_len,
        r_pos,
        r_len,
        joined: false,
    }
}

fn split_parts(pattern: &Regex, data: &[u8]) -> Vec<(usize, usize)> {
    let mut parts = Vec::new();
    let mut last = 0;
    for m in pattern.find_iter(data) {
        parts.push((last, m.start()));
        parts.push((m.start(), m.end()));
        last = m.end();
    }
    parts.push((last, data.len()));
    parts
}

fn encode_cp(cp: u32, out: &mut Vec<u8>) {
    // UTF-8 with "surrogatepass": a lone surrogate is its three-byte form.
    if cp < 0x80 {
        out.push(cp as u8);
    } else if cp < 0x800 {
        out.push(0xC0 | (cp >> 6) as u8);
        out.push(0x80 | (cp & 0x3F) as u8);
    } else if cp < 0x10000 {
        out.push(0xE0 | (cp >> 12) as u8);
        out.push(0x80 | ((cp >> 6) & 0x3F) as u8);
        out.push(0x80 | (cp & 0x3F) as u8);
    } else {
        out.push(0xF0 | (cp >> 18) as u8);
        out.push(0x80 | ((cp >> 12) & 0x3F) as u8);
        out.push(0x80 | ((cp >> 6) & 0x3F) as u8);
        out.push(0x80 | (cp & 0x3F) as u8);
    }
}

fn hex_value(s: &[u8]) -> u32 {
    s.iter()
        .fold(0u32, |v, &c| v * 16 + (c as char).to_digit(16).unwrap_or(0))
}

fn decode_json(token: &[u8]) -> Vec<u8> {
    match token.get(1) {
        Some(b'"') => b"\"".to_vec(),
        Some(b'\\') => b"\\".to_vec(),
        Some(b'/') => b"/".to_vec(),
        Some(b'b') => b"\x08".to_vec(),
        Some(b'f') => b"\x0C".to_vec(),
        Some(b'n') => b"\n".to_vec(),
        Some(b'r') => b"\r".to_vec(),
        Some(b't') => b"\t".to_vec(),
        _ => {
            let mut out = Vec::with_capacity(3);
            encode_cp(hex_value(&token[2..]), &mut out);
            out
        }
    }
}

fn decode_percent(token: &[u8]) -> Vec<u8> {
    if token == b"+" {
        return b" ".to_vec();
    }
    vec![hex_value(&token[1..]) as u8]
}

fn decode_nothing(_token: &[u8]) -> Vec<u8> {
    Vec::new()
}

fn html_charref(num: u32) -> Option<u32> {
    const INVALID_CHARREFS: &[(u32, u32)] = &[
        (0, 65533),
        (13, 13),
        (128, 8364),
        (129, 129),
        (130, 8218),
        (131, 402),
        (132, 8222),
        (133, 8230),
        (134, 8224),
        (135, 8225),
        (136, 710),
        (137, 8240),
        (138, 352),
        (139, 8249),
        (140, 338),
        (141, 141),
        (142, 381),
        (143, 143),
        (144, 144),
        (145, 8216),
        (146, 8217),
        (147, 8220),
        (148, 8221),
        (149, 8226),
        (150, 8211),
        (151, 8212),
        (152, 732),
        (153, 8482),
        (154, 353),
        (155, 8250),
        (156, 339),
        (157, 157),
        (158, 382),
        (159, 376),
    ];
    if let Some(&(_, v)) = INVALID_CHARREFS.iter().find(|(k, _)| *k == num) {
        return Some(v);
    }
    if (0xD800..=0xDFFF).contains(&num) || num > 0x10FFFF {
        return Some(0xFFFD);
    }
    let invalid = matches!(num, 0x1..=0x8 | 0xB | 0xE..=0x1F | 0x7F..=0x9F | 0xFDD0..=0xFDEF)
        || (num & 0xFFFE) == 0xFFFE;
    if invalid {
        return None;
    }
    Some(num)
}

fn decode_html(token: &[u8]) -> Vec<u8> {
    let body = &token[1..token.len() - 1];
    let cp = match body {
        b"amp" => Some('&' as u32),
        b"lt" => Some('<' as u32),
        b"gt" => Some('>' as u32),
        b"quot" => Some('"' as u32),
        b"apos" => Some('\'' as u32),
        _ if body.len() > 1 && (body[1] == b'x' || body[1] == b'X') => {
            html_charref(hex_value(&body[2..]))
        }
        _ => html_charref(
            body[1..]
                .iter()
                .fold(0u32, |v, &c| v * 10 + (c - b'0') as u32),
        ),
    };
    let mut out = Vec::new();
    if let Some(cp) = cp {
        encode_cp(cp, &mut out);
    }
    out
}

/// Whether `data` is a JSON array of two or more strings (streamed deltas), as Python's
/// `json.loads` reads it.
pub fn is_string_array(data: &[u8]) -> bool {
    let is_ws = |c: u8| matches!(c, b' ' | b'\t' | b'\n' | b'\r' | 0x0B | 0x0C);
    let head = &data[..data.len().min(64)];
    let Some(h) = head.iter().position(|&c| !is_ws(c)) else {
        return false;
    };
    if !head[h..].starts_with(b"[\"") {
        return false;
    }
    let end = data.iter().rposition(|&c| !is_ws(c)).map_or(0, |e| e + 1);
    if !data[..end].ends_with(b"\"]") {
        return false;
    }
    if !utf8_surrogatepass(data) {
        return false;
    }
    let json_ws = |c: u8| matches!(c, b' ' | b'\t' | b'\n' | b'\r');
    let mut i = 0;
    while i < data.len() && json_ws(data[i]) {
        i += 1;
    }
    if data.get(i) != Some(&b'[') {
        return false;
    }
    i += 1;
    let mut count = 0;
    loop {
        while i < data.len() && json_ws(data[i]) {
            i += 1;
        }
        if data.get(i) != Some(&b'"') {
            return false;
        }
        let Some(next) = json_string_end(data, i) else {
            return false;
        };
        i = next;
        count += 1;
        while i < data.len() && json_ws(data[i]) {
            i += 1;
        }
        match data.get(i) {
            Some(b',') => i += 1,
            Some(b']') => {
                i += 1;
                break;
            }
            _ => return false,
        }
    }
    while i < data.len() && json_ws(data[i]) {
        i += 1;
    }
    i == data.len() && count > 1
}

/// The end (after the closing quote) of the valid JSON string literal starting at `i`.
fn json_string_end(data: &[u8], mut i: usize) -> Option<usize> {
    i += 1;
    loop {
        let c = *data.get(i)?;
        i += 1;
        match c {
            b'"' => return Some(i),
            b'\\' => {
                let e = *data.get(i)?;
                i += 1;
                match e {
                    b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {}
                    b'u' => {
                        let hex = data.get(i..i + 4)?;
                        if !hex.iter().all(u8::is_ascii_hexdigit) {
                            return None;
                        }
                        i += 4;
                    }
                    _ => return None,
                }
            }
            c if c < 0x20 => return None,
            _ => {}
        }
    }
}

fn utf8_surrogatepass(b: &[u8]) -> bool {
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let n = if c < 0x80 {
            1
        } else if (0xC2..=0xDF).contains(&c) {
            2
        } else if (0xE0..=0xEF).contains(&c) {
            3
        } else if (0xF0..=0xF4).contains(&c) {
            4
        } else {
            return false;
        };
        if i + n > b.len() || !b[i + 1..i + n].iter().all(|&x| x & 0xC0 == 0x80) {
            return false;
        }
        if (c == 0xE0 && b[i + 1] < 0xA0)
            || (c == 0xF0 && b[i + 1] < 0x90)
            || (c == 0xF4 && b[i + 1] > 0x8F)
        {
            return false;
        }
        i += n;
    }
    true
}

/// The framing of a JSON array of strings (`["`, `", "`, `"]`): what lies between its
/// string literals, quotes included.
fn framing(data: &[u8]) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut last = 0;
    let mut i = 0;
    while i < data.len() {
        if data[i] == b'"' {
            // `"[^"\\]*(?:\\.[^"\\]*)*"`: a backslash takes the next byte, whatever it is
            let mut j = i + 1;
            let mut closed = None;
            while j < data.len() {
                match data[j] {
                    b'\\' if j + 1 < data.len() => j += 2,
                    b'\\' => break,
                    b'"' => {
                        closed = Some(j);
                        break;
                    }
                    _ => j += 1,
                }
            }
            if let Some(close) = closed {
                spans.push((last, i + 1));
                last = close;
                i = close + 1;
                continue;
            }
        }
        i += 1;
    }
    spans.push((last, data.len()));
    spans
}

/// The byte spans of a string array's framing (`["`, `", "`, `"]`), or none.
pub fn chunk_separators(data: &[u8]) -> Vec<(usize, usize)> {
    if !is_string_array(data) {
        return vec![];
    }
    framing(data)
}

fn joined_deltas(views: &[View], index: usize) -> View {
    let data = &views[index].data;
    let mut parts = Vec::new();
    let mut last = 0;
    for (start, stop) in framing(data) {
        parts.push((last, start));
        parts.push((start, stop));
        last = stop;
    }
    parts.push((last, data.len()));
    let mut view = view_of(views, index, parts, &decode_nothing);
    view.joined = true;
    view
}

fn has_trigger(data: &[u8]) -> bool {
    data.iter()
        .any(|&c| matches!(c, b'\\' | b'%' | b'+' | 0x1B | b'&' | 0xE2 | 0xC2 | 0xEF))
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    memchr_find(hay, needle).is_some()
}

pub fn memchr_find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() {
        return Some(0);
    }
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The value and its decoded views, raw first.
pub fn decoded_views(p: &Patterns, data: Vec<u8>) -> Vec<View> {
    let array = is_string_array(&data);
    let trigger = has_trigger(&data);
    let mut views = vec![View::root(data)];
    if array {
        let joined = joined_deltas(&views, 0);
        views.push(joined);
    }
    if !trigger {
        return views;
    }
    let mut index = 0;
    while index < views.len() && views.len() < MAX_VIEWS {
        let i = index;
        index += 1;
        if views[i].depth >= MAX_DECODE_DEPTH {
            continue;
        }
        let d = &views[i].data;
        let json = d.contains(&b'\\') && p.json_escape.is_match(d);
        let percent = (d.contains(&b'%') && p.percent.is_match(d))
            || (d.contains(&b'+') && p.form_space.is_match(d));
        let ansi = d.contains(&0x1B) && p.ansi.is_match(d);
        let html = d.contains(&b'&') && p.html.is_match(d);
        let invisible =
            (d.contains(&0xE2) || contains(d, b"\xC2\xAD") || contains(d, b"\xEF\xBB\xBF"))
                && p.invisible.is_match(d);
        if json {
            let parts = split_parts(&p.json_escape, &views[i].data);
            let v = view_of(&views, i, parts, &decode_json);
            views.push(v);
        }
        if percent {
            let parts = split_parts(&p.percent, &views[i].data);
            let v = view_of(&views, i, parts, &decode_percent);
            views.push(v);
        }
        if ansi {
            let parts = split_parts(&p.ansi, &views[i].data);
            let v = view_of(&views, i, parts, &decode_nothing);
            views.push(v);
        }
        if html {
            let parts = split_parts(&p.html, &views[i].data);
            let v = view_of(&views, i, parts, &decode_html);
            views.push(v);
        }
        if invisible {
            let parts = split_parts(&p.invisible, &views[i].data);
            let v = view_of(&views, i, parts, &decode_nothing);
            views.push(v);
        }
    }
    views.truncate(MAX_VIEWS);
    views
}

fn is_text(data: &[u8]) -> bool {
    data.iter()
        .all(|&b| (32..127).contains(&b) || matches!(b, b'\t' | b'\n' | b'\r'))
}

/// The text a base64 run encodes, or None when it is not base64 of text.
pub fn decode_base64(token: &[u8]) -> Option<Vec<u8>> {
    let end = token.iter().rposition(|&c| c != b'=').map_or(0, |e| e + 1);
    let mut body = token[..end].to_vec();
    let urlsafe = body.iter().any(|&c| c == b'-' || c == b'_');
    if urlsafe {
        if body.iter().any(|&c| c == b'+' || c == b'/') {
            return None;
        }
        for c in body.iter_mut() {
            *c = match *c {
                b'-' => b'+',
                b'_' => b'/',
                c => c,
            };
        }
    }
    let pad = (4 - body.len() % 4) % 4;
    body.extend(std::iter::repeat(b'=').take(pad));
    let decoded = a2b_base64_strict(&body)?;
    is_text(&decoded).then_some(decoded)
}

/// (shift, text, first) for each alignment at which a run that is not base64 of text as a
/// whole decodes to some (see the Python original's account of glued runs).
pub fn glued_base64(p: &Patterns, token: &[u8]) -> Vec<(usize, Vec<u8>, usize)> {
    let end = token.iter().rposition(|&c| c != b'=').map_or(0, |e| e + 1);
    let body: Vec<u8> = token[..end]
        .iter()
        .map(|&c| match c {
            b'-' => b'+',
            b'_' => b'/',
            c => c,
        })
        .collect();
    let mut found = Vec::new();
    for shift in 0..4 {
        if shift > body.len() {
            continue;
        }
        let mut part = body[shift..].to_vec();
        if part.len() % 4 == 1 {
            part.pop();
        } else {
            let pad = (4 - part.len() % 4) % 4;
            part.extend(std::iter::repeat(b'=').take(pad));
        }
        let Some(decoded) = a2b_base64_loose(&part) else {
            continue;
        };
        let stretches: Vec<(usize, usize)> = p
            .text_stretch
            .find_iter(&decoded)
            .map(|m| (m.start(), m.end()))
            .collect();
        if stretches.is_empty() {
            continue;
        }
        let mut text = vec![b'\n'; decoded.len()];
        for &(a, b) in &stretches {
            text[a..b].copy_from_slice(&decoded[a..b]);
        }
        found.push((shift, text, stretches[0].0));
    }
    found
}
