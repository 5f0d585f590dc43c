//! Base64 for images, on the `base64` crate: a lenient decoder (standard or URL-safe alphabet,
//! padding optional, trailing bits ignored) and the canonical encoder (standard alphabet, padded).

use base64::Engine as _;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};

/// Standard alphabet; padding optional; non-zero trailing bits accepted (as peers' decoders do).
const LENIENT: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new()
        .with_decode_allow_trailing_bits(true)
        .with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// Standard, padded base64.
pub(crate) fn encode(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// Decodes standard or URL-safe base64 with or without padding; `None` for anything else.
pub(crate) fn decode(text: &str) -> Option<Vec<u8>> {
    if text.contains(['-', '_']) {
        LENIENT.decode(text.replace('-', "+").replace('_', "/")).ok()
    } else {
        LENIENT.decode(text).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_leniently_and_encodes_canonically() {
        assert_eq!(encode(b"ab"), "YWI=");
        for text in ["YWI=", "YWI", "YWJ", "YW-_", "YW+/"] {
            assert!(decode(text).is_some(), "{text}");
        }
        assert_eq!(decode("YQ"), Some(b"a".to_vec()));
        for bad in ["a", "ab=c", "abc==", "YWI==", "Y!I=", "Y WI"] {
            assert_eq!(decode(bad), None, "{bad}");
        }
    }
}
