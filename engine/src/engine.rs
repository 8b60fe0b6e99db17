//! The scrub engine: every rule over a value in one linear-time pass, then masking.
//!
//! A value's bytes are scanned in windows (64 KiB, overlapping by 8 KiB, so a 10 MiB value
//! costs per byte what a short one does): an Aho-Corasick pass over the rules' keywords
//! picks the candidate rules, and only those run, each a `regex-automata` meta regex (lazy
//! DFA for the match, then captures on the match's span only). Neither backtracks, so the
//! cost is linear in the value's length for any input. Each finding passes the rule's
//! entropy floor, validator and allowlists before its secret span is masked as
//! `[REDACTED:<rule id>]` (or `[REDACTED:<rule id>:hmac=<16 hex>]` with a key). The decoded
//! views (views.rs) and base64 runs are scanned too, their findings mapped back in place;
//! findings over old masks are dropped, so scrubbing twice changes nothing.
//!
//! An `Engine` is immutable after construction and `Sync`; nothing here panics on any input
//! bytes by design (the binding still catches a panic and fails closed).
#![forbid(unsafe_code)]

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use hmac::{Hmac, Mac};
use regex_automata::meta::Regex;
use regex_automata::util::captures::Captures;
use regex_automata::{Anchored, Input};
use sha2::Sha256;
use std::collections::HashMap;

use crate::translate;
use crate::validators::{public_jwt, shannon_entropy, Validator};
use crate::views::{
    chunk_separators, decode_base64, decoded_views, from_joined, glued_base64, to_raw, Patterns,
    View, BASE64_MIN_CHARS, GLUE_REACH_BYTES, GLUE_STARTS, MAX_BASE64_DEPTH,
};

/// (start, stop, rule index): a byte span to mask.
pub type Span = (usize, usize, usize);

const WINDOW_BYTES: usize = 64 << 10;
const WINDOW_OVERLAP_BYTES: usize = 8 << 10;
const LINE_WINDOW_BYTES: usize = 4096;
const REPEAT_MIN_BYTES: usize = 9;
const MAX_REPEATED: usize = 32;
const HEX_ENTROPY_ALLOWANCE: f64 = 0.6;

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Secret,
    Match,
    Line,
}

pub struct AllowSpec {
    pub regexes: Vec<String>,
    pub stopwords: Vec<String>,
    pub target: String,
    pub condition: String,
}

pub struct RuleSpec {
    pub id: String,
    pub regex: String,
    pub keywords: Vec<String>,
    pub entropy: Option<f64>,
    pub secret_group: usize,
    pub validate: Option<String>,
    pub allowlists: Vec<AllowSpec>,
}

/// Why a rule set cannot be compiled: the rule's position, the field and the reason.
#[derive(Debug)]
pub struct RuleError {
    pub index: usize,
    pub field: &'static str,
    pub reason: String,
}

struct Allow {
    regexes: Vec<Regex>,
    stopwords: Vec<Vec<u8>>,
    target: Target,
    and: bool,
}

struct Rule {
    id: String,
    regex: Regex,
    entropy: Option<f64>,
    secret_group: usize,
    groups: usize,
    validate: Option<Validator>,
    allow: Vec<Allow>,
}

pub struct Engine {
    rules: Vec<Rule>,
    keywords: Option<AhoCorasick>,
    keyword_rules: Vec<Vec<usize>>,
    always: Vec<usize>,
    patterns: Patterns,
    hmac_key: Option<Vec<u8>>,
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    memchr::memmem::find(hay, needle).is_some()
}

