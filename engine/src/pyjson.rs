//! Just enough of Python's `json.loads` (bytes in) to read a JWT's header and payload the
//! way the validators always have: the same accepted documents (NaN and Infinity, lone
//! surrogate escapes, duplicate keys with the last one winning), answering only whether the
//! top-level object has an `alg` key and whether its `role` is the string "anon".
#![forbid(unsafe_code)]

pub struct Object {
    pub has_alg: bool,
    pub role_anon: bool,
}

const MAX_DEPTH: usize = 900; // Python's scanner stops near its recursion limit (1000)

/// `json.loads(raw)` when it is a dict: what the validators ask of it; None otherwise.
pub fn top_object(raw: &[u8]) -> Option<Object> {
    let text = decode(raw)?;
    let mut p = Parser {
        s: &text,
        i: 0,
        depth: 0,
    };
    p.ws();
    if p.peek() != Some('{' as u32) {
        return None;
    }
    let obj = p.object(true)?;
    p.ws();
    if p.i != p.s.len() {
        return None;
    }
    obj
}

/// bytes.decode(json.detect_encoding(b), "surrogatepass") for the UTF-8 case (a UTF-8
/// BOM stripped); the UTF-16/32 guesses are refused (no JWT header is written so).
fn decode(raw: &[u8]) -> Option<Vec<u32>> {
    let mut b = raw;
    if b.starts_with(&[0xEF, 0xBB, 0xBF]) {
        b = &b[3..];
    } else if b.starts_with(&[0xFF, 0xFE]) || b.starts_with(&[0xFE, 0xFF]) {
        return None;
    } else if b.len() >= 4 && (b[0] == 0 || b[1] == 0) {
        return None;
    } else if b.len() == 2 && (b[0] == 0 || b[1] == 0) {
        return None;
    }
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let (cp, n) = if c < 0x80 {
            (c as u32, 1)
        } else if (0xC2..=0xDF).contains(&c) {
            let c1 = *b.get(i + 1)?;
            if c1 & 0xC0 != 0x80 {
                return None;
            }
            ((((c & 0x1F) as u32) << 6) | (c1 & 0x3F) as u32, 2)
        } else if (0xE0..=0xEF).contains(&c) {
            let c1 = *b.get(i + 1)?;
            let c2 = *b.get(i + 2)?;
            if c1 & 0xC0 != 0x80 || c2 & 0xC0 != 0x80 || (c == 0xE0 && c1 < 0xA0) {
                return None; // surrogates (0xED 0xA0..) pass, as with "surrogatepass"
            }
            (
                (((c & 0x0F) as u32) << 12) | (((c1 & 0x3F) as u32) << 6) | (c2 & 0x3F) as u32,
                3,
            )
        } else if (0xF0..=0xF4).contains(&c) {
            let c1 = *b.get(i + 1)?;
            let c2 = *b.get(i + 2)?;
            let c3 = *b.get(i + 3)?;
            if c1 & 0xC0 != 0x80
                || c2 & 0xC0 != 0x80
                || c3 & 0xC0 != 0x80
                || (c == 0xF0 && c1 < 0x90)
                || (c == 0xF4 && c1 > 0x8F)
            {
                return None;
            }
            (
                (((c & 0x07) as u32) << 18)
                    | (((c1 & 0x3F) as u32) << 12)
                    | (((c2 & 0x3F) as u32) << 6)
                    | (c3 & 0x3F) as u32,
                4,
            )
        } else {
            return None;
        };
        out.push(cp);
        i += n;
    }
    Some(out)
}

struct Parser<'a> {
    s: &'a [u32],
    i: usize,
    depth: usize,
}

fn is(c: u32, ch: char) -> bool {
    c == ch as u32
}

