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
