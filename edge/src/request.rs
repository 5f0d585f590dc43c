//! What the edge reads from a request before the engine sees anything: the route, the solve id,
//! `?wait=`, the bearer token and the declared body length. Pure functions of text and bytes
//! (std only: no Spin, no HTTP types), so `fuzz/` compiles this very file natively and fuzzes it
//! (`fuzz/fuzz_targets/edge_request.rs`). The task body itself goes to the engine's `create`.

/// The path prefix of one solve's resource.
pub const SOLVE_PREFIX: &str = "/v1/solve/";

/// A route, as the API and its metrics name it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route<'a> {
    Healthz,
    Readyz,
    /// CaptchaAI's `/in.php` (`crate::classic`).
    InPhp,
    /// CaptchaAI's `/res.php` (`crate::classic`).
    ResPhp,
    Metrics,
    /// `/v1/solve`.
    Solves,
    /// `/v1/threads`.
    Threads,
    /// `/v1/solve/{id}` with a well-formed id.
    Solve(&'a str),
    /// `/v1/solve/{id}` whose id cannot exist.
    UnknownSolve,
    /// Anything else.
    Other,
}

impl Route<'_> {
    /// The route's template, the label of its request metrics.
    pub fn name(self) -> &'static str {
        match self {
            Route::Healthz => "/healthz",
            Route::Readyz => "/readyz",
            Route::InPhp => "/in.php",
            Route::ResPhp => "/res.php",
            Route::Metrics => "/metrics",
            Route::Solves => "/v1/solve",
            Route::Threads => "/v1/threads",
            Route::Solve(_) | Route::UnknownSolve => "/v1/solve/{id}",
            Route::Other => "(other)",
        }
    }
}

/// The route of `path` (the URI's path, without the query).
pub fn route(path: &str) -> Route<'_> {
    match path {
        "/healthz" => Route::Healthz,
        "/readyz" => Route::Readyz,
        "/in.php" => Route::InPhp,
        "/res.php" => Route::ResPhp,
        "/metrics" => Route::Metrics,
        "/v1/solve" => Route::Solves,
        "/v1/threads" => Route::Threads,
        _ => match path.strip_prefix(SOLVE_PREFIX) {
            Some(id) if valid_id(id) => Route::Solve(id),
            Some(_) => Route::UnknownSolve,
            None => Route::Other,
        },
    }
}

/// Solve ids are 32 lowercase hex characters.
pub fn valid_id(id: &str) -> bool {
    id.len() == 32 && id.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// `?wait=S` from the query (the first `wait=` pair): `default` when there is none, `None` when
/// it is not whole seconds (decimal digits only) from 0 to `max`.
pub fn wait_seconds(query: Option<&str>, default: u64, max: u64) -> Option<u64> {
    let Some(value) = query.into_iter().flat_map(|q| q.split('&')).find_map(|pair| pair.strip_prefix("wait=")) else {
        return Some(default);
    };
    digits(value.as_bytes()).filter(|seconds| *seconds <= max)
}

/// The token presented in an `Authorization` header value: what follows `Bearer ` (the scheme
/// in any case, RFC 9110); `None` for another scheme, a missing header or an empty token.
pub fn bearer_token(header: Option<&[u8]>) -> Option<&[u8]> {
    let (scheme, token) = header?.split_at_checked(7)?;
    (scheme.eq_ignore_ascii_case(b"bearer ") && !token.is_empty()).then_some(token)
}

/// The longest `Idempotency-Key` accepted, characters.
pub const MAX_IDEMPOTENCY_KEY: usize = 255;

/// An `Idempotency-Key` header value as the key it names: either the IETF draft's quoted string
/// (`"..."`: 1 to [`MAX_IDEMPOTENCY_KEY`] printable ASCII characters, spaces included, without
/// `"` or `\`) or the same key bare (no spaces). `None` for anything else: empty, too long,
/// another character, a stray quote.
pub fn idempotency_key(value: &[u8]) -> Option<&str> {
    let visible = |b: &u8| b.is_ascii_graphic() && *b != b'"' && *b != b'\\';
    let key = match value {
        [b'"', inner @ .., b'"'] if inner.iter().all(|b| *b == b' ' || visible(b)) => inner,
        bare if bare.iter().all(visible) => bare,
        _ => return None,
    };
    if key.is_empty() || key.len() > MAX_IDEMPOTENCY_KEY {
        return None;
    }
    std::str::from_utf8(key).ok()
}

/// A `Content-Length` header value; `None` when absent or not decimal digits only.
pub fn declared_length(header: Option<&[u8]>) -> Option<u64> {
    digits(header?)
}

/// A non-empty run of ASCII digits as a number (`None` for anything else, such as a sign, a
/// space or an overflow: `str::parse` alone takes `+5`).
fn digits(text: &[u8]) -> Option<u64> {
    if text.is_empty() || !text.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(text).ok()?.parse().ok()
}
