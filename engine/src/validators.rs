//! The checks a rule names in its `validate` field, and the entropy its floor is taken in
//! (the same functions as the Python validators they replace). Pure functions on bounded
//! input; none panics on any bytes.
#![forbid(unsafe_code)]

use crate::pyjson;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Validator {
    Token,
    Ssn,
    PublicIp,
    GithubChecksum,
    Luhn,
    Iban,
    Jwt,
    BasicAuth,
}

impl Validator {
    pub fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "token" => Self::Token,
            "ssn" => Self::Ssn,
            "public-ip" => Self::PublicIp,
            "github-checksum" => Self::GithubChecksum,
            "luhn" => Self::Luhn,
            "iban" => Self::Iban,
            "jwt" => Self::Jwt,
            "basic-auth" => Self::BasicAuth,
            _ => return None,
        })
    }

    pub fn check(self, secret: &[u8]) -> bool {
        match self {
            Self::Token => token(secret),
            Self::Ssn => ssn(secret),
            Self::PublicIp => public_ip(secret),
            Self::GithubChecksum => github_checksum(secret),
            Self::Luhn => luhn(secret),
            Self::Iban => iban(secret),
            Self::Jwt => jwt(secret),
            Self::BasicAuth => basic_auth(secret),
        }
    }
}

/// Shannon entropy of `data` in bits per byte (gitleaks' `entropy` measure).
pub fn shannon_entropy(data: &[u8]) -> f64 {
    if data.is_empty() {
        return 0.0;
    }
    let mut counts = [0usize; 256];
    for &b in data {
        counts[b as usize] += 1;
    }
    let total = data.len() as f64;
    // Summed in first-occurrence order, as Python's Counter does, so floors compare equal.
    let mut seen = [false; 256];
    let mut sum = 0.0;
    for &b in data {
        if !seen[b as usize] {
            seen[b as usize] = true;
            let p = counts[b as usize] as f64 / total;
            sum += p * p.log2();
        }
    }
    -sum
}

const BASE62: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