impl Engine {
    pub fn new(specs: Vec<RuleSpec>, hmac_key: Option<Vec<u8>>) -> Result<Self, RuleError> {
        let mut rules = Vec::with_capacity(specs.len());
        let mut keyword_ids: HashMap<Vec<u8>, usize> = HashMap::new();
        let mut keyword_list: Vec<Vec<u8>> = Vec::new();
        let mut keyword_rules: Vec<Vec<usize>> = Vec::new();
        let mut always = Vec::new();
        for (index, spec) in specs.into_iter().enumerate() {
            let err = |field, reason: String| RuleError {
                index,
                field,
                reason,
            };
            let regex = translate::compile(&spec.regex).map_err(|e| err("regex", e))?;
            let groups = regex.captures_len().saturating_sub(1);
            if spec.secret_group > groups {
                return Err(err("secretGroup", "more than the regex's groups".into()));
            }
            let validate = match &spec.validate {
                None => None,
                Some(name) => Some(
                    Validator::from_name(name).ok_or_else(|| err("validate", "unknown".into()))?,
                ),
            };
            let mut allow = Vec::new();
            for a in spec.allowlists {
                let mut regexes = Vec::new();
                for p in &a.regexes {
                    regexes.push(translate::compile(p).map_err(|e| err("allowlist.regexes", e))?);
                }
                let target = match a.target.as_str() {
                    "secret" => Target::Secret,
                    "match" => Target::Match,
                    "line" => Target::Line,
                    _ => return Err(err("allowlist.regexTarget", "unknown".into())),
                };
                allow.push(Allow {
                    regexes,
                    stopwords: a.stopwords.into_iter().map(String::into_bytes).collect(),
                    target,
                    and: a.condition == "AND",
                });
            }
            let kws: Vec<&String> = spec.keywords.iter().filter(|k| !k.is_empty()).collect();
            if kws.is_empty() {
                always.push(index);
            }
            for k in kws {
                let bytes = k.as_bytes().to_vec();
                let id = *keyword_ids.entry(bytes.clone()).or_insert_with(|| {
                    keyword_list.push(bytes);
                    keyword_rules.push(Vec::new());
                    keyword_list.len() - 1
                });
                keyword_rules[id].push(index);
            }
            rules.push(Rule {
                id: spec.id,
                regex,
                entropy: spec.entropy,
                secret_group: spec.secret_group,
                groups,
                validate,
                allow,
            });
        }
        let keywords = if keyword_list.is_empty() {
            None
        } else {
            Some(
                AhoCorasickBuilder::new()
                    .ascii_case_insensitive(true)
                    .match_kind(MatchKind::Standard)
                    .build(&keyword_list)
                    .map_err(|e| RuleError {
                        index: 0,
                        field: "keywords",
                        reason: e.to_string(),
                    })?,
            )
        };
        Ok(Engine {
            rules,
            keywords,
            keyword_rules,
            always,
            patterns: Patterns::new(),
            hmac_key,
        })
    }

    pub fn rule_id(&self, index: usize) -> &str {
        &self.rules[index].id
    }

    /// The masked value and the rule index of each masked finding; None when nothing is.
    pub fn mask(&self, data: &[u8]) -> Option<(Vec<u8>, Vec<usize>)> {
        let spans = self.find(data, false, 0);
        if spans.is_empty() {
            return None;
        }
        let spans = clear_of_escapes(data, spans);
        let keep = if spans.is_empty() {
            vec![]
        } else {
            chunk_separators(data)
        };
        let mut out = Vec::with_capacity(data.len());
        let mut last = 0;
        for (start, stop, index) in split_at(&spans, &keep) {
            out.extend_from_slice(&data[last..start]);
            self.marker(&self.rules[index].id, &data[start..stop], &mut out);
            last = stop;
        }
        out.extend_from_slice(&data[last..]);
        Some((out, spans.iter().map(|s| s.2).collect()))
    }

    fn marker(&self, rule_id: &str, secret: &[u8], out: &mut Vec<u8>) {
        out.extend_from_slice(b"[REDACTED:");
        out.extend_from_slice(rule_id.as_bytes());
        if let Some(key) = &self.hmac_key {
            let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(key).expect("any key length");
            mac.update(secret);
            let digest = mac.finalize().into_bytes();
            out.extend_from_slice(b":hmac=");
            for b in &digest[..8] {
                out.extend_from_slice(format!("{b:02x}").as_bytes());
            }
        }
        out.push(b']');
    }

