//! The words every other module shares: captcha kinds with their solve times, and the shape of
//! an API key. Depends on no other module of the crate.

use serde::{Deserialize, Serialize};

/// True when `key` has the shape of a CaptchaAI key (32 ASCII letters/digits).
pub fn key_well_formed(key: &str) -> bool {
    key.len() == 32 && key.bytes().all(|b| b.is_ascii_alphanumeric())
}

/// Captcha families with their own solve-time distribution.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CaptchaKind {
    /// Normal image (`method=base64` / `method=post`, and `/solve.php`).
    Image,
    /// reCAPTCHA grid image (`img_type=recaptcha` or `recaptcha=1`).
    Grid,
    /// BLS 9-image grid (`method=bls`).
    Bls,
    /// reCAPTCHA v2 (normal, invisible, enterprise).
    RecaptchaV2,
    /// reCAPTCHA v3 (normal, enterprise).
    RecaptchaV3,
    /// Cloudflare Turnstile.
    Turnstile,
    /// Cloudflare Challenge (cf_clearance).
    CloudflareChallenge,
    /// GeeTest v3 and v4.
    Geetest,
    /// CaptchaFox.
    CaptchaFox,
    /// Friendly Captcha.
    FriendlyCaptcha,
    /// Lemin.
    Lemin,
}

impl CaptchaKind {
    /// Every kind.
    pub const ALL: [CaptchaKind; 11] = [
        CaptchaKind::Image,
        CaptchaKind::Grid,
        CaptchaKind::Bls,
        CaptchaKind::RecaptchaV2,
        CaptchaKind::RecaptchaV3,
        CaptchaKind::Turnstile,
        CaptchaKind::CloudflareChallenge,
        CaptchaKind::Geetest,
        CaptchaKind::CaptchaFox,
        CaptchaKind::FriendlyCaptcha,
        CaptchaKind::Lemin,
    ];

    /// Default solve-time range (virtual ms), modelled on the service's observed timings.
    pub fn default_solve_time(self) -> SolveTime {
        let (min_ms, max_ms) = match self {
            CaptchaKind::Image => (300, 1_000),
            CaptchaKind::Grid | CaptchaKind::Bls => (3_000, 10_000),
            CaptchaKind::RecaptchaV2 => (20_000, 60_000),
            CaptchaKind::RecaptchaV3 => (5_000, 10_000),
            CaptchaKind::Turnstile => (10_000, 15_000),
            CaptchaKind::CloudflareChallenge => (20_000, 90_000),
            CaptchaKind::Geetest => (10_000, 25_000),
            CaptchaKind::CaptchaFox | CaptchaKind::FriendlyCaptcha | CaptchaKind::Lemin => (8_000, 20_000),
        };
        SolveTime { min_ms, max_ms }
    }
}

/// A solve-time range in virtual milliseconds. Draws are triangular (mean of two uniforms), so
/// they cluster around the middle of the range and never leave it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SolveTime {
    /// Shortest solve time.
    pub min_ms: u64,
    /// Longest solve time.
    pub max_ms: u64,
}
