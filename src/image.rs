//! Images in tasks: decoding the base64 a client sends (leniently), checking the bytes against a
//! field's [`ImageLimits`], and recognising the format by its magic bytes.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};

use crate::codes::Problem;
use crate::error::{ValidationError, field_must as must, invalid_task as invalid};
use crate::registry::ImageLimits;

/// A decoded, checked image.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Image {
    /// Canonical (padded, standard alphabet) base64 of the bytes.
    pub base64: String,
    /// The format its magic bytes show.
    pub format: ImageFormat,
    /// The decoded size in bytes.
    pub len: usize,
}

impl Image {
    /// The image's bytes.
    pub fn bytes(&self) -> Vec<u8> {
        STANDARD.decode(&self.base64).unwrap_or_default()
    }
}

/// The image formats CaptchaAI accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ImageFormat {
    /// JPEG (`FF D8 FF`).
    Jpeg,
    /// PNG.
    Png,
    /// GIF87a or GIF89a.
    Gif,
}

/// The magic bytes each accepted image starts with, in the order they are tried.
const SIGNATURES: &[(&[u8], ImageFormat)] = &[
    (&[0xFF, 0xD8, 0xFF], ImageFormat::Jpeg),
    (b"\x89PNG\r\n\x1a\n", ImageFormat::Png),
    (b"GIF87a", ImageFormat::Gif),
    (b"GIF89a", ImageFormat::Gif),
];

impl ImageFormat {
    /// The MIME type (`image/png`...).
    pub fn mime(self) -> &'static str {
        match self {
            ImageFormat::Jpeg => "image/jpeg",
            ImageFormat::Png => "image/png",
            ImageFormat::Gif => "image/gif",
        }
    }

    /// The file extension used for multipart uploads (`png`...).
    pub fn extension(self) -> &'static str {
        match self {
            ImageFormat::Jpeg => "jpg",
            ImageFormat::Png => "png",
            ImageFormat::Gif => "gif",
        }
    }

    /// Every accepted start of an image's bytes and the format it shows, in the order they are
    /// tried: an image must start with one of them.
    pub fn signatures() -> &'static [(&'static [u8], ImageFormat)] {
        SIGNATURES
    }
}

/// Base64 as images arrive: standard alphabet (URL-safe is mapped to it first), padding
/// optional, non-zero trailing bits accepted (as peers' decoders do).
const LENIENT_BASE64: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new()
        .with_decode_allow_trailing_bits(true)
        .with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// Decodes and checks one base64 image (an optional `data:...;base64,` prefix and whitespace
/// are ignored).
pub(crate) fn decode(name: &str, value: Option<&str>, limits: ImageLimits) -> Result<Image, ValidationError> {
    let raw = value.ok_or_else(|| must(name, "must be a base64 string").because(Problem::NotBase64))?;
    let payload = match raw.strip_prefix("data:") {
        Some(uri) => uri.split_once(',').map(|(_, data)| data).unwrap_or(""),
        None => raw,
    };
    if payload.len() > limits.max_bytes * 2 {
        return Err(too_big(name, limits));
    }
    // Canonical standard base64 (the usual case) decodes as sent and is kept as sent: encoding
    // its bytes gives it back. Anything else (whitespace, the URL-safe alphabet, missing padding,
    // non-zero trailing bits) fails that strict decode and is compacted, decoded leniently and
    // re-encoded. Strict first spares a per-byte pre-scan of every image (~7k instructions for
    // a 720-byte image, callgrind).
    let strict = STANDARD.decode(payload.as_bytes()).ok();
    let canonical = strict.is_some();
    let bytes = match strict {
        Some(bytes) => bytes,
        None => {
            let compact: String = payload
                .chars()
                .filter(|c| !c.is_ascii_whitespace())
                .map(|c| match c {
                    '-' => '+',
                    '_' => '/',
                    c => c,
                })
                .collect();
            LENIENT_BASE64
                .decode(compact.as_bytes())
                .map_err(|_| must(name, "is not valid base64").because(Problem::NotBase64))?
        }
    };
    if bytes.len() < limits.min_bytes {
        let error = invalid(name, format!("`{name}` is smaller than {} bytes", limits.min_bytes));
        return Err(error.because(Problem::ImageTooSmall));
    }
    if bytes.len() > limits.max_bytes {
        return Err(too_big(name, limits));
    }
    let format =
        sniff(&bytes).ok_or_else(|| must(name, "must be a jpg, png or gif image").because(Problem::NotAnImage))?;
    if let (Some(max), Some((w, h))) = (limits.max_side_px, dimensions(format, &bytes))
        && (w > max || h > max)
    {
        let error = invalid(name, format!("`{name}` is {w}x{h} px; at most {max} px per side"));
        return Err(error.because(Problem::ImageTooLarge));
    }
    let base64 = if canonical { payload.to_owned() } else { STANDARD.encode(&bytes) };
    Ok(Image { base64, format, len: bytes.len() })
}