    /// Merged, sorted spans in `data` to mask (only the first one found with `first_only`).
    pub fn find(&self, data: &[u8], first_only: bool, depth: usize) -> Vec<Span> {
        if data.is_empty() {
            return vec![];
        }
        let marked = contains(data, b"[REDACTED:");
        if marked && first_only {
            let mut all = self.outside_markers(data, self.find(data, false, depth));
            all.truncate(1);
            return all;
        }
        let (mut found, has_base64) = self.scan(data, first_only);
        if first_only && !found.is_empty() {
            return found;
        }
        let views = decoded_views(&self.patterns, data.to_vec());
        // Streamed deltas are read joined: whatever is in one delta is in the joined text too.
        let streamed = views.len() > 1 && views[1].joined;
        if streamed {
            found.clear();
        }
        for vi in 1..views.len() {
            if streamed && !from_joined(&views, vi) {
                continue;
            }
            for (start, stop, index) in self.scan(&views[vi].data, first_only).0 {
                found.push((
                    to_raw(&views, vi, start, false),
                    to_raw(&views, vi, stop, true),
                    index,
                ));
                if first_only {
                    return found;
                }
            }
        }
        if depth < MAX_BASE64_DEPTH {
            for vi in 0..views.len() {
                let view = &views[vi];
                if view.data.len() < BASE64_MIN_CHARS {
                    continue;
                }
                let may = if view.parent.is_none() {
                    has_base64
                } else {
                    self.patterns.base64_text.is_match(&view.data)
                };
                if may {
                    found.extend(self.in_base64(&views, vi, first_only, depth));
                    if first_only && !found.is_empty() {
                        return found;
                    }
                }
            }
        }
        if depth == 0 && !found.is_empty() && !first_only {
            let extra = repeated_findings(data, &found);
            found.extend(extra);
        }
        if marked {
            found = self.outside_markers(data, found);
        }
        found.sort_by_key(|s| (s.0, s.2));
        let mut merged: Vec<Span> = Vec::with_capacity(found.len());
        for (start, stop, index) in found {
            if let Some(last) = merged.last_mut() {
                if start < last.1 {
                    last.1 = last.1.max(stop);
                    continue;
                }
            }
            merged.push((start, stop, index));
        }
        merged
    }

    fn in_base64(&self, views: &[View], vi: usize, first_only: bool, depth: usize) -> Vec<Span> {
        let data = &views[vi].data;
        let mut found = Vec::new();
        for m in self.patterns.base64_run.find_iter(data) {
            let token = &data[m.start()..m.end()];
            let spans = match decode_base64(token) {
                Some(decoded) => {
                    let inner = self.find(&decoded, true, depth + 1);
                    inner
                        .first()
                        .map(|f| vec![(0, token.len(), f.2)])
                        .unwrap_or_default()
                }
                None => self.in_glued_base64(token),
            };
            for (first, last, index) in spans {
                let (mut start, mut stop) = (m.start() + first, m.start() + last);
                if views[vi].parent.is_some() {
                    start = to_raw(views, vi, start, false);
                    stop = to_raw(views, vi, stop, true);
                }
                found.push((start, stop, index));
                if first_only {
                    return found;
                }
            }
        }
        found
    }

    fn in_glued_base64(&self, token: &[u8]) -> Vec<Span> {
        if !self.patterns.base64_text.is_match(token) {
            return vec![];
        }
        let mut pieces: Vec<Vec<u8>> = Vec::new();
        let mut origins: Vec<(usize, usize)> = Vec::new();
        for (shift, text, first) in glued_base64(&self.patterns, token) {
            let group = first.div_ceil(3) * 3;
            let mut extra = Vec::new();
            let mut at = group;
            while at < group + 3 * GLUE_STARTS {
                if at > first && at < text.len() {
                    extra.push((
                        at,
                        text[at..(at + GLUE_REACH_BYTES).min(text.len())].to_vec(),
                    ));
                }
                at += 3;
            }
            pieces.push(text);
            origins.push((shift, 0));
            for (at, piece) in extra {
                pieces.push(piece);
                origins.push((shift, at));
            }
        }
        if pieces.is_empty() {
            return vec![];
        }
        let joined = pieces.join(&b"\n"[..]);
        let found = self.find(&joined, false, MAX_BASE64_DEPTH);
        if found.is_empty() {
            return vec![];
        }
        let mut offsets = Vec::with_capacity(pieces.len());
        let mut acc = 0;
        for p in &pieces {
            offsets.push(acc);
            acc += p.len() + 1;
        }
        let raw_start = |begin: usize| {
            let piece = offsets.partition_point(|&o| o <= begin) - 1;
            let (shift, base) = origins[piece];
            shift + 4 * ((base + begin - offsets[piece]) / 3)
        };
        let (start, index) = found
            .iter()
            .map(|&(begin, _, index)| (raw_start(begin), index))
            .min()
            .unwrap();
        vec![(start, token.len(), index)]
    }

    fn candidates(&self, window: &[u8]) -> Vec<usize> {
        let mut hit = vec![false; self.rules.len()];
        for &i in &self.always {
            hit[i] = true;
        }
        if let Some(ac) = &self.keywords {
            for m in ac.find_overlapping_iter(window) {
                for &r in &self.keyword_rules[m.pattern().as_usize()] {
                    hit[r] = true;
                }
            }
        }
        hit.iter()
            .enumerate()
            .filter(|(_, &h)| h)
            .map(|(i, _)| i)
            .collect()
    }

