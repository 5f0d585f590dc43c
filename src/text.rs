//! Small text helpers shared by the modules (kept simple: they are part of the component).

use std::borrow::Cow;

/// Byte offset of the first occurrence of `needle` in `hay`. Short texts (every reply but an
/// error page) are scanned for the needle's first byte with `memchr`: the key looked for in a
/// typical reply costs ~165 instructions, against ~570 for `memmem::find` (which builds a
/// searcher per call) and ~460 for `windows().position()` (callgrind); long ones use `memmem`,
/// whose time stays linear whatever the text.
pub(crate) fn find(hay: &str, needle: &str) -> Option<usize> {
    let (hay, needle) = (hay.as_bytes(), needle.as_bytes());
    let Some((&first, rest)) = needle.split_first() else { return Some(0) };
    let last_start = hay.len().checked_sub(needle.len())?;
    if hay.len() > 512 {
        return memchr::memmem::find(hay, needle);
    }
    // Only the first bytes where the whole needle still fits can start it.
    memchr::memchr_iter(first, &hay[..=last_start]).find(|&i| hay[i + 1..].starts_with(rest))
}

/// Whether any byte of `text` passes `test`. Every byte is tested (no early exit), so the loop
/// vectorises (with `simd128` in the component): for the 32-byte key ~450 guest instructions
/// fewer than `bytes().any()` (callgrind). Meant for short texts: keys, URLs, fields, tokens.
pub(crate) fn any_byte(text: &str, test: impl Fn(u8) -> bool) -> bool {
    text.bytes().fold(false, |any, b| any | test(b))
}

/// `items` separated by `", "`.
pub(crate) fn list(items: impl IntoIterator<Item = &'static str>) -> String {
    let mut out = String::new();
    for (i, item) in items.into_iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str(item);
    }
    out
}

/// Untrusted text quoted in a message: control characters dropped, at most `max` characters.
pub(crate) fn clip(text: &str, max: usize) -> String {
    text.chars().filter(|c| !c.is_control()).take(max).collect()
}

/// `text` with every occurrence of `secret` replaced by `<redacted>` (borrowed as it was when
/// `secret` does not occur, the common case).
pub(crate) fn redact<'a>(text: Cow<'a, str>, secret: &str) -> Cow<'a, str> {
    if secret.is_empty() || find(&text, secret).is_none() {
        return text;
    }
    Cow::Owned(text.replace(secret, "<redacted>"))
}

/// `text` with every run of 32 or more ASCII letters and digits (an API key's shape) replaced by
/// `<redacted>`: for replies quoted where the key is not at hand (borrowed when none occurs).
pub(crate) fn redact_key_shaped(text: Cow<'_, str>) -> Cow<'_, str> {
    const KEY_LEN: usize = 32;
    let bytes = text.as_bytes();
    let (mut out, mut kept, mut at) = (None::<String>, 0, 0);
    while at < bytes.len() {
        let run = bytes[at..].iter().take_while(|b| b.is_ascii_alphanumeric()).count();
        if run >= KEY_LEN {
            // Both ends of a run are ASCII, so both are char boundaries.
            let out = out.get_or_insert_with(|| String::with_capacity(text.len()));
            out.push_str(&text[kept..at]);
            out.push_str("<redacted>");
            kept = at + run;
        }
        at += run.max(1);
    }
    match out {
        Some(mut out) => {
            out.push_str(&text[kept..]);
            Cow::Owned(out)
        }
        None => text,
    }
}

/// A decimal number written as text (`"0.3"`, `" 12 "`), read with the JSON number grammar.
pub(crate) fn number(text: &str) -> Option<f64> {
    serde_json::from_str::<f64>(text.trim()).ok().filter(|n| n.is_finite())
}

/// `bytes` as text, each invalid UTF-8 sequence replaced by U+FFFD: `String::from_utf8_lossy`,
/// validated first with `str::from_utf8`, which on valid text (nearly every reply) costs about a
/// third of the lossy decoder's instructions (callgrind).
pub(crate) fn lossy(bytes: &[u8]) -> Cow<'_, str> {
    match std::str::from_utf8(bytes) {
        Ok(text) => Cow::Borrowed(text),
        Err(_) => String::from_utf8_lossy(bytes),
    }
}
