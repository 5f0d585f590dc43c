//! Solve configuration: where the service is, time budgets, retry budgets and jitter.

use std::sync::{Arc, OnceLock};

use serde::{Deserialize, Serialize};

use crate::codes;
use crate::error::{ValidationError, invalid_config};
use crate::registry::{TYPES, TypeSpec};

/// The range a numeric config field may take, listed by [`Config::limits`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limit {
    /// The field's name in config JSON (and the WIT `config` record).
    pub field: &'static str,
    /// The smallest value allowed.
    pub min: u64,
    /// The largest value allowed.
    pub max: u64,
}

impl Limit {
    const fn new(field: &'static str, min: u64, max: u64) -> Limit {
        Limit { field, min, max }
    }

    /// Checks `value` against the range; the error names the field.
    pub(crate) fn check(&self, value: u64) -> Result<(), ValidationError> {
        if (self.min..=self.max).contains(&value) { Ok(()) } else { Err(self.out_of_range(value)) }
    }

    #[cold]
    fn out_of_range(&self, value: u64) -> ValidationError {
        let Limit { field, min, max } = *self;
        invalid_config(field, format!("{field} must be from {min} to {max} (got {value})"))
    }
}

/// Per-request timeout: 1 s to 120 s (the account requests check it too).
pub(crate) const REQUEST_TIMEOUT_MS: Limit = Limit::new("request_timeout_ms", 1_000, 120_000);
/// Deadline: 10 s to 1 h.
const DEADLINE_MS: Limit = Limit::new("deadline_ms", 10_000, 3_600_000);
/// The first wait: at least 1 s, the official SDK's first wait for images (the docs' guide says
/// 5 s; no source says the service refuses an earlier poll, which is unconfirmed either way: a
/// too-early poll costs one `CAPCHA_NOT_READY`).
pub(crate) const INITIAL_WAIT_MS: Limit = Limit::new("initial_wait_ms", 1_000, 300_000);
/// Between polls: the service is never polled faster than every 5 s, whatever a task or config
/// asks.
pub(crate) const POLL_INTERVAL_MS: Limit = Limit::new("poll_interval_ms", 5_000, 120_000);
const MAX_SUBMIT_RETRIES: Limit = Limit::new("max_submit_retries", 0, 10);
const MAX_POLL_ERRORS: Limit = Limit::new("max_poll_errors", 1, 100);
const UNSOLVABLE_RETRIES: Limit = Limit::new("unsolvable_retries", 0, 5);
const MAX_JITTER_MS: Limit = Limit::new("max_jitter_ms", 0, 10_000);
/// What one poll is worth in ms of waiting, to adaptive polling: 0 (polls are free) to 60 s.
pub(crate) const POLL_COST_MS: Limit = Limit::new("poll_cost_ms", 0, 60_000);
/// The default price of a poll: a quarter second of waiting, the price at which the best
/// schedules on the shipped modelled solve times stay closest to the type table's (for 7 of 11
/// types within 2% of the table's polls and delay, as at 500, and more than at any other price
/// from 0 to 20 s; BENCHMARKS.md, "adaptive polling").
pub(crate) const DEFAULT_POLL_COST_MS: u64 = 250;

/// Every bounded field, in the order a config is checked: the one place the ranges are written.
const LIMITS: &[Limit] = &[
    REQUEST_TIMEOUT_MS,
    MAX_SUBMIT_RETRIES,
    MAX_POLL_ERRORS,
    UNSOLVABLE_RETRIES,
    MAX_JITTER_MS,
    POLL_COST_MS,
    INITIAL_WAIT_MS,
    POLL_INTERVAL_MS,
    DEADLINE_MS,
];

/// The service's address unless a config says otherwise.
pub(crate) const DEFAULT_BASE_URL: &str = "https://ocr.captchaai.com";

/// The URL of `path` (`/in.php`, `/solve.php` or `/res.php`) under a normalised `base_url`.
/// The default base URL's three are built once per process and shared: four allocations and
/// frees fewer per solve (~900 of 14.2k native instructions, callgrind).
pub(crate) fn endpoint_url(base_url: &str, path: &str) -> Arc<str> {
    const PATHS: [&str; 3] = ["/in.php", "/solve.php", "/res.php"];
    static DEFAULT: OnceLock<[Arc<str>; 3]> = OnceLock::new();
    let build = |base: &str, path: &str| Arc::<str>::from([base, path].concat());
    if base_url == DEFAULT_BASE_URL
        && let Some(i) = PATHS.iter().position(|p| *p == path)
    {
        return DEFAULT.get_or_init(|| PATHS.map(|p| build(DEFAULT_BASE_URL, p)))[i].clone();
    }
    build(base_url, path)
}

