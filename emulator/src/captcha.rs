//! Per-type submit validation (with the service's error codes), answer generation and the
//! image checks (size, magic bytes, dimensions).

use base64::Engine as _;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use bytes::Bytes;

use super::rng::{Draw as _, SplitMix64};
use super::vocab::CaptchaKind;

/// Error codes the emulator replies.
pub mod codes {
    #![allow(missing_docs)]
    pub const NOT_READY: &str = "CAPCHA_NOT_READY";
    pub const WRONG_USER_KEY: &str = "ERROR_WRONG_USER_KEY";
    pub const KEY_DOES_NOT_EXIST: &str = "ERROR_KEY_DOES_NOT_EXIST";
    pub const ZERO_BALANCE: &str = "ERROR_ZERO_BALANCE";
    pub const PAGEURL: &str = "ERROR_PAGEURL";
    pub const GOOGLEKEY: &str = "ERROR_GOOGLEKEY";
    pub const WRONG_GOOGLEKEY: &str = "ERROR_WRONG_GOOGLEKEY";
    pub const BAD_PARAMETERS: &str = "ERROR_BAD_PARAMETERS";
    pub const ZERO_CAPTCHA_FILESIZE: &str = "ERROR_ZERO_CAPTCHA_FILESIZE";
    pub const TOO_BIG_CAPTCHA_FILESIZE: &str = "ERROR_TOO_BIG_CAPTCHA_FILESIZE";
    pub const IMAGE_DIMENSIONS_TOO_LARGE: &str = "ERROR_IMAGE_DIMENSIONS_TOO_LARGE";
    pub const WRONG_FILE_EXTENSION: &str = "ERROR_WRONG_FILE_EXTENSION";
    pub const IMAGE_TYPE_NOT_SUPPORTED: &str = "ERROR_IMAGE_TYPE_NOT_SUPPORTED";
    pub const UPLOAD: &str = "ERROR_UPLOAD";
    pub const BAD_PROXY: &str = "ERROR_BAD_PROXY";
    pub const IP_BANNED: &str = "IP_BANNED";
    pub const SERVER_ERROR: &str = "ERROR_SERVER_ERROR";
    pub const CAPTCHA_UNSOLVABLE: &str = "ERROR_CAPTCHA_UNSOLVABLE";
    pub const WRONG_ID_FORMAT: &str = "ERROR_WRONG_ID_FORMAT";
    pub const WRONG_CAPTCHA_ID: &str = "ERROR_WRONG_CAPTCHA_ID";
    pub const EMPTY_ACTION: &str = "ERROR_EMPTY_ACTION";
}
use codes::*;

/// Smallest accepted image, in bytes.
pub const MIN_IMAGE_BYTES: usize = 100;
/// Largest accepted image, in bytes (1 MiB).
pub const MAX_IMAGE_BYTES: usize = 1024 * 1024;
/// Largest accepted BLS image side, in pixels.
pub const MAX_BLS_SIDE: u32 = 1000;

/// The user agent reported next to answers that carry one, unless the client sent `userAgent`.
pub const DEFAULT_USER_AGENT: &str =
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36";

/// One request parameter value.
#[derive(Clone, Debug)]
pub(crate) enum Value {
    Text(String),
    File { filename: Option<String>, data: Bytes },
}

/// Request parameters: query string first, then body; lookups take the last occurrence (so the
/// body wins over the query string, as PHP's `$_REQUEST` does).
#[derive(Clone, Debug, Default)]
pub(crate) struct Params {
    pub(crate) pairs: Vec<(String, Value)>,
    pub(crate) multipart: bool,
}

impl Params {
    pub(crate) fn text(&self, name: &str) -> Option<&str> {
        self.pairs.iter().rev().find(|(n, _)| n == name).and_then(|(_, v)| match v {
            Value::Text(s) => Some(s.as_str()),
            Value::File { .. } => None,
        })
    }

    /// The value when present and not blank.
    pub(crate) fn nonempty(&self, name: &str) -> Option<&str> {
        self.text(name).filter(|s| !s.trim().is_empty())
    }

    fn file(&self, name: &str) -> Option<(Option<&str>, &Bytes)> {
        self.pairs.iter().rev().find(|(n, _)| n == name).and_then(|(_, v)| match v {
            Value::File { filename, data } => Some((filename.as_deref(), data)),
            Value::Text(_) => None,
        })
    }
}

