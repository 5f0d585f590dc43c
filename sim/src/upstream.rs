//! A seeded, IO-free fake CaptchaAI with faults.
//!
//! Each solve gets its own [`Upstream`], built from the solve's seed. It is a pure function of
//! that seed and the requests it sees (kind, send time, task id), so the engine's driver and
//! the oracle each build one from the same seed and get the same answers as long as they send
//! the same requests at the same times: any divergence changes what they see and shows up as a
//! different outcome.
//!
//! What it models:
//! - a per-solve *condition* (with probability `fault_rate`): busy threads (`ERROR_ZERO_BALANCE`
//!   until some time, `threadsinfo` all busy), no plan (`ERROR_ZERO_BALANCE` with free or zero
//!   threads), an IP ban (`IP_BANNED` to everything), a permanent submit code, silent queueing
//!   (the task stays `CAPCHA_NOT_READY` much longer), `ERROR_CAPTCHA_UNSOLVABLE` for the first
//!   tasks, a lost task (`ERROR_WRONG_CAPTCHA_ID`), rate limiting;
//! - per-reply *faults* (each reply with probability `fault_rate`): HTML 502 and other unreadable
//!   replies, transient server codes, dropped replies (the host times out), slow replies (late,
//!   or past the timeout), transport errors (connect, broken);
//! - varied renderings of every reply: JSON with string or integer ids, `OK|...` text, bare codes
//!   despite `json=1`, both not-ready spellings, codes under HTTP 500, the key echoed in
//!   `error_text` or an HTML title (the engine must redact it).

use captchaai_engine::{RequestKind, TransportError};

use crate::rng::Rng;

/// What a reply means, independently of how it is written on the wire. The oracle reads this;
/// the engine gets [`render`]ed bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Meaning {
    /// `in.php` accepted the task.
    TaskId(u64),
    NotReady,
    Answer(String),
    /// A wire code.
    Code(&'static str),
    /// Neither an answer nor a code (HTML error page, empty body, an answer under HTTP 5xx).
    Unreadable,
    Threads {
        threads: u32,
        working: u32,
    },
    /// The host reports this transport error.
    Transport(TransportError),
    /// No reply within the request's timeout: the host reports `Timeout` at send + timeout.
    Timeout,
}

/// What comes back for one request: after how long, and what.
#[derive(Clone, Debug)]
pub struct Delivery {
    pub after_ms: u64,
    pub meaning: Meaning,
    /// Which wire form [`render`] uses.
    pub variant: u8,
}

/// The per-solve condition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Condition {
    Normal,
    /// Every thread is busy until `until` (epoch ms): submits get `ERROR_ZERO_BALANCE`,
    /// `threadsinfo` shows 5 of 5 working; afterwards 2 of 5.
    Busy {
        until: u64,
    },
    /// No active plan: submits get `ERROR_ZERO_BALANCE`, `threadsinfo` shows zero threads or
    /// free threads.
    NoPlan {
        zero_threads: bool,
    },
    /// `IP_BANNED` to every request.
    Banned,
    /// A permanent code for every submit.
    Refused(&'static str),
    /// Silent queueing: every task stays not-ready this much longer.
    SilentQueue {
        extra_ms: u64,
    },
    /// The first `tasks` tasks end `ERROR_CAPTCHA_UNSOLVABLE`.
    Unsolvable {
        tasks: u32,
    },
    /// Polls get `ERROR_WRONG_CAPTCHA_ID` (the task expired upstream).
    LostTask,
    /// The first `submits` submits get this rate-limit code.
    Throttled {
        submits: u32,
        code: &'static str,
    },
}

/// Counters of what the upstream did (for reports and coverage tests).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Faults {
    pub unreadable: u64,
    pub server_code: u64,
    pub dropped: u64,
    pub slow: u64,
    pub slow_past_timeout: u64,
    pub transport: u64,
    pub key_echoed: u64,
    pub plain_text_code: u64,
}

impl Faults {
    pub fn add(&mut self, other: &Faults) {
        self.unreadable += other.unreadable;
        self.server_code += other.server_code;
        self.dropped += other.dropped;
        self.slow += other.slow;
        self.slow_past_timeout += other.slow_past_timeout;
        self.transport += other.transport;
        self.key_echoed += other.key_echoed;
        self.plain_text_code += other.plain_text_code;
    }

    pub fn total(&self) -> u64 {
        self.unreadable + self.server_code + self.dropped + self.slow + self.transport
    }
}

const PERMANENT_SUBMIT: &[&str] = &[
    "ERROR_BAD_PARAMETERS",
    "ERROR_PAGEURL",
    "ERROR_KEY_DOES_NOT_EXIST",
    "ERROR_WRONG_USER_KEY",
    "ERROR_BAD_TOKEN_OR_PAGEURL",
    "ERROR_BAD_PROXY",
    "ERROR_SOMETHING_NEW",
];
const THROTTLE: &[&str] = &["ERROR: 1001", "MAX_USER_TURN", "ERROR_TOO_MUCH_REQUESTS", "ERROR_NO_SLOT_AVAILABLE"];
const SERVER_CODES: &[&str] = &["ERROR_SERVER_ERROR", "ERROR_INTERNAL_SERVER_ERROR", "ERROR_PROXY_CONNECTION_FAILED"];

