//! Reads byte strings from stdin, one per line as ":" + hex (so an empty string is ":"); prints
//! ":" + the hex of the UTF-8 bytes of `String::from_utf8_lossy` of each.
//! Built with plain rustc by ../utf8_lossy_agreement.py.

use std::io::{BufRead, Write};

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

fn main() {
    let stdin = std::io::stdin();
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for line in stdin.lock().lines() {
        let line = line.unwrap();
        let bytes = unhex(line.trim().strip_prefix(':').expect("line starts with ':'"));
        let text = String::from_utf8_lossy(&bytes);
        write!(out, ":").unwrap();
        for b in text.as_bytes() {
            write!(out, "{b:02x}").unwrap();
        }
        writeln!(out).unwrap();
    }
}