fn crc32(data: &[u8]) -> u32 {
    let mut crc = 0xFFFF_FFFFu32;
    for &b in data {
        crc ^= b as u32;
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

fn github_checksum(secret: &[u8]) -> bool {
    let body = match secret.iter().position(|&b| b == b'_') {
        Some(i) => &secret[i + 1..],
        None => &[][..],
    };
    if body.len() != 36 {
        return false;
    }
    let mut value = crc32(&body[..30]);
    let mut digits = Vec::new();
    while value != 0 {
        digits.push(BASE62[(value % 62) as usize]);
        value /= 62;
    }
    while digits.len() < 6 {
        digits.push(b'0');
    }
    digits.reverse();
    digits == body[30..]
}

fn luhn(secret: &[u8]) -> bool {
    let digits: Vec<u32> = secret
        .iter()
        .filter(|c| c.is_ascii_digit())
        .map(|&c| (c - b'0') as u32)
        .collect();
    if !(13..=19).contains(&digits.len()) {
        return false;
    }
    let mut total = 0;
    for (index, &digit) in digits.iter().rev().enumerate() {
        let doubled = if index % 2 == 1 { digit * 2 } else { digit };
        total += if doubled > 9 { doubled - 9 } else { doubled };
    }
    total % 10 == 0
}

fn iban_length(country: &[u8]) -> Option<usize> {
    const TABLE: &[(usize, &[&str])] = &[
        (15, &["NO"]),
        (16, &["BE"]),
        (18, &["DK", "FI", "FK", "FO", "GL", "NL", "SD"]),
        (19, &["MK", "SI"]),
        (20, &["AT", "BA", "EE", "KZ", "LT", "LU", "MN", "XK"]),
        (21, &["CH", "HR", "LI", "LV"]),
        (
            22,
            &["BG", "BH", "CR", "DE", "GB", "GE", "IE", "ME", "RS", "VA"],
        ),
        (23, &["AE", "GI", "IL", "IQ", "OM", "SO", "TL"]),
        (
            24,
            &[
                "AD", "CZ", "ES", "MD", "PK", "RO", "SA", "SE", "SK", "TN", "VG",
            ],
        ),
        (25, &["LY", "PT", "ST", "AO", "CV", "GW", "MZ"]),
        (26, &["IS", "TR", "DZ", "IR"]),
        (
            27,
            &[
                "BI", "DJ", "FR", "GR", "IT", "MC", "MR", "SM", "CF", "CG", "CM", "GA", "GQ", "KM",
                "MG", "TD",
            ],
        ),
        (
            28,
            &[
                "AL", "AZ", "BY", "CY", "DO", "GT", "HU", "LB", "NI", "PL", "SV", "BF", "BJ", "CI",
                "HN", "MA", "ML", "NE", "SN", "TG",
            ],
        ),
        (29, &["BR", "EG", "PS", "QA", "UA"]),
        (30, &["JO", "KW", "MU", "YE"]),
        (31, &["MT", "SC"]),
        (32, &["LC"]),
        (33, &["RU"]),
    ];
    TABLE
        .iter()
        .find(|(_, cs)| cs.iter().any(|c| c.as_bytes() == country))
        .map(|(n, _)| *n)
}

fn iban(secret: &[u8]) -> bool {
    // The rule's regex yields ASCII letters, digits and spaces only.
    let text: Vec<u8> = secret
        .iter()
        .filter(|&&b| b != b' ')
        .map(|b| b.to_ascii_uppercase())
        .collect();
    if text.len() < 4 || !text.iter().all(|b| b.is_ascii_alphanumeric()) {
        return false;
    }
    if iban_length(&text[..2]) != Some(text.len()) {
        return false;
    }
    let mut rem: u64 = 0;
    for &ch in text[4..].iter().chain(&text[..4]) {
        let v = if ch.is_ascii_digit() {
            (ch - b'0') as u64
        } else {
            (ch - b'A') as u64 + 10
        };
        rem = if v >= 10 {
            (rem * 100 + v) % 97
        } else {
            (rem * 10 + v) % 97
        };
    }
    rem == 1
}

fn b64_value(c: u8) -> Option<u32> {
    Some(match c {
        b'A'..=b'Z' => (c - b'A') as u32,
        b'a'..=b'z' => (c - b'a') as u32 + 26,
        b'0'..=b'9' => (c - b'0') as u32 + 52,
        b'+' => 62,
        b'/' => 63,
        _ => return None,
    })
}

/// binascii.a2b_base64 in its default (non-strict) mode: characters outside the alphabet
/// are skipped, a pad ends the data once a quantum is complete. None for "Incorrect
/// padding" and the other errors it raises.
pub fn a2b_base64_loose(data: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(data.len() / 4 * 3 + 3);
    let mut quad = 0usize;
    let mut acc: u32 = 0;
    let mut pads = 0usize;
    let mut padding_started = false;
    for &c in data {
        if c == b'=' {
            padding_started = true;
            if quad >= 2 && quad + pads + 1 >= 4 {
                // a complete quantum with its pads: the rest is ignored
                return Some(out);
            }
            pads += 1;
            continue;
        }
        let Some(v) = b64_value(c) else { continue };
        if padding_started {
            padding_started = false;
            pads = 0;
        }
        match quad {
            0 => {
                acc = v;
                quad = 1;
            }
            1 => {
                out.push(((acc << 2) | (v >> 4)) as u8);
                acc = v & 0x0F;
                quad = 2;
            }
            2 => {
                out.push(((acc << 4) | (v >> 2)) as u8);
                acc = v & 0x03;
                quad = 3;
            }
            _ => {
                out.push(((acc << 6) | v) as u8);
                quad = 0;
            }
        }
    }
    if quad != 0 {
        return None; // 1 excess character, or a quantum without its pads
    }
    Some(out)
}

/// binascii.a2b_base64(..., strict_mode=True) on data with no characters outside the
/// alphabet but "=": None wherever it raises.
pub fn a2b_base64_strict(data: &[u8]) -> Option<Vec<u8>> {
    if data.first() == Some(&b'=') {
        return None;
    }
    let body_len = data.iter().position(|&c| c == b'=').unwrap_or(data.len());
    let pads = data.len() - body_len;
    if data[body_len..].iter().any(|&c| c != b'=') {
        return None;
    }
    let rem = body_len % 4;
    match (rem, pads) {
        (0, _) | (2, 2) | (3, 1) => {}
        _ => return None,
    }
    a2b_base64_loose(data)
}

fn json_object_of_b64(part: &[u8]) -> Option<pyjson::Object> {
    let part = &part[..part.len().min(4096)];
    // base64.urlsafe_b64decode: "-_" read as "+/", then the default (non-strict) decoding.
    let mut std: Vec<u8> = part
        .iter()
        .map(|&c| match c {
            b'-' => b'+',
            b'_' => b'/',
            c => c,
        })
        .collect();
    let pad = (4 - part.len() % 4) % 4;
    std.extend(std::iter::repeat(b'=').take(pad));
    let raw = a2b_base64_loose(&std)?;
    pyjson::top_object(&raw)
}

fn jwt(secret: &[u8]) -> bool {
    let mut parts = secret.splitn(3, |&b| b == b'.');
    let Some(header) = parts.next().and_then(json_object_of_b64) else {
        return false;
    };
    if !header.has_alg {
        return false;
    }
    let payload = parts.next().and_then(json_object_of_b64);
    !payload.is_some_and(|p| p.role_anon)
}

/// A JWT granting only the `anon` role: public by design, whichever rule found it.
pub fn public_jwt(secret: &[u8]) -> bool {
    let parts: Vec<&[u8]> = secret.splitn(3, |&b| b == b'.').collect();
    if parts.len() != 3 {
        return false;
    }
    json_object_of_b64(parts[1]).is_some_and(|p| p.role_anon)
}

fn basic_auth(secret: &[u8]) -> bool {
    let part = &secret[..secret.len().min(4096)];
    // validate=True: only the alphabet, then at most two pads at the end.
    let body = part.iter().position(|&c| c == b'=').unwrap_or(part.len());
    if !part[..body].iter().all(|&c| b64_value(c).is_some())
        || part.len() - body > 2
        || part[body..].iter().any(|&c| c != b'=')
    {
        return false;
    }
    let Some(decoded) = a2b_base64_loose(part) else {
        return false;
    };
    let Ok(text) = std::str::from_utf8(&decoded) else {
        return false;
    };
    text.contains(':') && text.chars().all(crate::printable::is_printable)
}

fn token(secret: &[u8]) -> bool {
    let digits = secret.iter().filter(|c| c.is_ascii_digit()).count();
    let upper = secret.iter().filter(|c| c.is_ascii_uppercase()).count();
    let lower = secret.iter().filter(|c| c.is_ascii_lowercase()).count();
    let mixed = secret.len() >= 16 && upper >= 2 && lower >= 2;
    if upper + lower < 4 || digits < if mixed { 1 } else { 2 } {
        return false;
    }
    // not words or numbers joined by separators: every part `[A-Za-z]{1,12}|[0-9]{1,12}`
    !secret
        .split(|&b| matches!(b, b'-' | b'_' | b'.' | b':' | b'/'))
        .filter(|p| !p.is_empty())
        .all(|p| {
            p.len() <= 12
                && (p.iter().all(|c| c.is_ascii_alphabetic())
                    || p.iter().all(|c| c.is_ascii_digit()))
        })
}

fn ssn(secret: &[u8]) -> bool {
    let digits: Vec<u32> = secret
        .iter()
        .filter(|c| c.is_ascii_digit())
        .map(|&c| (c - b'0') as u32)
        .collect();
    if digits.len() != 9 {
        return false;
    }
    let area = digits[0] * 100 + digits[1] * 10 + digits[2];
    let group = digits[3] * 10 + digits[4];
    let serial = digits[5] * 1000 + digits[6] * 100 + digits[7] * 10 + digits[8];
    area > 0 && area < 900 && area != 666 && group > 0 && serial > 0
}

fn parse_v4(s: &str) -> Option<u32> {
    let octets: Vec<&str> = s.split('.').collect();
    if octets.len() != 4 {
        return None;
    }
    let mut ip = 0u32;
    for o in octets {
        if o.is_empty() || !o.bytes().all(|b| b.is_ascii_digit()) || o.len() > 3 {
            return None;
        }
        if o != "0" && o.starts_with('0') {
            return None;
        }
        let v: u32 = o.parse().ok()?;
        if v > 255 {
            return None;
        }
        ip = (ip << 8) | v;
    }
    Some(ip)
}

fn hextet(s: &str) -> Option<u128> {
    if !s.bytes().all(|b| b.is_ascii_hexdigit()) || s.len() > 4 {
        return None;
    }
    if s.is_empty() {
        return None; // int('', 16) raises
    }
    u128::from_str_radix(s, 16).ok()
}

fn parse_v6(s: &str) -> Option<u128> {
    if s.contains('/') {
        return None;
    }
    let (addr, scope) = match s.split_once('%') {
        Some((a, sc)) => (a, Some(sc)),
        None => (s, None),
    };
    if let Some(sc) = scope {
        if sc.is_empty() || sc.contains('%') {
            return None;
        }
    }
    if addr.is_empty() {
        return None;
    }
    let mut parts: Vec<String> = addr.split(':').map(str::to_owned).collect();
    if parts.len() < 3 {
        return None;
    }
    if parts.last().is_some_and(|p| p.contains('.')) {
        let v4 = parse_v4(&parts.pop()?)?;
        parts.push(format!("{:x}", (v4 >> 16) & 0xFFFF));
        parts.push(format!("{:x}", v4 & 0xFFFF));
    }
    if parts.len() > 9 {
        return None;
    }
    let mut skip = None;
    for i in 1..parts.len() - 1 {
        if parts[i].is_empty() {
            if skip.is_some() {
                return None;
            }
            skip = Some(i);
        }
    }
    let (hi, lo, skipped);
    if let Some(si) = skip {
        let mut h = si;
        let mut l = parts.len() - si - 1;
        if parts[0].is_empty() {
            h -= 1;
            if h != 0 {
                return None;
            }
        }
        if parts[parts.len() - 1].is_empty() {
            l -= 1;
            if l != 0 {
                return None;
            }
        }
        let sk = 8i64 - (h + l) as i64;
        if sk < 1 {
            return None;
        }
        hi = h;
        lo = l;
        skipped = sk as u32;
    } else {
        if parts.len() != 8 || parts[0].is_empty() || parts[7].is_empty() {
            return None;
        }
        hi = 8;
        lo = 0;
        skipped = 0;
    }
    let mut ip: u128 = 0;
    for p in &parts[..hi] {
        ip = (ip << 16) | hextet(p)?;
    }
    ip = ip.checked_shl(16 * skipped).unwrap_or(0);
    for p in &parts[parts.len() - lo..] {
        ip = (ip << 16) | hextet(p)?;
    }
    Some(ip)
}

fn in_v4(ip: u32, net: u32, prefix: u32) -> bool {
    prefix == 0 || (ip >> (32 - prefix)) == (net >> (32 - prefix))
}

fn in_v6(ip: u128, net: u128, prefix: u32) -> bool {
    prefix == 0 || (ip >> (128 - prefix)) == (net >> (128 - prefix))
}

const fn v4(a: u32, b: u32, c: u32, d: u32) -> u32 {
    (a << 24) | (b << 16) | (c << 8) | d
}

fn v4_private(ip: u32) -> bool {
    const NETS: &[(u32, u32)] = &[
        (v4(0, 0, 0, 0), 8),
        (v4(10, 0, 0, 0), 8),
        (v4(127, 0, 0, 0), 8),
        (v4(169, 254, 0, 0), 16),
        (v4(172, 16, 0, 0), 12),
        (v4(192, 0, 0, 0), 29),
        (v4(192, 0, 0, 170), 31),
        (v4(192, 0, 2, 0), 24),
        (v4(192, 168, 0, 0), 16),
        (v4(198, 18, 0, 0), 15),
        (v4(198, 51, 100, 0), 24),
        (v4(203, 0, 113, 0), 24),
        (v4(240, 0, 0, 0), 4),
        (v4(255, 255, 255, 255), 32),
    ];
    NETS.iter().any(|&(n, p)| in_v4(ip, n, p))
}

fn v6_private(ip: u128) -> bool {
    if (ip >> 32) == 0xFFFF {
        return v4_private((ip & 0xFFFF_FFFF) as u32);
    }
    const NETS: &[(u128, u32)] = &[
        (1, 128),
        (0, 128),
        (0xFFFF << 32, 96),
        (0x0100 << 112, 64),
        (0x2001 << 112, 23),
        ((0x2001 << 112) | (0x0002 << 96), 48),
        ((0x2001 << 112) | (0x0db8 << 96), 32),
        ((0x2001 << 112) | (0x0010 << 96), 28),
        (0xfc00 << 112, 7),
        (0xfe80 << 112, 10),
    ];
    NETS.iter().any(|&(n, p)| in_v6(ip, n, p))
}

fn public_ip(secret: &[u8]) -> bool {
    let Ok(s) = std::str::from_utf8(secret) else {
        return false;
    };
    if !s.is_ascii() {
        return false;
    }
    if let Some(ip) = parse_v4(s) {
        let global = !in_v4(ip, v4(100, 64, 0, 0), 10) && !v4_private(ip);
        return global && !in_v4(ip, v4(224, 0, 0, 0), 4);
    }
    if let Some(ip) = parse_v6(s) {
        return !v6_private(ip) && !in_v6(ip, 0xff00 << 112, 8);
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ips() {
        assert!(public_ip(b"8.8.8.8"));
        assert!(!public_ip(b"10.1.2.3"));
        assert!(!public_ip(b"01.2.3.4"));
        assert!(public_ip(b"2606:4700::1111"));
        assert!(!public_ip(b"fe80::1"));
        assert!(!public_ip(b"::ffff:10.0.0.1"));
    }

    #[test]
    fn checks() {
        assert!(luhn(b"4111 1111 1111 1111"));
        assert!(iban(b"GB82WEST12345698765432"));
        assert!(ssn(b"123-45-6789"));
        assert!(!ssn(b"666-45-6789"));
        assert!(token(b"a1b2C3d4"));
        assert!(!token(b"user-profile-2024"));
    }

    #[test]
    fn base64_modes() {
        assert_eq!(a2b_base64_strict(b"QUI="), Some(b"AB".to_vec()));
        assert_eq!(a2b_base64_strict(b"QUI"), None);
        assert_eq!(a2b_base64_loose(b"QUJD"), Some(b"ABC".to_vec()));
    }
}
