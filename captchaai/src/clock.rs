//! Wall-clock time for the engine, optionally sped up so tests run the protocol faster while
//! keeping its ratios (pair it with the emulator's `time_scale`).

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Virtual epoch milliseconds: `start_ms + real elapsed × scale`.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    start: Instant,
    start_ms: u64,
    scale: f64,
}

impl Clock {
    /// Real time (scale 1).
    pub fn real() -> Clock {
        Clock::scaled(1.0)
    }

    /// Time running `scale` times faster than real time, starting at the current epoch time.
    pub fn scaled(scale: f64) -> Clock {
        let start_ms = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
        Clock { start: Instant::now(), start_ms, scale: if scale.is_finite() && scale > 0.0 { scale } else { 1.0 } }
    }

    /// How many times faster than real time this clock runs.
    pub fn scale(&self) -> f64 {
        self.scale
    }

    /// The current time, epoch ms (never goes backwards: it is derived from a monotonic clock).
    pub fn now_ms(&self) -> u64 {
        self.start_ms + (self.start.elapsed().as_secs_f64() * 1_000.0 * self.scale) as u64
    }

    /// The real duration of `virtual_ms`.
    pub fn real_duration(&self, virtual_ms: u64) -> Duration {
        Duration::from_secs_f64(virtual_ms as f64 / 1_000.0 / self.scale)
    }

    /// Sleeps until the clock reads at least `at_ms` (never returns earlier: the engine refuses
    /// a reply to a request sent before it was due).
    pub async fn sleep_until(&self, at_ms: u64) {
        loop {
            let now = self.now_ms();
            if now >= at_ms {
                return;
            }
            // Round up by a little real time so a second round is rare.
            tokio::time::sleep(self.real_duration(at_ms - now) + Duration::from_micros(200)).await;
        }
    }
}