/// How a solve runs. Every field has a default; `None` timings take the type's value from the
/// registry.
///
/// Build it with `..Config::default()` (`Config { deadline_ms: Some(60_000), ..Config::default()
/// }`) or [`Config::from_json`]: both keep compiling as fields are added. (It is not
/// `#[non_exhaustive]`, which would forbid that form outside this crate.)
///
/// As JSON: an object with any of the fields by name. Unknown fields are rejected; missing or
/// null ones take their defaults. [`Serialize`] writes every field (unset timings as null),
/// except `poll_cost_ms` at its default (a snapshot's config reads as it did before the field).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "ConfigJson")]
pub struct Config {
    /// `http(s)://host[:port][/prefix]`; `/in.php` and `/res.php` are appended. Shared: a solve
    /// keeps it without a copy (`"https://...".into()` makes one).
    pub base_url: Arc<str>,
    /// Per-request timeout given to the host (1 s to 120 s).
    pub request_timeout_ms: u64,
    /// Overall deadline counted from the original submit (10 s to 1 h; must exceed the first
    /// wait). A solve ends by `deadline + request_timeout`, or by [`crate::Solve::ends_by`] when
    /// its host stalled past the deadline with a poll to send (the last poll).
    pub deadline_ms: Option<u64>,
    /// Wait between an accepted submit and the first poll (1 s to 300 s).
    pub initial_wait_ms: Option<u64>,
    /// Wait between polls (5 s to 120 s; never below 5 s).
    pub poll_interval_ms: Option<u64>,
    /// Retries of a submit after transient codes, transport errors or unreadable replies (0-10).
    pub max_submit_retries: u32,
    /// Consecutive failed polls (transient codes, transport errors, unreadable replies) before
    /// giving up (1-100).
    pub max_poll_errors: u32,
    /// Fresh resubmissions after ERROR_CAPTCHA_UNSOLVABLE (0-5).
    pub unsolvable_retries: u32,
    /// Seed for wait jitter; `None` means no jitter. The same seed gives the same waits.
    pub jitter_seed: Option<u64>,
    /// Largest jitter added to a wait when a seed is set (0-10,000 ms).
    pub max_jitter_ms: u64,
    /// What one poll is worth in ms of waiting (0-60,000; default 250): a solve created with
    /// a learned [`crate::SolveTimes`] model polls on the schedule of least expected wait from
    /// the answer being ready to the poll that finds it, plus this per poll.
    #[serde(skip_serializing_if = "is_default_poll_cost")]
    pub poll_cost_ms: u64,
}

fn is_default_poll_cost(poll_cost_ms: &u64) -> bool {
    *poll_cost_ms == DEFAULT_POLL_COST_MS
}

impl Default for Config {
    fn default() -> Config {
        Config {
            base_url: DEFAULT_BASE_URL.into(),
            request_timeout_ms: 30_000,
            deadline_ms: None,
            initial_wait_ms: None,
            poll_interval_ms: None,
            max_submit_retries: 5,
            max_poll_errors: 10,
            unsolvable_retries: 1,
            jitter_seed: None,
            max_jitter_ms: 1_000,
            poll_cost_ms: DEFAULT_POLL_COST_MS,
        }
    }
}

/// Config as hosts give it (JSON, or the WIT `config` record): every field optional, none
/// meaning "the default".
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ConfigJson {
    #[serde(default)]
    pub(crate) base_url: Option<String>,
    #[serde(default)]
    pub(crate) request_timeout_ms: Option<u64>,
    #[serde(default)]
    pub(crate) deadline_ms: Option<u64>,
    #[serde(default)]
    pub(crate) initial_wait_ms: Option<u64>,
    #[serde(default)]
    pub(crate) poll_interval_ms: Option<u64>,
    #[serde(default)]
    pub(crate) max_submit_retries: Option<u32>,
    #[serde(default)]
    pub(crate) max_poll_errors: Option<u32>,
    #[serde(default)]
    pub(crate) unsolvable_retries: Option<u32>,
    #[serde(default)]
    pub(crate) jitter_seed: Option<u64>,
    #[serde(default)]
    pub(crate) max_jitter_ms: Option<u64>,
    #[serde(default)]
    pub(crate) poll_cost_ms: Option<u64>,
}

impl From<ConfigJson> for Config {
    fn from(c: ConfigJson) -> Config {
        let d = Config::default();
        Config {
            base_url: c.base_url.map_or(d.base_url, Arc::from),
            request_timeout_ms: c.request_timeout_ms.unwrap_or(d.request_timeout_ms),
            deadline_ms: c.deadline_ms,
            initial_wait_ms: c.initial_wait_ms,
            poll_interval_ms: c.poll_interval_ms,
            max_submit_retries: c.max_submit_retries.unwrap_or(d.max_submit_retries),
            max_poll_errors: c.max_poll_errors.unwrap_or(d.max_poll_errors),
            unsolvable_retries: c.unsolvable_retries.unwrap_or(d.unsolvable_retries),
            jitter_seed: c.jitter_seed,
            max_jitter_ms: c.max_jitter_ms.unwrap_or(d.max_jitter_ms),
            poll_cost_ms: c.poll_cost_ms.unwrap_or(d.poll_cost_ms),
        }
    }
}

/// The waits a solve of one type runs with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Timings {
    pub initial_wait_ms: u64,
    pub poll_interval_ms: u64,
    pub deadline_ms: u64,
}

