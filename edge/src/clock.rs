//! Wall-clock time, as the engine takes it (epoch ms), and sleeping until a moment.

/// The time, epoch ms.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// Sleeps until `at` (epoch ms); waking early is impossible, waking late harmless.
pub async fn sleep_until(at: u64) {
    loop {
        let now = now_ms();
        if now >= at {
            return;
        }
        spin_sdk::time::sleep(std::time::Duration::from_millis(at - now)).await;
    }
}

/// Sleeps `ms` milliseconds.
pub async fn sleep_ms(ms: u64) {
    spin_sdk::time::sleep(std::time::Duration::from_millis(ms)).await;
}