fn too_big(name: &str, limits: ImageLimits) -> ValidationError {
    invalid(name, format!("`{name}` is larger than {} bytes", limits.max_bytes)).because(Problem::ImageTooBig)
}

/// Recognises an image by its magic bytes.
pub(crate) fn sniff(bytes: &[u8]) -> Option<ImageFormat> {
    SIGNATURES.iter().find(|(magic, _)| bytes.starts_with(magic)).map(|(_, format)| *format)
}

/// Width and height from the image header, where the header can be read.
pub(crate) fn dimensions(format: ImageFormat, bytes: &[u8]) -> Option<(u32, u32)> {
    let be16 = |i: usize| Some(u32::from(u16::from_be_bytes([*bytes.get(i)?, *bytes.get(i + 1)?])));
    match format {
        ImageFormat::Png => {
            let be32 = |i: usize| Some(u32::from_be_bytes(bytes.get(i..i + 4)?.try_into().ok()?));
            Some((be32(16)?, be32(20)?))
        }
        ImageFormat::Gif => {
            let le16 = |i: usize| Some(u32::from(u16::from_le_bytes([*bytes.get(i)?, *bytes.get(i + 1)?])));
            Some((le16(6)?, le16(8)?))
        }
        ImageFormat::Jpeg => {
            let mut i = 2;
            while i + 3 < bytes.len() {
                if bytes[i] != 0xFF {
                    return None;
                }
                let marker = bytes[i + 1];
                if marker == 0xFF {
                    i += 1;
                    continue;
                }
                if (0xD0..=0xD9).contains(&marker) || marker == 0x01 {
                    i += 2;
                    continue;
                }
                let is_frame = (0xC0..=0xCF).contains(&marker) && !matches!(marker, 0xC4 | 0xC8 | 0xCC);
                if is_frame {
                    return Some((be16(i + 7)?, be16(i + 5)?));
                }
                i += 2 + usize::try_from(be16(i + 2)?).ok()?;
            }
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: ImageLimits = ImageLimits { min_bytes: 100, max_bytes: 1024 * 1024, max_side_px: None };

    #[test]
    fn images_decode_leniently_and_encode_canonically() {
        let gif = |tail: &str| {
            let mut bytes = b"GIF89a".to_vec();
            bytes.resize(119, 0); // 160 base64 characters, the last one `=`
            let text = STANDARD.encode(&bytes);
            decode("image", Some(&format!("{}{tail}", text.trim_end_matches('='))), LIMITS)
        };
        assert_eq!(gif("").unwrap().base64, gif("=").unwrap().base64, "padding is optional");
        assert!(gif("==").is_err(), "but must be right when present");
        let url_safe = "R0lGODlh-_-_".to_owned() + &"A".repeat(150);
        let decoded = decode("image", Some(&url_safe), LIMITS).unwrap();
        assert!(decoded.base64.starts_with("R0lGODlh+/+/"), "URL-safe input, standard output");
        assert_eq!(decoded.bytes().len(), decoded.len);
        for bad in ["R0lGODlh!", "a", "ab=c"] {
            assert!(decode("image", Some(bad), LIMITS).is_err(), "{bad}");
        }
    }

    proptest::proptest! {
        /// Whatever spelling the client sends (canonical, unpadded, wrapped in lines, URL-safe,
        /// a data URI, non-zero trailing bits), the stored image is the canonical base64 of its
        /// bytes.
        #[test]
        fn every_spelling_of_an_image_stores_its_canonical_base64(
            tail in proptest::collection::vec(proptest::prelude::any::<u8>(), 94..160),
            unpadded in proptest::prelude::any::<bool>(),
            wrap in proptest::prelude::any::<bool>(),
            url_safe in proptest::prelude::any::<bool>(),
            data_uri in proptest::prelude::any::<bool>(),
            trailing_bits in proptest::prelude::any::<bool>(),
        ) {
            let bytes = [b"GIF89a".as_slice(), &tail].concat();
            let canonical = STANDARD.encode(&bytes);
            let mut text = canonical.clone();
            if unpadded {
                text = text.trim_end_matches('=').to_owned();
            }
            if trailing_bits && let Some(head) = text.strip_suffix("A=") {
                text = format!("{head}B="); // a non-zero bit past the last byte
            }
            if url_safe {
                text = text.replace('+', "-").replace('/', "_");
            }
            if wrap {
                text = text.as_bytes().chunks(76).map(|c| std::str::from_utf8(c).unwrap()).collect::<Vec<_>>().join("\r\n");
            }
            if data_uri {
                text = format!("data:image/gif;base64,{text}");
            }
            let decoded = decode("image", Some(&text), LIMITS).unwrap();
            proptest::prop_assert_eq!(&decoded.base64, &canonical, "{}", text);
            proptest::prop_assert_eq!(decoded.len, bytes.len());
        }
    }
}