/// What a valid submit turns into.
#[derive(Clone, Debug)]
pub(crate) struct TaskSpec {
    pub kind: CaptchaKind,
    /// googlekey / sitekey / gt / captcha_id, checked against the unsolvable list.
    pub sitekey: Option<String>,
    /// Task id sent as a JSON integer (reCAPTCHA) instead of a string.
    pub int_id: bool,
    /// Answer also sent in `result` (reCAPTCHA Enterprise, Cloudflare Challenge).
    pub answer_in_result: bool,
    /// `user_agent` sent next to the answer.
    pub user_agent: Option<String>,
    pub answer: AnswerSpec,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Charset {
    Any { mixed_case: bool },
    Digits,
    Letters { mixed_case: bool },
    DigitsOrLetters { mixed_case: bool },
}

/// How to make the answer once the task is solved.
#[derive(Clone, Debug)]
pub(crate) enum AnswerSpec {
    Recaptcha,
    Turnstile,
    CfClearance,
    GeetestV3 { challenge: String },
    GeetestV4 { captcha_id: String },
    CaptchaFox,
    Friendly,
    Lemin,
    Text { charset: Charset, min: usize, max: usize, phrase: bool, calc: bool },
    Grid { cells: u64 },
    Bls,
}

const HEX: &[u8] = b"0123456789abcdef";
const B64URL: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/// `n` characters drawn uniformly from `alphabet` (ASCII).
fn chars(rng: &mut SplitMix64, alphabet: &[u8], n: usize) -> String {
    (0..n).map(|_| alphabet[rng.range(0, alphabet.len() as u64 - 1) as usize] as char).collect()
}

fn unix_secs() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

fn cells_answer(rng: &mut SplitMix64, cells: u64, min: u64, max: u64) -> String {
    let n = rng.range(min, max.min(cells));
    let mut picked: Vec<u64> = Vec::new();
    while (picked.len() as u64) < n {
        let c = rng.range(1, cells);
        if !picked.contains(&c) {
            picked.push(c);
        }
    }
    picked.sort_unstable();
    serde_json::to_string(&picked).unwrap_or_else(|_| "[]".into())
}

impl AnswerSpec {
    /// A realistic-looking answer; deterministic for a given RNG state.
    pub(crate) fn generate(&self, rng: &mut SplitMix64) -> String {
        match self {
            AnswerSpec::Recaptcha => {
                let n = rng.range(520, 620) as usize;
                format!("03AFcWeA{}", chars(rng, B64URL, n))
            }
            AnswerSpec::Turnstile => {
                let n = rng.range(300, 420) as usize;
                format!("0.{}.{}", chars(rng, B64URL, n), chars(rng, HEX, 64))
            }
            AnswerSpec::CfClearance => {
                let tail = chars(rng, ALNUM, 150);
                format!("{}-{}-1.2.1.1-{}", chars(rng, B64URL, 43), unix_secs(), tail)
            }
            AnswerSpec::GeetestV3 { challenge } => serde_json::json!({
                "challenge": format!("{challenge}{}", chars(rng, HEX, 2)),
                "validate": chars(rng, HEX, 32),
                "seccode": format!("{}|jordan", chars(rng, HEX, 32)),
            })
            .to_string(),
            AnswerSpec::GeetestV4 { captcha_id } => serde_json::json!({
                "captcha_id": captcha_id,
                "lot_number": chars(rng, HEX, 32),
                "pass_token": chars(rng, HEX, 64),
                "gen_time": unix_secs().to_string(),
                "captcha_output": chars(rng, B64URL, 200),
            })
            .to_string(),
            AnswerSpec::CaptchaFox => format!("cfox.{}", chars(rng, B64URL, 180)),
            AnswerSpec::Friendly => format!(
                "{}.{}.{}.{}",
                chars(rng, HEX, 32),
                chars(rng, ALNUM, 120),
                chars(rng, ALNUM, 64),
                chars(rng, ALNUM, 8)
            ),
            AnswerSpec::Lemin => serde_json::json!({
                "answer": format!("0x{}", chars(rng, b"ak0x", 40)),
                "challenge_uuid": format!(
                    "{}-{}-4{}-a{}-{}",
                    chars(rng, HEX, 8), chars(rng, HEX, 4), chars(rng, HEX, 3), chars(rng, HEX, 3), chars(rng, HEX, 12)
                ),
            })
            .to_string(),
            AnswerSpec::Text { charset, min, max, phrase, calc } => {
                if *calc {
                    return rng.range(0, 99).to_string();
                }
                let len = rng.range(*min as u64, *max as u64) as usize;
                let word = |rng: &mut SplitMix64, n: usize| -> String {
                    const LOWER: &[u8] = b"abcdefghijklmnopqrstuvwxyz";
                    const LOWER_DIGITS: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
                    const LETTERS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
                    const DIGITS: &[u8] = b"0123456789";
                    let alphabet = match *charset {
                        Charset::Any { mixed_case: false } => LOWER_DIGITS,
                        Charset::Any { mixed_case: true } => ALNUM,
                        Charset::Digits => DIGITS,
                        Charset::Letters { mixed_case } | Charset::DigitsOrLetters { mixed_case } => {
                            if matches!(charset, Charset::DigitsOrLetters { .. }) && rng.chance(0.5) {
                                DIGITS
                            } else if mixed_case {
                                LETTERS
                            } else {
                                LOWER
                            }
                        }
                    };
                    chars(rng, alphabet, n.max(1))
                };
                if *phrase && len >= 3 {
                    let first = len / 2;
                    let a = word(rng, first);
                    let b = word(rng, len - first - 1);
                    format!("{a} {b}")
                } else {
                    word(rng, len)
                }
            }
            AnswerSpec::Grid { cells } => {
                let max = if *cells == 16 { 6 } else { 4 };
                cells_answer(rng, *cells, 1, max)
            }
            AnswerSpec::Bls => cells_answer(rng, 9, 2, 4),
        }
    }
}

/// The `in.php` methods the emulator solves.
pub(crate) const KNOWN_METHODS: &[&str] = &[
    "userrecaptcha",
    "turnstile",
    "cloudflare_challenge",
    "geetest",
    "captchafox",
    "friendly_captcha",
    "lemin",
    "base64",
    "post",
    "bls",
];

/// Validates an in.php submit. `Err` is the service's error code. Methods outside
/// [`KNOWN_METHODS`] are answered by the caller (config `unknown_method`), except `hcaptcha`.
pub(crate) fn validate_submit(p: &Params) -> Result<TaskSpec, &'static str> {
    let method = p.nonempty("method").ok_or(BAD_PARAMETERS)?;
    match method {
        "userrecaptcha" => recaptcha(p),
        "turnstile" => turnstile(p),
        "cloudflare_challenge" => cloudflare_challenge(p),
        "geetest" => geetest(p),
        "captchafox" => captchafox(p),
        "friendly_captcha" => friendly(p),
        "lemin" => lemin(p),
        "base64" | "post" => image(p, method == "post"),
        "bls" => bls(p),
        // The live service answers hCaptcha submits with a server error, whatever the sitekey
        // (WD's live probe; the only observation of an unsupported method).
        "hcaptcha" => Err(SERVER_ERROR),
        _ => Err(BAD_PARAMETERS),
    }
}