    /// Findings in one view, window by window, and whether it may hold a base64 run.
    fn scan(&self, data: &[u8], first_only: bool) -> (Vec<Span>, bool) {
        let size = data.len();
        let windows: Vec<(usize, usize)> = if size <= WINDOW_BYTES + WINDOW_OVERLAP_BYTES {
            vec![(0, size)]
        } else {
            (0..size)
                .step_by(WINDOW_BYTES)
                .map(|lo| (lo, size.min(lo + WINDOW_BYTES + WINDOW_OVERLAP_BYTES)))
                .collect()
        };
        let mut extended: HashMap<usize, usize> = HashMap::new();
        let mut found = Vec::new();
        let mut has_base64 = false;
        for (lo, hi) in windows {
            let window = &data[lo..hi];
            has_base64 = has_base64 || self.patterns.base64_text.is_match(window);
            for index in self.candidates(window) {
                let rule = &self.rules[index];
                let mut caps = rule.regex.create_captures();
                let mut longer = rule.regex.create_captures();
                let mut start = lo;
                while start <= hi {
                    rule.regex
                        .search_captures(&Input::new(data).range(start..hi), &mut caps);
                    let Some(m) = caps.get_match() else { break };
                    start = if m.is_empty() { m.end() + 1 } else { m.end() };
                    let mut whole = &caps;
                    if hi < size && m.end() == hi {
                        if extended.get(&index).is_some_and(|&e| m.start() < e) {
                            continue; // inside a stretch already re-matched for this rule
                        }
                        let input = Input::new(data).range(m.start()..).anchored(Anchored::Yes);
                        rule.regex.search_captures(&input, &mut longer);
                        if let Some(l) = longer.get_match() {
                            extended.insert(index, l.end());
                            whole = &longer;
                        }
                    }
                    if let Some((s, e)) = self.confirm(rule, data, whole) {
                        // A match's trailing context (`(?:[^\w.:-]|$)` after an address) is
                        // the next one's leading context too: resume at the secret's end, so
                        // `D::>D::>` finds both at once and a second scrub finds nothing new (a rewind
                        // of at most 8 bytes a match keeps the scan linear).
                        if e > m.start() && e < start && start - e <= 8 {
                            start = e;
                        }
                        found.push((s, e, index));
                        if first_only {
                            return (found, has_base64);
                        }
                    }
                }
            }
        }
        (found, has_base64)
    }

    fn confirm(&self, rule: &Rule, data: &[u8], caps: &Captures) -> Option<(usize, usize)> {
        let whole = caps.get_match()?;
        let (start, stop) = if rule.secret_group > 0 {
            let g = caps.get_group(rule.secret_group)?;
            (g.start, g.end)
        } else if rule.groups > 0 {
            (1..=rule.groups)
                .filter_map(|g| caps.get_group(g))
                .find(|g| g.end > g.start)
                .map_or((whole.start(), whole.end()), |g| (g.start, g.end))
        } else {
            (whole.start(), whole.end())
        };
        if stop <= start {
            return None;
        }
        let secret = &data[start..stop];
        if self.patterns.marker_full.is_match(secret) {
            return None;
        }
        if !passes_checks(rule, secret) {
            return None;
        }
        if secret.starts_with(b"eyJ") && public_jwt(secret) {
            return None; // public by design under any name (an anon key)
        }
        if !rule.allow.is_empty()
            && allowed(rule, data, (whole.start(), whole.end()), (start, stop))
        {
            return None;
        }
        Some((start, stop))
    }

    fn outside_markers(&self, data: &[u8], found: Vec<Span>) -> Vec<Span> {
        let markers: Vec<(usize, usize)> = self
            .patterns
            .marker
            .find_iter(data)
            .map(|m| (m.start(), m.end()))
            .collect();
        if markers.is_empty() {
            return found;
        }
        found
            .into_iter()
            .filter(|span| {
                let k = markers.partition_point(|m| m.0 < span.1);
                if k == 0 {
                    return true;
                }
                let (m_start, m_stop) = markers[k - 1];
                if m_stop > span.0 {
                    let (id_start, id_stop) = (m_start + b"[REDACTED:".len(), m_stop - 1);
                    return id_start <= span.0 && span.1 <= id_stop;
                }
                true
            })
            .collect()
    }
}