impl Config {
    /// The range of every bounded numeric field (the timings' ranges apply to a type's defaults
    /// too; `deadline_ms` must also exceed the first wait).
    pub fn limits() -> &'static [Limit] {
        LIMITS
    }

    /// Parses config JSON: an object with any of the fields by name (unknown fields are
    /// rejected; missing or null ones take defaults). Values are checked when a solve starts.
    pub fn from_json(json: &str) -> Result<Config, ValidationError> {
        serde_json::from_str(json)
            .map_err(|e| ValidationError::new(codes::INVALID_CONFIG, None, format!("config is not valid: {e}")))
    }

    /// Checks every field that a solve of any captcha type checks the same way, so a host that
    /// takes its config from an operator can refuse a bad one up front: the error names the
    /// field. What depends on the type (a deadline shorter than that type's first wait) is
    /// still checked when its solve starts.
    pub fn check(&self) -> Result<(), ValidationError> {
        // A type whose own timings fit every range: only the config's values are judged.
        let neutral = TypeSpec { initial_wait_ms: INITIAL_WAIT_MS.min, deadline_ms: DEADLINE_MS.max, ..TYPES[0] };
        self.resolve(&neutral).map(drop)
    }

    /// Checks every field and resolves the timings for a type. Returns the config with its base
    /// URL normalised (no trailing slash).
    pub(crate) fn resolve(&self, spec: &TypeSpec) -> Result<(Config, Timings), ValidationError> {
        let base_url = match normalise_base_url(&self.base_url)? {
            // Already normalised (the usual case): shared, not copied.
            same if same.len() == self.base_url.len() => self.base_url.clone(),
            trimmed => trimmed.into(),
        };
        REQUEST_TIMEOUT_MS.check(self.request_timeout_ms)?;
        MAX_SUBMIT_RETRIES.check(self.max_submit_retries.into())?;
        MAX_POLL_ERRORS.check(self.max_poll_errors.into())?;
        UNSOLVABLE_RETRIES.check(self.unsolvable_retries.into())?;
        MAX_JITTER_MS.check(self.max_jitter_ms)?;
        POLL_COST_MS.check(self.poll_cost_ms)?;
        let initial_wait_ms = self.initial_wait_ms.unwrap_or(spec.initial_wait_ms);
        INITIAL_WAIT_MS.check(initial_wait_ms)?;
        let poll_interval_ms = self.poll_interval_ms.unwrap_or(spec.poll_interval_ms);
        POLL_INTERVAL_MS.check(poll_interval_ms)?;
        let deadline_ms = self.deadline_ms.unwrap_or(spec.deadline_ms);
        DEADLINE_MS.check(deadline_ms)?;
        if deadline_ms <= initial_wait_ms {
            return Err(invalid_config(
                "deadline_ms",
                format!(
                    "deadline_ms ({deadline_ms}) must exceed the first wait ({initial_wait_ms} ms for {})",
                    spec.name
                ),
            ));
        }
        let config = Config {
            base_url,
            request_timeout_ms: self.request_timeout_ms,
            deadline_ms: self.deadline_ms,
            initial_wait_ms: self.initial_wait_ms,
            poll_interval_ms: self.poll_interval_ms,
            max_submit_retries: self.max_submit_retries,
            max_poll_errors: self.max_poll_errors,
            unsolvable_retries: self.unsolvable_retries,
            jitter_seed: self.jitter_seed,
            max_jitter_ms: self.max_jitter_ms,
            poll_cost_ms: self.poll_cost_ms,
        };
        Ok((config, Timings { initial_wait_ms, poll_interval_ms, deadline_ms }))
    }
}

/// Checks `http(s)://host[:port][/path]` and drops trailing slashes. The default URL is taken
/// as it is (a unit test checks it passes): ~150 fewer native instructions per solve, callgrind.
pub(crate) fn normalise_base_url(url: &str) -> Result<&str, ValidationError> {
    if url == DEFAULT_BASE_URL {
        return Ok(url);
    }
    checked_base_url(url)
}

fn checked_base_url(url: &str) -> Result<&str, ValidationError> {
    let bad =
        || invalid_config("base_url", "base_url must look like https://host[:port][/path], without query or fragment");
    let rest = url.strip_prefix("https://").or_else(|| url.strip_prefix("http://")).ok_or_else(bad)?;
    if rest.is_empty()
        || rest.starts_with('/')
        || url.len() > 512
        // Query, fragment, userinfo, ASCII whitespace and controls, in one pass over the bytes.
        || crate::text::any_byte(url, |b| (b <= b' ') | (b == 0x7f) | (b == b'?') | (b == b'#') | (b == b'@'))
        || (!url.is_ascii() && url.chars().any(|c| c.is_whitespace() || c.is_control()))
    {
        return Err(bad());
    }
    Ok(url.trim_end_matches('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_base_url_passes_the_full_check() {
        assert_eq!(checked_base_url(DEFAULT_BASE_URL).ok(), Some(DEFAULT_BASE_URL));
        assert!(checked_base_url("https:///x").is_err(), "no host");
    }
}