/// Validates a `/solve.php` request: only normal (non-grid) images.
pub(crate) fn validate_sync_image(p: &Params) -> Result<TaskSpec, &'static str> {
    match p.nonempty("method") {
        Some("base64") | Some("post") => {
            let spec = validate_submit(p)?;
            if spec.kind == CaptchaKind::Image { Ok(spec) } else { Err(BAD_PARAMETERS) }
        }
        _ => Err(BAD_PARAMETERS),
    }
}

fn flag(p: &Params, name: &str) -> Result<bool, &'static str> {
    match p.text(name).map(str::trim) {
        None | Some("") | Some("0") | Some("false") => Ok(false),
        Some("1") | Some("true") => Ok(true),
        Some(_) => Err(BAD_PARAMETERS),
    }
}

fn pageurl(p: &Params) -> Result<(), &'static str> {
    let u = p.nonempty("pageurl").ok_or(PAGEURL)?.trim();
    let lower = u.to_ascii_lowercase();
    let rest = lower.strip_prefix("https://").or_else(|| lower.strip_prefix("http://")).ok_or(PAGEURL)?;
    let host = rest.split(['/', '?', '#']).next().unwrap_or("");
    if host.is_empty() || u.chars().any(char::is_whitespace) {
        return Err(PAGEURL);
    }
    Ok(())
}

