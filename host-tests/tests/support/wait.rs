//! Waiting on what a test can observe (a store, the emulator's request log, a task that ends)
//! instead of sleeping for a guessed time.

use std::time::Duration;

/// Longest a test waits for something before it fails: a guard against a hang, not a measure of
/// the machine's speed (what a test waits for happens far sooner on any machine).
pub const HANG_GUARD: Duration = Duration::from_secs(120);

/// Between two looks at the state waited on.
const LOOK_EVERY: Duration = Duration::from_millis(10);

/// Returns once `ready()` holds, looking every 10 ms; fails the test, naming `what`, if it does
/// not within [`HANG_GUARD`].
pub async fn until(what: &str, mut ready: impl AsyncFnMut() -> bool) {
    let looking = async {
        while !ready().await {
            tokio::time::sleep(LOOK_EVERY).await;
        }
    };
    if tokio::time::timeout(HANG_GUARD, looking).await.is_err() {
        panic!("waited {HANG_GUARD:?} for {what}");
    }
}

/// Returns once every key in `keys` is in `kv` (e.g. set by a guest that is running).
pub async fn until_stored(kv: &captchaai_serve::KvStore, keys: &[&str]) {
    until(&format!("{keys:?} in the store"), async || {
        for key in keys {
            if !kv.exists(key).await.expect("the store answers") {
                return false;
            }
        }
        true
    })
    .await;
}
