//! Spin application variables: name rules, the `SPIN_VARIABLE_*` environment provider, `{{ var }}`
//! templates, and the values a component can read through `spin:variables`.
//!
//! Values are secrets (the CaptchaAI key, client tokens): nothing here prints or formats them;
//! errors name variables only. [`Redactor`] scrubs them out of guest-originated log text.

use std::collections::BTreeMap;
use std::fmt;

/// The environment prefix Spin's environment provider reads: `SPIN_VARIABLE_API_BASE` is the
/// application variable `api_base`.
pub const ENV_PREFIX: &str = "SPIN_VARIABLE_";

/// Checks a variable name the way Spin does (`spin-expressions` keys): lowercase ASCII letters,
/// digits and underscores; starts with a letter; does not end with `_`; no `__`.
pub fn validate_name(name: &str) -> Result<(), String> {
    let Some(first) = name.bytes().next() else {
        return Err("a variable name must not be empty".into());
    };
    if let Some(c) = name.chars().find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')) {
        return Err(format!(
            "invalid character {c:?} in variable name {name:?}: only lowercase letters, digits and '_' are allowed"
        ));
    }
    if !first.is_ascii_lowercase() {
        return Err(format!("variable name {name:?} must start with a lowercase letter"));
    }
    if name.ends_with('_') {
        return Err(format!("variable name {name:?} must not end with '_'"));
    }
    if name.contains("__") {
        return Err(format!("variable name {name:?} must not contain '__'"));
    }
    Ok(())
}

/// Application variables from `SPIN_VARIABLE_<NAME>` entries of `env` (names are lowercased).
/// Entries whose name is not a valid variable name are skipped with a warning naming them.
pub fn from_env<I, K, V>(env: I) -> BTreeMap<String, String>
where
    I: IntoIterator<Item = (K, V)>,
    K: AsRef<str>,
    V: Into<String>,
{
    let mut out = BTreeMap::new();
    for (key, value) in env {
        let Some(name) = key.as_ref().strip_prefix(ENV_PREFIX) else { continue };
        let name = name.to_ascii_lowercase();
        match validate_name(&name) {
            Ok(()) => {
                out.insert(name, value.into());
            }
            Err(why) => eprintln!("serve: ignoring environment variable {}: {why}", key.as_ref()),
        }
    }
    out
}

/// Parses a `name=value` flag. The error never includes the value.
pub fn parse_assignment(flag: &str) -> anyhow::Result<(String, String)> {
    let Some((name, value)) = flag.split_once('=') else {
        anyhow::bail!("--variable expects NAME=VALUE (got no '=')");
    };
    let name = name.trim();
    validate_name(name).map_err(|why| anyhow::anyhow!("--variable: {why}"))?;
    Ok((name.to_owned(), value.to_owned()))
}

/// Expands a Spin template: literal text with `{{ name }}` references, each replaced by
/// `lookup(name)`. `lookup` returns `None` for an unknown reference, which is an error naming it.
pub fn expand_template(template: &str, mut lookup: impl FnMut(&str) -> Option<String>) -> anyhow::Result<String> {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else {
            anyhow::bail!("unterminated '{{{{' in template");
        };
        let name = after[..end].trim();
        validate_name(name).map_err(|why| anyhow::anyhow!("in template: {why}"))?;
        match lookup(name) {
            Some(value) => out.push_str(&value),
            None => anyhow::bail!("template refers to variable {name:?}, which has no value"),
        }
        rest = &after[end + 2..];
    }
    if rest.contains("}}") {
        anyhow::bail!("unmatched '}}}}' in template");
    }
    out.push_str(rest);
    Ok(out)
}

/// The variables one component can read, name → value. `Debug` lists names only.
#[derive(Clone, Default)]
pub struct ComponentVariables {
    values: BTreeMap<String, String>,
}

impl fmt::Debug for ComponentVariables {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.values.keys()).finish()
    }
}

impl ComponentVariables {
    /// Wraps resolved values (names must already be valid).
    pub fn new(values: BTreeMap<String, String>) -> ComponentVariables {
        ComponentVariables { values }
    }

    /// `spin:variables/get` semantics: invalid name, or the value, or undefined.
    pub fn get(&self, name: &str) -> Result<&str, VariableError> {
        validate_name(name).map_err(VariableError::InvalidName)?;
        self.values.get(name).map(String::as_str).ok_or_else(|| VariableError::Undefined(name.to_owned()))
    }