fn token_chars(s: &str) -> bool {
    s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// Validates `proxy` / `proxytype` when present (or required). Format: `[user:pass@]host:port`.
fn proxy(p: &Params, required: bool) -> Result<(), &'static str> {
    let Some(proxy) = p.nonempty("proxy") else {
        return if required { Err(BAD_PARAMETERS) } else { Ok(()) };
    };
    let proxy = proxy.trim();
    let (creds, hostport) = match proxy.rsplit_once('@') {
        Some((c, h)) => (Some(c), h),
        None => (None, proxy),
    };
    if let Some(c) = creds {
        match c.split_once(':') {
            Some((user, pass)) if !user.is_empty() && !pass.is_empty() && !pass.contains(':') => {}
            _ => return Err(BAD_PROXY),
        }
    }
    let (host, port) = hostport.rsplit_once(':').ok_or(BAD_PROXY)?;
    let port_ok = port.parse::<u16>().map(|v| v > 0).unwrap_or(false);
    let host_ok =
        !host.is_empty() && host.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-' || b == b'_');
    if !port_ok || !host_ok || proxy.chars().any(char::is_whitespace) {
        return Err(BAD_PROXY);
    }
    match p.nonempty("proxytype") {
        None if required => Err(BAD_PARAMETERS),
        None => Ok(()),
        Some(t) if ["HTTP", "HTTPS", "SOCKS4", "SOCKS5"].contains(&t.trim().to_ascii_uppercase().as_str()) => Ok(()),
        Some(_) => Err(BAD_PROXY),
    }
}

fn user_agent(p: &Params) -> String {
    p.nonempty("userAgent").map(str::to_owned).unwrap_or_else(|| DEFAULT_USER_AGENT.to_owned())
}

fn sitekey<'a>(p: &'a Params, name: &str, ok: impl Fn(&str) -> bool) -> Result<&'a str, &'static str> {
    let k = p.nonempty(name).ok_or(GOOGLEKEY)?.trim();
    if ok(k) { Ok(k) } else { Err(WRONG_GOOGLEKEY) }
}

fn generic_sitekey(k: &str) -> bool {
    k.len() >= 8 && k.len() <= 128 && token_chars(k)
}

fn token_task(kind: CaptchaKind, sitekey: &str, answer: AnswerSpec) -> TaskSpec {
    TaskSpec {
        kind,
        sitekey: Some(sitekey.to_owned()),
        int_id: false,
        answer_in_result: false,
        user_agent: None,
        answer,
    }
}

fn recaptcha(p: &Params) -> Result<TaskSpec, &'static str> {
    // Google sitekeys are 40 characters of [A-Za-z0-9_-].
    let key = sitekey(p, "googlekey", |k| k.len() == 40 && token_chars(k))?;
    pageurl(p)?;
    let v3 = match p.text("version").map(str::trim) {
        None | Some("") | Some("v2") => false,
        Some("v3") => true,
        Some(_) => return Err(BAD_PARAMETERS),
    };
    let enterprise = flag(p, "enterprise")?;
    flag(p, "invisible")?;
    if let Some(s) = p.nonempty("min_score") {
        match s.trim().parse::<f64>() {
            Ok(v) if (0.1..=0.9).contains(&v) => {}
            _ => return Err(BAD_PARAMETERS),
        }
    }
    proxy(p, false)?;
    Ok(TaskSpec {
        kind: if v3 { CaptchaKind::RecaptchaV3 } else { CaptchaKind::RecaptchaV2 },
        sitekey: Some(key.to_owned()),
        int_id: true,
        answer_in_result: enterprise,
        user_agent: enterprise.then(|| user_agent(p)),
        answer: AnswerSpec::Recaptcha,
    })
}

fn turnstile(p: &Params) -> Result<TaskSpec, &'static str> {
    // Turnstile sitekeys look like 0x4AAAAAAA... (test keys 1x00000000000000000000AA).
    let key = sitekey(p, "sitekey", |k| {
        let b = k.as_bytes();
        k.len() >= 10 && b[0].is_ascii_digit() && b[1] == b'x' && token_chars(k)
    })?;
    pageurl(p)?;
    proxy(p, false)?;
    Ok(token_task(CaptchaKind::Turnstile, key, AnswerSpec::Turnstile))
}

