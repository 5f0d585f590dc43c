//! Small text helpers shared by the modules (kept simple: they are part of the component).

/// Byte offset of the first occurrence of `needle` in `hay`.
pub(crate) fn find(hay: &str, needle: &str) -> Option<usize> {
    let (hay, needle) = (hay.as_bytes(), needle.as_bytes());
    if needle.is_empty() {
        return Some(0);
    }
    hay.windows(needle.len()).position(|window| window == needle)
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

/// `text` with every occurrence of `secret` replaced by `<redacted>`.
pub(crate) fn redact(text: String, secret: &str) -> String {
    let Some(first) = find(&text, secret) else { return text };
    let mut out = String::with_capacity(text.len());
    let mut rest = &text[..];
    let mut at = Some(first);
    while let Some(i) = at {
        out.push_str(&rest[..i]);
        out.push_str("<redacted>");
        rest = &rest[i + secret.len()..];
        at = find(rest, secret);
    }
    out.push_str(rest);
    out
}

/// A decimal number written as text (`"0.3"`, `" 12 "`), read with the JSON number grammar.
pub(crate) fn number(text: &str) -> Option<f64> {
    serde_json::from_str::<f64>(text.trim()).ok().filter(|n| n.is_finite())
}
