//! Randomness for names and tie-breaks: solve ids, lease holders, the revision every stored
//! value carries (which makes each written value unique to its writer), the first slot tried.

/// 128 random bits as 32 lowercase hex characters (the form `crate::request::valid_id` takes).
pub fn new_id() -> anyhow::Result<String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| anyhow::anyhow!("randomness: {e}"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// The smallest and the bound of the numbers `in.php` hands out: 15 or 16 decimal digits, below
/// 2^53 so every client reads them exactly, JSON numbers included.
const NUMBERS: std::ops::Range<u64> = 100_000_000_000_000..(1 << 53);

/// A fresh id of a solve started through `in.php`: a random number from [`NUMBERS`] (the id the
/// client gets, [`number_of`]), as a solve id: 32 lowercase hex characters, zero-padded.
pub fn new_numbered_id() -> anyhow::Result<String> {
    let span = NUMBERS.end - NUMBERS.start;
    Ok(format!("{:032x}", NUMBERS.start + random_u64()? % span))
}

/// The number a client knows solve `id` by, if it was started through `in.php`.
pub fn number_of(id: &str) -> Option<String> {
    let (zeros, low) = id.split_at_checked(16)?;
    let n = u64::from_str_radix(low, 16).ok().filter(|n| NUMBERS.contains(n))?;
    (zeros.bytes().all(|b| b == b'0') && crate::request::valid_id(id)).then(|| n.to_string())
}

/// The solve id of the number a client sent, if it is one `in.php` could have handed out.
pub fn numbered_id(number: &str) -> Option<String> {
    let n: u64 = number.parse().ok().filter(|n| NUMBERS.contains(n))?;
    (number.bytes().all(|b| b.is_ascii_digit())).then(|| format!("{n:032x}"))
}

/// 64 random bits.
pub fn random_u64() -> anyhow::Result<u64> {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes).map_err(|e| anyhow::anyhow!("randomness: {e}"))?;
    Ok(u64::from_le_bytes(bytes))
}

/// The id of the solve a client token starts with an `Idempotency-Key`: HMAC-SHA256 keyed by
/// the token over the key, its first 128 bits as 32 lowercase hex characters. Only holders of
/// the token can compute it, and it reveals neither the key nor the token, so the key itself is
/// never stored.
pub fn keyed_id(token: &[u8], key: &str) -> String {
    use hmac::Mac as _;
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(token).expect("HMAC takes keys of any length");
    mac.update(key.as_bytes());
    hex(&mac.finalize().into_bytes()[..16])
}

/// The id of the next attempt at creating a keyed solve, after the request that claimed `id`
/// stopped before creating it (`crate::lifecycle`, keyed solves): SHA-256 over `id`, its first
/// 128 bits as 32 lowercase hex characters. Each attempt's id follows from the one before, so
/// the whole chain follows from the first ([`keyed_id`]).
pub fn next_attempt(id: &str) -> String {
    use sha2::Digest as _;
    hex(&sha2::Sha256::new().chain_update(b"next attempt:").chain_update(id.as_bytes()).finalize()[..16])
}

/// The id `n` attempts after `first`.
pub fn nth_attempt(first: &str, n: u32) -> String {
    (0..n).fold(first.to_owned(), |id, _| next_attempt(&id))
}

/// A request body's fingerprint: SHA-256, as 64 lowercase hex characters.
pub fn fingerprint(body: &[u8]) -> String {
    use sha2::Digest as _;
    hex(&sha2::Sha256::digest(body))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
