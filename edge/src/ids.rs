//! Randomness for names and tie-breaks: solve ids, lease holders, the revision every stored
//! value carries (which makes each written value unique to its writer), the first slot tried.

/// 128 random bits as 32 lowercase hex characters (the form `crate::request::valid_id` takes).
pub fn new_id() -> anyhow::Result<String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| anyhow::anyhow!("randomness: {e}"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
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
    hex(&hmac_sha256(token, key.as_bytes())[..16])
}

/// A request body's fingerprint: SHA-256, as 64 lowercase hex characters.
pub fn fingerprint(body: &[u8]) -> String {
    use sha2::Digest as _;
    hex(&sha2::Sha256::digest(body))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// HMAC-SHA256 (RFC 2104).
fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    use sha2::{Digest as _, Sha256};
    const BLOCK: usize = 64;
    let mut block = [0u8; BLOCK];
    if key.len() > BLOCK {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let pad = |byte: u8| block.map(|b| b ^ byte);
    let inner = Sha256::new().chain_update(pad(0x36)).chain_update(message).finalize();
    Sha256::new().chain_update(pad(0x5c)).chain_update(inner).finalize().into()
}
