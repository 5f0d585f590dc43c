//! Which client presented a token: compared with every client's token in constant time, so the
//! time taken says nothing about how much of a token matched, or which one.

use subtle::{ConditionallySelectable, ConstantTimeEq};

/// The index among `tokens` of the one equal to `presented`, if any (each compared in full).
pub fn find<'a>(presented: &[u8], tokens: impl Iterator<Item = &'a str>) -> Option<usize> {
    let mut found = subtle::Choice::from(0);
    let mut index = 0u64;
    for (i, token) in tokens.enumerate() {
        let equal = token.as_bytes().ct_eq(presented);
        index.conditional_assign(&(i as u64), equal);
        found |= equal;
    }
    bool::from(found).then_some(index as usize)
}