impl Parser<'_> {
    fn peek(&self) -> Option<u32> {
        self.s.get(self.i).copied()
    }

    fn ws(&mut self) {
        while let Some(c) = self.peek() {
            if c == 0x20 || c == 0x09 || c == 0x0A || c == 0x0D {
                self.i += 1;
            } else {
                break;
            }
        }
    }

    fn lit(&mut self, word: &str) -> bool {
        let w: Vec<u32> = word.chars().map(|c| c as u32).collect();
        if self.s[self.i..].starts_with(&w) {
            self.i += w.len();
            true
        } else {
            false
        }
    }

    /// A value; Some(Some(string)) for a string, Some(None) for any other value.
    fn value(&mut self) -> Option<Option<Vec<u32>>> {
        let c = self.peek()?;
        if is(c, '"') {
            return self.string().map(Some);
        }
        if is(c, '{') {
            self.object(false)?;
            return Some(None);
        }
        if is(c, '[') {
            self.array()?;
            return Some(None);
        }
        if is(c, 'n') && self.lit("null")
            || is(c, 't') && self.lit("true")
            || is(c, 'f') && self.lit("false")
            || is(c, 'N') && self.lit("NaN")
            || is(c, 'I') && self.lit("Infinity")
            || is(c, '-') && self.lit("-Infinity")
        {
            return Some(None);
        }
        self.number().then_some(None)
    }

    fn digits(&mut self) -> usize {
        let start = self.i;
        while self.peek().is_some_and(|c| (0x30..=0x39).contains(&c)) {
            self.i += 1;
        }
        self.i - start
    }

    fn number(&mut self) -> bool {
        let start = self.i;
        if self.peek() == Some('-' as u32) {
            self.i += 1;
        }
        match self.peek() {
            Some(c) if is(c, '0') => self.i += 1,
            Some(c) if (0x31..=0x39).contains(&c) => {
                self.digits();
            }
            _ => {
                self.i = start;
                return false;
            }
        }
        if self.peek() == Some('.' as u32) {
            let save = self.i;
            self.i += 1;
            if self.digits() == 0 {
                self.i = save;
                return true;
            }
        }
        if self.peek().is_some_and(|c| is(c, 'e') || is(c, 'E')) {
            let save = self.i;
            self.i += 1;
            if self.peek().is_some_and(|c| is(c, '+') || is(c, '-')) {
                self.i += 1;
            }
            if self.digits() == 0 {
                self.i = save;
            }
        }
        true
    }

    fn string(&mut self) -> Option<Vec<u32>> {
        self.i += 1; // the opening quote
        let mut out = Vec::new();
        loop {
            let c = self.peek()?;
            self.i += 1;
            if is(c, '"') {
                return Some(out);
            }
            if c < 0x20 {
                return None; // strict: control characters must be escaped
            }
            if !is(c, '\\') {
                out.push(c);
                continue;
            }
            let e = self.peek()?;
            self.i += 1;
            let simple = match char::from_u32(e)? {
                '"' => Some('"' as u32),
                '\\' => Some('\\' as u32),
                '/' => Some('/' as u32),
                'b' => Some(8),
                'f' => Some(12),
                'n' => Some(10),
                'r' => Some(13),
                't' => Some(9),
                'u' => None,
                _ => return None,
            };
            if let Some(s) = simple {
                out.push(s);
                continue;
            }
            let mut u = self.hex4()?;
            if (0xD800..=0xDBFF).contains(&u)
                && self.peek() == Some('\\' as u32)
                && self.s.get(self.i + 1) == Some(&('u' as u32))
            {
                let save = self.i;
                self.i += 2;
                match self.hex4() {
                    Some(lo) if (0xDC00..=0xDFFF).contains(&lo) => {
                        u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
                    }
                    Some(_) => self.i = save,
                    None => return None,
                }
            }
            out.push(u);
        }
    }

    fn hex4(&mut self) -> Option<u32> {
        let mut v = 0;
        for _ in 0..4 {
            let c = char::from_u32(self.peek()?)?;
            v = v * 16 + c.to_digit(16)?;
            self.i += 1;
        }
        Some(v)
    }

    fn enter(&mut self) -> Option<()> {
        self.depth += 1;
        (self.depth <= MAX_DEPTH).then_some(())
    }

    fn array(&mut self) -> Option<()> {
        self.enter()?;
        self.i += 1;
        self.ws();
        if self.peek() == Some(']' as u32) {
            self.i += 1;
            self.depth -= 1;
            return Some(());
        }
        loop {
            self.ws();
            self.value()?;
            self.ws();
            let c = self.peek()?;
            self.i += 1;
            if is(c, ']') {
                self.depth -= 1;
                return Some(());
            }
            if !is(c, ',') {
                return None;
            }
        }
    }

    fn object(&mut self, top: bool) -> Option<Option<Object>> {
        self.enter()?;
        self.i += 1;
        let mut obj = Object {
            has_alg: false,
            role_anon: false,
        };
        let alg: Vec<u32> = "alg".chars().map(|c| c as u32).collect();
        let role: Vec<u32> = "role".chars().map(|c| c as u32).collect();
        let anon: Vec<u32> = "anon".chars().map(|c| c as u32).collect();
        self.ws();
        if self.peek() == Some('}' as u32) {
            self.i += 1;
            self.depth -= 1;
            return Some(top.then_some(obj));
        }
        loop {
            self.ws();
            if self.peek() != Some('"' as u32) {
                return None;
            }
            let key = self.string()?;
            self.ws();
            if self.peek() != Some(':' as u32) {
                return None;
            }
            self.i += 1;
            self.ws();
            let value = self.value()?;
            if key == alg {
                obj.has_alg = true;
            }
            if key == role {
                obj.role_anon = value.as_deref() == Some(&anon[..]);
            }
            self.ws();
            let c = self.peek()?;
            self.i += 1;
            if is(c, '}') {
                self.depth -= 1;
                return Some(top.then_some(obj));
            }
            if !is(c, ',') {
                return None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_python_json() {
        let o = top_object(br#"{"alg": "HS256", "x": NaN, "role": "anon"}"#).unwrap();
        assert!(o.has_alg && o.role_anon);
        assert!(top_object(br#"{"alg": 1} x"#).is_none());
        assert!(top_object(br#"[1]"#).is_none());
        let o = top_object(br#"{"role": "anon", "role": "x", "\u0061lg": 0}"#).unwrap();
        assert!(o.has_alg && !o.role_anon);
    }
}