fn cloudflare_challenge(p: &Params) -> Result<TaskSpec, &'static str> {
    pageurl(p)?;
    proxy(p, true)?;
    Ok(TaskSpec {
        kind: CaptchaKind::CloudflareChallenge,
        sitekey: p.nonempty("sitekey").map(str::to_owned),
        int_id: false,
        answer_in_result: true,
        user_agent: Some(user_agent(p)),
        answer: AnswerSpec::CfClearance,
    })
}

fn geetest(p: &Params) -> Result<TaskSpec, &'static str> {
    let v4 = match p.text("version").map(str::trim) {
        None | Some("") | Some("3") | Some("v3") => false,
        Some("4") | Some("v4") => true,
        Some(_) => return Err(BAD_PARAMETERS),
    };
    let gt =
        p.nonempty("gt").or_else(|| if v4 { p.nonempty("captcha_id") } else { None }).ok_or(BAD_PARAMETERS)?.trim();
    if !(gt.len() == 32 && gt.bytes().all(|b| b.is_ascii_hexdigit())) {
        return Err(WRONG_GOOGLEKEY);
    }
    let answer = if v4 {
        AnswerSpec::GeetestV4 { captcha_id: gt.to_owned() }
    } else {
        let challenge = p.nonempty("challenge").ok_or(BAD_PARAMETERS)?.trim();
        if !token_chars(challenge) {
            return Err(BAD_PARAMETERS);
        }
        AnswerSpec::GeetestV3 { challenge: challenge.to_owned() }
    };
    pageurl(p)?;
    proxy(p, false)?;
    Ok(token_task(CaptchaKind::Geetest, gt, answer))
}

fn captchafox(p: &Params) -> Result<TaskSpec, &'static str> {
    let key = sitekey(p, "sitekey", generic_sitekey)?;
    pageurl(p)?;
    proxy(p, true)?;
    let mut t = token_task(CaptchaKind::CaptchaFox, key, AnswerSpec::CaptchaFox);
    t.user_agent = Some(user_agent(p));
    Ok(t)
}

fn friendly(p: &Params) -> Result<TaskSpec, &'static str> {
    let key = sitekey(p, "sitekey", generic_sitekey)?;
    pageurl(p)?;
    match p.text("version").map(str::trim) {
        None | Some("") | Some("v1") | Some("v2") => {}
        Some(_) => return Err(BAD_PARAMETERS),
    }
    proxy(p, false)?;
    Ok(token_task(CaptchaKind::FriendlyCaptcha, key, AnswerSpec::Friendly))
}

fn lemin(p: &Params) -> Result<TaskSpec, &'static str> {
    let id = p.nonempty("captcha_id").ok_or(BAD_PARAMETERS)?.trim();
    p.nonempty("div_id").ok_or(BAD_PARAMETERS)?;
    pageurl(p)?;
    proxy(p, false)?;
    Ok(token_task(CaptchaKind::Lemin, id, AnswerSpec::Lemin))
}

fn b64_engine() -> GeneralPurpose {
    GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
    )
}

/// Decodes base64 (optionally behind a `data:...;base64,` header; line breaks ignored).
fn decode_b64(s: &str) -> Result<Vec<u8>, &'static str> {
    let s = s.trim();
    let s = match s.strip_prefix("data:") {
        Some(rest) => rest.split_once(";base64,").map(|(_, d)| d).ok_or(UPLOAD)?,
        None => s,
    };
    let cleaned: String = s.chars().filter(|c| !matches!(c, '\r' | '\n' | '\t')).collect();
    b64_engine().decode(cleaned.as_bytes()).map_err(|_| UPLOAD)
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum ImageType {
    Jpeg,
    Png,
    Gif,
}

fn image_type(data: &[u8]) -> Option<ImageType> {
    if data.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some(ImageType::Jpeg)
    } else if data.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some(ImageType::Png)
    } else if data.starts_with(b"GIF87a") || data.starts_with(b"GIF89a") {
        Some(ImageType::Gif)
    } else {
        None
    }
}