    /// Names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.values.keys().map(String::as_str)
    }

    /// Values long enough to redact meaningfully (see [`Redactor`]).
    pub(crate) fn redactor(&self) -> Redactor {
        Redactor::new(self.values.values().cloned())
    }
}

/// Why `get` failed (mirrors the WIT `error` variant's first two cases).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VariableError {
    /// The name breaks Spin's naming rules; the text says why.
    InvalidName(String),
    /// No such variable for this component.
    Undefined(String),
}

/// Shortest value that is redacted from logs: shorter ones (`1`, `yes`) would mangle ordinary text
/// and are not plausible secrets.
pub const MIN_REDACTED_LEN: usize = 4;

/// Replaces every variable value (of at least [`MIN_REDACTED_LEN`] bytes) in log text by
/// `[REDACTED]`. Used on guest-originated text (error codes, trap messages) before logging.
#[derive(Clone, Default)]
pub struct Redactor {
    /// Longest first, so a value that contains another is replaced whole.
    secrets: Vec<String>,
}

impl fmt::Debug for Redactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Redactor({} values)", self.secrets.len())
    }
}

impl Redactor {
    /// A redactor for these values.
    pub fn new(values: impl IntoIterator<Item = String>) -> Redactor {
        let mut secrets: Vec<String> = values.into_iter().filter(|v| v.len() >= MIN_REDACTED_LEN).collect();
        secrets.sort_by_key(|v| std::cmp::Reverse(v.len()));
        secrets.dedup();
        Redactor { secrets }
    }

    /// `text` with every known value replaced.
    pub fn redact(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for secret in &self.secrets {
            if out.contains(secret.as_str()) {
                out = out.replace(secret.as_str(), "[REDACTED]");
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_spin_rules() {
        for ok in ["a", "api_base", "captchaai_key", "k2", "a_b_c"] {
            assert!(validate_name(ok).is_ok(), "{ok}");
        }
        for bad in ["", "API_BASE", "1a", "_a", "a_", "a__b", "a-b", "a.b", "é"] {
            assert!(validate_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn env_names_are_lowercased_and_filtered() {
        let vars = from_env([
            ("SPIN_VARIABLE_API_BASE", "http://x"),
            ("SPIN_VARIABLE_BAD__NAME", "v"),
            ("PATH", "/bin"),
            ("SPIN_VARIABLE_", "empty"),
        ]);
        assert_eq!(vars.into_iter().collect::<Vec<_>>(), [("api_base".to_owned(), "http://x".to_owned())]);
    }

    #[test]
    fn assignments_keep_equals_signs_in_values() {
        assert_eq!(parse_assignment("token=a=b").unwrap(), ("token".into(), "a=b".into()));
        let err = parse_assignment("Bad=secret-value").unwrap_err().to_string();
        assert!(!err.contains("secret-value"), "{err}");
        assert!(parse_assignment("novalue").is_err());
    }

    #[test]
    fn templates_expand() {
        let lookup = |n: &str| (n == "host").then(|| "example.com".to_owned());
        assert_eq!(expand_template("https://{{ host }}:8443", lookup).unwrap(), "https://example.com:8443");
        assert_eq!(expand_template("{{host}}{{host}}", lookup).unwrap(), "example.comexample.com");
        assert_eq!(expand_template("plain", lookup).unwrap(), "plain");
        assert!(expand_template("{{ missing }}", lookup).is_err());
        assert!(expand_template("{{ host", lookup).is_err());
        assert!(expand_template("host }}", lookup).is_err());
    }

    #[test]
    fn get_distinguishes_invalid_and_undefined() {
        let vars = ComponentVariables::new(BTreeMap::from([("key".to_owned(), "s3cret".to_owned())]));
        assert_eq!(vars.get("key"), Ok("s3cret"));
        assert!(matches!(vars.get("KEY"), Err(VariableError::InvalidName(_))));
        assert_eq!(vars.get("other"), Err(VariableError::Undefined("other".into())));
        assert_eq!(format!("{vars:?}"), "{\"key\"}");
    }

    #[test]
    fn redactor_scrubs_values() {
        let r = Redactor::new(["s3cretkey".to_owned(), "s3cret".to_owned(), "ab".to_owned()]);
        assert_eq!(r.redact("x s3cretkey y s3cret ab"), "x [REDACTED] y [REDACTED] ab");
    }
}
