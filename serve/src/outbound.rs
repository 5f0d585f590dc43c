//! `allowed_outbound_hosts`: parsing Spin's `scheme://host[:port]` patterns and enforcing them on
//! every outbound request through the wasi-http hooks.
//!
//! Supported forms (Spin 4 manifest reference): `https://example.com` (the scheme's default
//! port), `http://127.0.0.1:8099`, `https://example.com:8000-8100` (port range), `*` in place of
//! the scheme, the host, or the port (`*://example.com:*`, `http://*:*`), and `*.example.com`
//! (any subdomain, not the domain itself). A trailing `/` is accepted; any other path, CIDR
//! ranges, and Spin's `self` keyword are rejected with an error.

use std::fmt;
use std::future::Future;

use http::uri::Scheme;
use wasmtime_wasi_http::{Error as HttpError, RequestOptions, WasiBody, WasiHttpHooks};

/// One parsed `allowed_outbound_hosts` entry.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Rule {
    /// `None`: any scheme.
    scheme: Option<String>,
    host: HostPattern,
    /// Inclusive range; `(0, 65535)` for `*`.
    ports: (u16, u16),
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum HostPattern {
    Any,
    Exact(String),
    /// `*.example.com` is stored as `.example.com`.
    Subdomain(String),
}

/// The set of outbound destinations a component may reach. Empty = nothing allowed (Spin's
/// default when a component lists no `allowed_outbound_hosts`).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct AllowedHosts {
    rules: Vec<Rule>,
    /// The entries as given (they never hold secrets: they are URLs without paths).
    raw: Vec<String>,
}

impl fmt::Debug for AllowedHosts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(&self.raw).finish()
    }
}

fn default_port(scheme: &str) -> Option<u16> {
    match scheme {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    }
}

/// Lowercases and strips IPv6 brackets so `[::1]` and `::1` compare equal.
fn normalize_host(host: &str) -> String {
    host.trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase()
}

impl AllowedHosts {
    /// Parses entries such as `https://ocr.captchaai.com` or `http://127.0.0.1:8099`. Errors name
    /// the offending entry and what is wrong with it.
    pub fn parse<S: AsRef<str>>(entries: &[S]) -> anyhow::Result<AllowedHosts> {
        let mut out = AllowedHosts::default();
        for entry in entries {
            let entry = entry.as_ref().trim();
            if entry.contains('@') {
                // Possibly `user:password@host`: do not echo it.
                anyhow::bail!("allowed outbound hosts must not contain credentials ('@')");
            }
            let rule = parse_rule(entry).map_err(|why| anyhow::anyhow!("allowed outbound host {entry:?}: {why}"))?;
            out.rules.push(rule);
            out.raw.push(entry.to_owned());
        }
        Ok(out)
    }

    /// The entries as given.
    pub fn entries(&self) -> &[String] {
        &self.raw
    }

    /// Whether a request to `scheme://host:port` is allowed.
    pub fn allows(&self, scheme: &str, host: &str, port: u16) -> bool {
        let scheme = scheme.to_ascii_lowercase();
        let host = normalize_host(host);
        self.rules.iter().any(|rule| {
            rule.scheme.as_deref().is_none_or(|s| s == scheme)
                && (rule.ports.0..=rule.ports.1).contains(&port)
                && match &rule.host {
                    HostPattern::Any => true,
                    HostPattern::Exact(h) => *h == host,
                    HostPattern::Subdomain(suffix) => host.len() > suffix.len() && host.ends_with(suffix.as_str()),
                }
        })
    }

    /// Whether the request URI is allowed; also answers the `scheme://host:port` to log.
    pub fn check_uri(&self, uri: &http::Uri) -> (bool, String) {
        let scheme = uri.scheme_str().unwrap_or("https").to_ascii_lowercase();
        let Some(host) = uri.host() else {
            return (false, format!("{scheme}://(no host)"));
        };
        let Some(port) = uri.port_u16().or_else(|| default_port(&scheme)) else {
            return (false, format!("{scheme}://{host}"));
        };
        (self.allows(&scheme, host, port), format!("{scheme}://{host}:{port}"))
    }
}

fn parse_rule(entry: &str) -> Result<Rule, String> {
    if entry == "self" || entry.ends_with("://self") {
        return Err("`self` (requests to the app itself) is not supported by this host".into());
    }
    let (scheme, rest) = entry.split_once("://").ok_or("must start with a scheme, e.g. https://")?;
    let scheme = match scheme.to_ascii_lowercase().as_str() {
        "*" => None,
        s if !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b)) => Some(s.to_owned()),
        _ => return Err("invalid scheme".into()),
    };
    let authority = rest.strip_suffix('/').unwrap_or(rest);
    if authority.contains('/') {
        return Err("must not contain a path (or a CIDR range, which this host does not support)".into());
    }
    if authority.is_empty() {
        return Err("missing host".into());
    }
    // Split off the port: the last ':' not inside IPv6 brackets.
    let (host, port) = if let Some(after_bracket) = authority.strip_prefix('[') {
        let (inside, after) = after_bracket.split_once(']').ok_or("unterminated IPv6 address")?;
        match after {
            "" => (inside, None),
            p => (inside, Some(p.strip_prefix(':').ok_or("invalid text after the IPv6 address")?)),
        }
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    let host = if host == "*" {
        HostPattern::Any
    } else if let Some(domain) = host.strip_prefix("*.") {
        if domain.is_empty() || domain.contains('*') {
            return Err("invalid wildcard host".into());
        }
        HostPattern::Subdomain(format!(".{}", domain.to_ascii_lowercase()))
    } else if host.is_empty() || host.contains('*') {
        return Err("invalid host".into());
    } else {
        HostPattern::Exact(normalize_host(host))
    };
    let ports = match port {
        None => {
            let p = scheme.as_deref().and_then(default_port).ok_or("a port is required for this scheme")?;
            (p, p)
        }
        Some("*") => (0, u16::MAX),
        Some(p) => {
            let parse = |s: &str| s.parse::<u16>().map_err(|_| format!("invalid port {s:?}"));
            match p.split_once('-') {
                Some((lo, hi)) => {
                    let (lo, hi) = (parse(lo)?, parse(hi)?);
                    if lo > hi {
                        return Err("empty port range".into());
                    }
                    (lo, hi)
                }
                None => {
                    let p = parse(p)?;
                    (p, p)
                }
            }
        }
    };
    Ok(Rule { scheme, host, ports })
}