/// Width and height when the header says so (PNG IHDR, GIF screen, JPEG SOFn).
fn image_dimensions(data: &[u8]) -> Option<(u32, u32)> {
    match image_type(data)? {
        ImageType::Png => {
            let w = u32::from_be_bytes(data.get(16..20)?.try_into().ok()?);
            let h = u32::from_be_bytes(data.get(20..24)?.try_into().ok()?);
            Some((w, h))
        }
        ImageType::Gif => {
            let w = u16::from_le_bytes(data.get(6..8)?.try_into().ok()?);
            let h = u16::from_le_bytes(data.get(8..10)?.try_into().ok()?);
            Some((w as u32, h as u32))
        }
        ImageType::Jpeg => {
            let mut i = 2usize;
            while i + 3 < data.len() {
                if data[i] != 0xFF {
                    return None;
                }
                let marker = data[i + 1];
                if marker == 0xFF {
                    i += 1;
                    continue;
                }
                if marker == 0x01 || (0xD0..=0xD9).contains(&marker) {
                    i += 2;
                    continue;
                }
                let len = u16::from_be_bytes([data[i + 2], data[i + 3]]) as usize;
                let is_sof = (0xC0..=0xCF).contains(&marker) && ![0xC4, 0xC8, 0xCC].contains(&marker);
                if is_sof {
                    let h = u16::from_be_bytes(data.get(i + 5..i + 7)?.try_into().ok()?);
                    let w = u16::from_be_bytes(data.get(i + 7..i + 9)?.try_into().ok()?);
                    return Some((w as u32, h as u32));
                }
                i += 2 + len;
            }
            None
        }
    }
}

fn check_image(data: &[u8]) -> Result<(), &'static str> {
    if data.len() < MIN_IMAGE_BYTES {
        return Err(ZERO_CAPTCHA_FILESIZE);
    }
    if data.len() > MAX_IMAGE_BYTES {
        return Err(TOO_BIG_CAPTCHA_FILESIZE);
    }
    image_type(data).map(|_| ()).ok_or(IMAGE_TYPE_NOT_SUPPORTED)
}

fn image(p: &Params, multipart_file: bool) -> Result<TaskSpec, &'static str> {
    if multipart_file {
        let Some((filename, data)) = p.file("file") else {
            return Err(if p.multipart { BAD_PARAMETERS } else { UPLOAD });
        };
        if let Some(ext) = filename.and_then(|f| f.rsplit_once('.')).map(|(_, e)| e.to_ascii_lowercase())
            && !["jpg", "jpeg", "png", "gif"].contains(&ext.as_str())
        {
            return Err(WRONG_FILE_EXTENSION);
        }
        check_image(data)?;
    } else {
        let body = p.text("body").ok_or(BAD_PARAMETERS)?;
        let data = decode_b64(body)?;
        check_image(&data)?;
    }
    let grid = p.text("img_type").map(str::trim) == Some("recaptcha") || flag(p, "recaptcha")?;
    if grid {
        p.nonempty("instructions").or_else(|| p.nonempty("textinstructions")).ok_or(BAD_PARAMETERS)?;
        let cells = match p.text("grid_size").map(str::trim) {
            None | Some("") | Some("3x3") => 9,
            Some("4x4") => 16,
            Some(_) => return Err(BAD_PARAMETERS),
        };
        return Ok(TaskSpec {
            kind: CaptchaKind::Grid,
            sitekey: None,
            int_id: false,
            answer_in_result: false,
            user_agent: None,
            answer: AnswerSpec::Grid { cells },
        });
    }
    let num = |name: &str, max: u64| -> Result<u64, &'static str> {
        match p.nonempty(name).map(str::trim) {
            None => Ok(0),
            Some(v) => v.parse::<u64>().ok().filter(|n| *n <= max).ok_or(BAD_PARAMETERS),
        }
    };
    let numeric = num("numeric", 4)?;
    let min_len = num("min_len", 20)? as usize;
    let max_len = num("max_len", 20)? as usize;
    let mixed_case = flag(p, "regsense")?;
    let phrase = flag(p, "phrase")?;
    let calc = flag(p, "calc")?;
    if min_len > 0 && max_len > 0 && min_len > max_len {
        return Err(BAD_PARAMETERS);
    }
    let max = if max_len > 0 { max_len } else { min_len.max(7) };
    let min = if min_len > 0 { min_len } else { 4.min(max) };
    let charset = match numeric {
        1 => Charset::Digits,
        2 | 4 => Charset::Letters { mixed_case },
        3 => Charset::DigitsOrLetters { mixed_case },
        _ => Charset::Any { mixed_case },
    };
    Ok(TaskSpec {
        kind: CaptchaKind::Image,
        sitekey: None,
        int_id: false,
        answer_in_result: false,
        user_agent: None,
        answer: AnswerSpec::Text { charset, min, max, phrase, calc },
    })
}

