//! Throwaway guest: `take-string` and `take-bytes` return the body's length in bytes.
//! Built for wasm32-unknown-unknown and wrapped by `componentize` (no imports).

wit_bindgen::generate!({ world: "bench", path: "../wit" });

struct Component;

impl Guest for Component {
    fn take_string(body: String) -> u32 {
        body.len() as u32
    }

    fn take_bytes(body: Vec<u8>) -> u32 {
        body.len() as u32
    }
}

export!(Component);