/// The wasi-http hooks of one store: the default sender (hyper + rustls, a new connection per
/// request), gated by [`AllowedHosts`]. A denied request fails with `HttpRequestDenied` and is
/// logged (scheme, host and port only; never the path or query).
pub(crate) struct OutboundHooks {
    pub(crate) allowed: std::sync::Arc<AllowedHosts>,
}

type SendFuture = Box<
    dyn Future<
            Output = Result<
                (http::Response<WasiBody>, Box<dyn Future<Output = Result<(), HttpError>> + Send>),
                HttpError,
            >,
        > + Send,
>;

impl WasiHttpHooks for OutboundHooks {
    fn is_supported_scheme(&mut self, scheme: &Scheme) -> bool {
        *scheme == Scheme::HTTP || *scheme == Scheme::HTTPS
    }

    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        fut: Box<dyn Future<Output = Result<(), HttpError>> + Send>,
    ) -> SendFuture {
        let (allowed, target) = self.allowed.check_uri(request.uri());
        if !allowed {
            eprintln!("serve: outbound request to {target} denied: not in allowed_outbound_hosts");
            return Box::new(async { Err(HttpError::HttpRequestDenied) });
        }
        // What the default hooks do: send with hyper (+ rustls for https). `fut` (the guest's
        // response-body result) is not needed by this sender.
        drop(fut);
        Box::new(async move {
            use http_body_util::BodyExt;
            let (res, io) = wasmtime_wasi_http::default_send_request(request, options).await?;
            Ok((res.map(BodyExt::boxed_unsync), Box::new(io) as Box<dyn Future<Output = Result<(), HttpError>> + Send>))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts(entries: &[&str]) -> AllowedHosts {
        AllowedHosts::parse(entries).unwrap()
    }

    #[test]
    fn exact_hosts_use_the_default_port() {
        let a = hosts(&["https://ocr.captchaai.com", "http://127.0.0.1:8099"]);
        assert!(a.allows("https", "ocr.captchaai.com", 443));
        assert!(a.allows("HTTPS", "OCR.captchaai.com", 443));
        assert!(!a.allows("https", "ocr.captchaai.com", 8443));
        assert!(!a.allows("http", "ocr.captchaai.com", 443));
        assert!(a.allows("http", "127.0.0.1", 8099));
        assert!(!a.allows("http", "127.0.0.1", 8098));
        assert!(!a.allows("http", "localhost", 8099));
    }

    #[test]
    fn wildcards_and_ranges() {
        let a = hosts(&["*://*.example.com:*", "http://10.0.0.1:8000-8010", "https://[::1]:9000/"]);
        assert!(a.allows("http", "a.example.com", 1));
        assert!(a.allows("https", "a.b.example.com", 65535));
        assert!(!a.allows("https", "example.com", 443));
        assert!(!a.allows("https", "badexample.com", 443));
        assert!(a.allows("http", "10.0.0.1", 8005));
        assert!(!a.allows("http", "10.0.0.1", 8011));
        assert!(a.allows("https", "[::1]", 9000));
        assert!(a.allows("https", "::1", 9000));
        assert!(hosts(&["http://*:*"]).allows("http", "anything", 1234));
        assert!(!hosts(&[] as &[&str]).allows("https", "example.com", 443));
    }

    #[test]
    fn bad_entries_are_rejected() {
        for bad in [
            "example.com",
            "https://example.com/path",
            "*://example.com",
            "https://example.com:http",
            "https://example.com:9-1",
            "https://",
            "self",
            "http://10.0.0.0/8",
            "https://ex*ample.com",
            "https://user:pw@example.com",
        ] {
            assert!(AllowedHosts::parse(&[bad]).is_err(), "{bad}");
        }
    }

    #[test]
    fn check_uri_fills_default_ports() {
        let a = hosts(&["https://example.com"]);
        let (ok, target) = a.check_uri(&"https://example.com/secret?key=1".parse().unwrap());
        assert!(ok);
        assert_eq!(target, "https://example.com:443");
        let (ok, target) = a.check_uri(&"http://example.com/x".parse().unwrap());
        assert!(!ok);
        assert_eq!(target, "http://example.com:80");
    }
}