struct FakeTask {
    id: u64,
    ready_at: u64,
    unsolvable: bool,
}

/// One solve's fake CaptchaAI.
pub struct Upstream {
    rng: Rng,
    fault_rate: f64,
    pub condition: Condition,
    tasks: Vec<FakeTask>,
    next_task: u64,
    submits: u32,
    pub faults: Faults,
}

impl Upstream {
    /// The upstream for one solve starting at `start` (epoch ms).
    pub fn new(seed: u64, fault_rate: f64, start: u64) -> Upstream {
        let mut rng = Rng::new(seed);
        let condition = if rng.chance(fault_rate) {
            match rng.below(9) {
                0 => Condition::Busy { until: start + rng.range(1_000, 150_000) },
                1 => Condition::NoPlan { zero_threads: rng.chance(0.5) },
                2 => Condition::Banned,
                3 => Condition::Refused(PERMANENT_SUBMIT[rng.below(PERMANENT_SUBMIT.len() as u64) as usize]),
                4 | 5 => Condition::SilentQueue { extra_ms: rng.range(20_000, 200_000) },
                6 => Condition::Unsolvable { tasks: rng.range(1, 3) as u32 },
                7 => Condition::LostTask,
                _ => Condition::Throttled {
                    submits: rng.range(1, 4) as u32,
                    code: THROTTLE[rng.below(THROTTLE.len() as u64) as usize],
                },
            }
        } else {
            Condition::Normal
        };
        let next_task = rng.range(1_000_000, 9_000_000_000);
        Upstream { rng, fault_rate, condition, tasks: Vec::new(), next_task, submits: 0, faults: Faults::default() }
    }

    /// What happens to a `kind` request sent at `sent_at` (for polls: with task id `task_id`),
    /// seen by a host that times requests out after `timeout_ms`.
    pub fn respond(&mut self, kind: RequestKind, sent_at: u64, task_id: Option<&str>, timeout_ms: u64) -> Delivery {
        let variant = self.rng.below(256) as u8;
        let latency = self.rng.range(20, 1_500);
        if self.rng.chance(self.fault_rate) {
            match self.rng.below(6) {
                0 => {
                    self.faults.unreadable += 1;
                    return Delivery { after_ms: latency, meaning: Meaning::Unreadable, variant };
                }
                1 => {
                    self.faults.server_code += 1;
                    let code = self.rng.pick(SERVER_CODES);
                    return Delivery { after_ms: latency, meaning: Meaning::Code(code), variant };
                }
                2 => {
                    // Dropped: processed upstream (a submit creates a task), the reply is lost.
                    self.faults.dropped += 1;
                    self.process(kind, sent_at, task_id);
                    return Delivery { after_ms: timeout_ms, meaning: Meaning::Timeout, variant };
                }
                3 => {
                    let error = if self.rng.chance(0.5) { TransportError::Connect } else { TransportError::Broken };
                    self.faults.transport += 1;
                    if error == TransportError::Broken {
                        self.process(kind, sent_at, task_id);
                    }
                    let after = self.rng.range(1, timeout_ms / 2);
                    return Delivery { after_ms: after, meaning: Meaning::Transport(error), variant };
                }
                _ => {
                    // Slow: the normal reply, late; past the timeout the host gives up first.
                    self.faults.slow += 1;
                    let slow = self.rng.range(timeout_ms / 2, timeout_ms * 2);
                    let meaning = self.process(kind, sent_at, task_id);
                    if slow > timeout_ms {
                        self.faults.slow_past_timeout += 1;
                        return Delivery { after_ms: timeout_ms, meaning: Meaning::Timeout, variant };
                    }
                    return Delivery { after_ms: slow, meaning, variant };
                }
            }
        }
        let meaning = self.process(kind, sent_at, task_id);
        Delivery { after_ms: latency, meaning, variant }
    }