fn passes_checks(rule: &Rule, secret: &[u8]) -> bool {
    if let Some(floor) = rule.entropy {
        let floor = if secret.iter().all(u8::is_ascii_hexdigit) {
            floor - HEX_ENTROPY_ALLOWANCE
        } else {
            floor
        };
        if shannon_entropy(secret) < floor {
            return false;
        }
    }
    rule.validate.is_none_or(|v| v.check(secret))
}

fn allowed(rule: &Rule, data: &[u8], whole: (usize, usize), secret_span: (usize, usize)) -> bool {
    let secret = &data[secret_span.0..secret_span.1];
    for allow in &rule.allow {
        let target = match allow.target {
            Target::Secret => secret,
            Target::Match => &data[whole.0..whole.1],
            Target::Line => {
                let lo = whole.0.saturating_sub(LINE_WINDOW_BYTES);
                let hi = data.len().min(whole.1 + LINE_WINDOW_BYTES);
                let line_start = match memchr::memrchr(b'\n', &data[lo..whole.0]) {
                    Some(p) => lo + p + 1,
                    None => lo,
                };
                let line_stop = if whole.1 <= hi {
                    memchr::memchr(b'\n', &data[whole.1..hi]).map(|p| whole.1 + p)
                } else {
                    None
                };
                &data[line_start..line_stop.unwrap_or(hi)]
            }
        };
        let mut checks = Vec::with_capacity(2);
        if !allow.regexes.is_empty() {
            checks.push(allow.regexes.iter().any(|r| r.is_match(target)));
        }
        if !allow.stopwords.is_empty() {
            let lowered = secret.to_ascii_lowercase();
            checks.push(allow.stopwords.iter().any(|w| contains(&lowered, w)));
        }
        if !checks.is_empty()
            && (if allow.and {
                checks.iter().all(|&c| c)
            } else {
                checks.iter().any(|&c| c)
            })
        {
            return true;
        }
    }
    false
}

/// Every other place the text of a finding occurs (at most 32 distinct secrets).
fn repeated_findings(data: &[u8], found: &[Span]) -> Vec<Span> {
    let mut secrets: Vec<(&[u8], usize)> = Vec::new();
    for &(start, stop, index) in found {
        if stop - start >= REPEAT_MIN_BYTES && secrets.len() < MAX_REPEATED {
            let s = &data[start..stop];
            if !secrets.iter().any(|(t, _)| *t == s) {
                secrets.push((s, index));
            }
        }
    }
    let mut extra = Vec::new();
    for (secret, index) in secrets {
        for at in memchr::memmem::find_iter(data, secret) {
            extra.push((at, at + secret.len(), index));
        }
    }
    extra
}

/// `spans` with the `keep` spans (a string array's framing) cut out of them.
fn split_at(spans: &[Span], keep: &[(usize, usize)]) -> Vec<Span> {
    if keep.is_empty() {
        return spans.to_vec();
    }
    let mut result = Vec::new();
    for &(start, stop, index) in spans {
        let mut i = keep.partition_point(|k| k.0 <= start).saturating_sub(1);
        let mut cursor = start;
        while i < keep.len() && keep[i].0 < stop {
            let (k_start, k_stop) = keep[i];
            if k_stop > cursor {
                if k_start > cursor {
                    result.push((cursor, k_start, index));
                }
                cursor = cursor.max(k_stop);
            }
            i += 1;
        }
        if cursor < stop {
            result.push((cursor, stop, index));
        }
    }
    result
}

/// `spans` moved off backslash escapes at their edges, so a mask never eats half of one.
fn clear_of_escapes(data: &[u8], spans: Vec<Span>) -> Vec<Span> {
    if !data.contains(&b'\\') {
        return spans;
    }
    let mut result = Vec::with_capacity(spans.len());
    for (found_start, found_stop, index) in spans {
        let (mut start, mut stop) = (found_start, found_stop);
        let mut k = start;
        while k > 0 && data[k - 1] == b'\\' {
            k -= 1;
        }
        if (start - k) % 2 == 1 {
            start += if data.get(start) == Some(&b'u') { 5 } else { 1 };
        }
        let mut j = stop;
        while j > start && data[j - 1] == b'\\' {
            j -= 1;
        }
        if stop >= j && (stop - j) % 2 == 1 {
            stop -= 1;
        }
        if stop > start {
            result.push((start, stop, index));
        }
    }
    result
}