fn bls(p: &Params) -> Result<TaskSpec, &'static str> {
    p.nonempty("instructions").ok_or(BAD_PARAMETERS)?;
    for i in 1..=9 {
        let v = p.nonempty(&format!("image_base64_{i}")).ok_or(BAD_PARAMETERS)?;
        if !v.trim_start().starts_with("data:image/") {
            return Err(UPLOAD);
        }
        let data = decode_b64(v)?;
        check_image(&data)?;
        if let Some((w, h)) = image_dimensions(&data)
            && (w > MAX_BLS_SIDE || h > MAX_BLS_SIDE)
        {
            return Err(IMAGE_DIMENSIONS_TOO_LARGE);
        }
    }
    Ok(TaskSpec {
        kind: CaptchaKind::Bls,
        sitekey: None,
        int_id: false,
        answer_in_result: false,
        user_agent: None,
        answer: AnswerSpec::Bls,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_core::SeedableRng as _;

    fn params(pairs: &[(&str, &str)]) -> Params {
        Params {
            pairs: pairs.iter().map(|(k, v)| (k.to_string(), Value::Text(v.to_string()))).collect(),
            multipart: false,
        }
    }

    #[test]
    fn proxy_formats() {
        let ok = |s: &str| proxy(&params(&[("proxy", s), ("proxytype", "HTTP")]), true);
        assert_eq!(ok("1.2.3.4:8080"), Ok(()));
        assert_eq!(ok("user:pass@proxy.example:3128"), Ok(()));
        assert_eq!(ok("http://1.2.3.4:8080"), Err(BAD_PROXY));
        assert_eq!(ok("1.2.3.4"), Err(BAD_PROXY));
        assert_eq!(ok("1.2.3.4:0"), Err(BAD_PROXY));
        assert_eq!(ok("@1.2.3.4:80"), Err(BAD_PROXY));
        assert_eq!(proxy(&params(&[("proxy", "1.2.3.4:80"), ("proxytype", "FTP")]), false), Err(BAD_PROXY));
        assert_eq!(proxy(&params(&[("proxy", "1.2.3.4:80")]), true), Err(BAD_PARAMETERS));
        assert_eq!(proxy(&params(&[]), true), Err(BAD_PARAMETERS));
    }

    #[test]
    fn dimensions() {
        let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR".to_vec();
        png.extend_from_slice(&1200u32.to_be_bytes());
        png.extend_from_slice(&300u32.to_be_bytes());
        assert_eq!(image_dimensions(&png), Some((1200, 300)));
        let gif = b"GIF89a\x10\x00\x20\x00";
        assert_eq!(image_dimensions(gif), Some((16, 32)));
        // SOI, APP0 (len 4), SOF0: len, precision, h=0x0102, w=0x0304
        let jpg = [0xFF, 0xD8, 0xFF, 0xE0, 0, 4, 0, 0, 0xFF, 0xC0, 0, 11, 8, 1, 2, 3, 4, 0];
        assert_eq!(image_dimensions(&jpg), Some((0x0304, 0x0102)));
        assert_eq!(image_dimensions(b"nope"), None);
    }

    #[test]
    fn text_answers_follow_constraints() {
        let mut rng = SplitMix64::seed_from_u64(3);
        for _ in 0..50 {
            let a = AnswerSpec::Text { charset: Charset::Digits, min: 5, max: 5, phrase: false, calc: false }
                .generate(&mut rng);
            assert_eq!(a.len(), 5);
            assert!(a.bytes().all(|b| b.is_ascii_digit()));
            let g = AnswerSpec::Grid { cells: 16 }.generate(&mut rng);
            let v: Vec<u64> = serde_json::from_str(&g).unwrap();
            assert!(!v.is_empty() && v.iter().all(|c| (1..=16).contains(c)));
        }
    }
}