    /// The upstream's own logic for a request that reaches it.
    fn process(&mut self, kind: RequestKind, sent_at: u64, task_id: Option<&str>) -> Meaning {
        if self.condition == Condition::Banned {
            return Meaning::Code("IP_BANNED");
        }
        match kind {
            RequestKind::Submit => {
                self.submits += 1;
                match self.condition {
                    Condition::Refused(code) => return Meaning::Code(code),
                    Condition::NoPlan { .. } => return Meaning::Code("ERROR_ZERO_BALANCE"),
                    Condition::Busy { until } if sent_at < until => return Meaning::Code("ERROR_ZERO_BALANCE"),
                    Condition::Throttled { submits, code } if self.submits <= submits => return Meaning::Code(code),
                    _ => {}
                }
                let id = self.next_task;
                self.next_task += self.rng.range(1, 1_000);
                let mut work = self.rng.range(3_000, 45_000);
                if let Condition::SilentQueue { extra_ms } = self.condition {
                    work += extra_ms;
                }
                let unsolvable =
                    matches!(self.condition, Condition::Unsolvable { tasks } if self.tasks.len() < tasks as usize);
                self.tasks.push(FakeTask { id, ready_at: sent_at + work, unsolvable });
                Meaning::TaskId(id)
            }
            RequestKind::Poll => {
                if self.condition == Condition::LostTask {
                    return Meaning::Code("ERROR_WRONG_CAPTCHA_ID");
                }
                let id = task_id.and_then(|id| id.parse::<u64>().ok());
                let Some(task) = self.tasks.iter().find(|t| Some(t.id) == id) else {
                    return Meaning::Code("ERROR_WRONG_CAPTCHA_ID");
                };
                if sent_at < task.ready_at {
                    Meaning::NotReady
                } else if task.unsolvable {
                    Meaning::Code("ERROR_CAPTCHA_UNSOLVABLE")
                } else {
                    Meaning::Answer(format!("03AFcWeA{}x{}", task.id, task.ready_at % 9973))
                }
            }
            RequestKind::ThreadsInfo | RequestKind::Balance => match self.condition {
                Condition::NoPlan { zero_threads: true } => Meaning::Threads { threads: 0, working: 0 },
                Condition::NoPlan { zero_threads: false } => Meaning::Threads { threads: 5, working: 0 },
                Condition::Busy { until } if sent_at < until => Meaning::Threads { threads: 5, working: 5 },
                _ => Meaning::Threads { threads: 5, working: 2 },
            },
            // Solves never report on an answer (the endpoint's report requests are not a solve's).
            RequestKind::Report => Meaning::Code("REPORT_NOT_RECORDED"),
            // A request kind this fake does not model (`RequestKind` may grow).
            _ => Meaning::Unreadable,
        }
    }
}

/// The wire form of a reply: HTTP status and body. `key` is the account's key, which an
/// adversarial upstream echoes in some error texts and pages (the engine must never pass it on).
pub fn render(meaning: &Meaning, variant: u8, key: &str, faults: &mut Faults) -> (u16, String) {
    let v = variant % 4;
    match meaning {
        Meaning::TaskId(id) => match v {
            0 => (200, format!(r#"{{"status":1,"request":"{id}"}}"#)),
            1 => (200, format!(r#"{{"status":1,"request":{id}}}"#)),
            2 => (200, format!("OK|{id}")),
            _ => (200, format!(r#"{{"request":"{id}","status":"1","error_text":""}}"#)),
        },
        Meaning::NotReady => match v {
            0 => (200, r#"{"status":0,"request":"CAPCHA_NOT_READY"}"#.to_owned()),
            1 => (200, "CAPCHA_NOT_READY".to_owned()),
            2 => (200, r#"{"status":0,"request":"CAPTCHA_NOT_READY"}"#.to_owned()),
            _ => (200, "\u{feff}CAPCHA_NOT_READY\r\n".to_owned()),
        },
        Meaning::Answer(token) => match v {
            0 | 3 => (200, format!(r#"{{"status":1,"request":"{token}"}}"#)),
            1 => (200, format!("OK|{token}")),
            _ => (200, format!(r#"{{"status":"1","request":"CAPCHA_NOT_READY","result":"{token}"}}"#)),
        },
        Meaning::Code(code) => {
            // Some upstreams echo the request: the key in error_text must be redacted.
            let echo = variant & 0x30 == 0x30;
            if echo {
                faults.key_echoed += 1;
            }
            let text = if echo { format!("rejected request key={key}") } else { "see docs".to_owned() };
            match v {
                0 => (200, format!(r#"{{"status":0,"request":"{code}","error_text":"{text}"}}"#)),
                1 => {
                    faults.plain_text_code += 1;
                    (200, (*code).to_owned())
                }
                2 => (500, format!(r#"{{"status":0,"request":"{code}","error_text":"{text}"}}"#)),
                _ => {
                    faults.plain_text_code += 1;
                    (403, format!("{code}\n"))
                }
            }
        }
        Meaning::Unreadable => match variant % 6 {
            0 => (502, "<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>".to_owned()),
            1 => (200, String::new()),
            2 => (503, "Service Temporarily Unavailable".to_owned()),
            3 => (500, r#"{"status":1,"request":"03AFcWeA-under-a-500"}"#.to_owned()),
            4 => {
                faults.key_echoed += 1;
                (502, format!("<html><title>upstream error for key={key}</title></html>"))
            }
            _ => (200, r#"{"status":1,"request":""}"#.to_owned()),
        },
        Meaning::Threads { threads, working } => match v {
            0 | 2 => (200, format!(r#"{{"status":1,"threads":{threads},"working_threads":{working}}}"#)),
            _ => (200, format!(r#"{{"status":1,"threads":"{threads}","working_threads":"{working}"}}"#)),
        },
        Meaning::Transport(_) | Meaning::Timeout => (0, String::new()),
    }
}
