//! Endpoint semantics: in.php, res.php and solve.php on top of [`State`].

use std::net::IpAddr;

use serde_json::{Value as Json, json};

use super::captcha::{KNOWN_METHODS, Params, codes, validate_submit, validate_sync_image};
use super::config::UnknownMethod;
use super::state::{Outcome, State};

/// A protocol reply in both of the service's formats.
#[derive(Clone, Debug)]
pub(crate) struct Reply {
    /// Body with `json=1`.
    pub json: Json,
    /// Body without `json=1` (2captcha plain text).
    pub text: String,
    /// `OK`, an error code or `CAPCHA_NOT_READY` (for the log).
    pub code: String,
    /// Task id assigned (in.php).
    pub task_id: Option<u64>,
}

impl Reply {
    pub(crate) fn error(code: &str) -> Self {
        Reply {
            json: json!({"status": 0, "request": code}),
            text: code.to_owned(),
            code: code.to_owned(),
            task_id: None,
        }
    }

    fn ok(request: Json, extra: Vec<(&str, Json)>) -> Self {
        let text = match &request {
            Json::String(s) => format!("OK|{s}"),
            other => format!("OK|{other}"),
        };
        let mut obj = serde_json::Map::new();
        obj.insert("status".into(), json!(1));
        obj.insert("request".into(), request);
        for (k, v) in extra {
            obj.insert(k.into(), v);
        }
        Reply { json: Json::Object(obj), text, code: "OK".into(), task_id: None }
    }

    /// (content type, body) in the format the client asked for.
    pub(crate) fn render(&self, json: bool) -> (&'static str, String) {
        if json {
            ("application/json", self.json.to_string())
        } else {
            ("text/plain; charset=utf-8", self.text.clone())
        }
    }
}

/// `/in.php`: authenticate, validate, then take a thread (or queue, or refuse: config).
pub(crate) fn in_php(st: &mut State, ip: IpAddr, p: &Params, now: u64) -> Reply {
    let acct = match st.authenticate(ip, p.text("key"), now) {
        Ok(a) => a,
        Err(code) => return Reply::error(code),
    };
    if let Some(method) = p.nonempty("method").map(str::trim) {
        let cfg = st.config();
        let unsupported = cfg.unsupported_methods.iter().any(|m| m == method);
        if method != "hcaptcha" && (unsupported || !KNOWN_METHODS.contains(&method)) {
            return Reply::error(match cfg.unknown_method {
                UnknownMethod::ServerError => codes::SERVER_ERROR,
                UnknownMethod::BadParameters => codes::BAD_PARAMETERS,
            });
        }
    }
    let spec = match validate_submit(p) {
        Ok(s) => s,
        Err(code) => return Reply::error(code),
    };
    let int_id = spec.int_id;
    match st.submit(acct, spec, now) {
        Ok(id) => {
            // The live API sends reCAPTCHA task ids as JSON integers, other ids as strings.
            let request = if int_id { json!(id) } else { json!(id.to_string()) };
            let mut r = Reply::ok(request, Vec::new());
            r.task_id = Some(id);
            r
        }
        Err(code) => Reply::error(code),
    }
}

/// `/res.php`: action=get | threadsinfo | getbalance.
pub(crate) fn res_php(st: &mut State, ip: IpAddr, p: &Params, now: u64) -> Reply {
    let acct = match st.authenticate(ip, p.text("key"), now) {
        Ok(a) => a,
        Err(code) => return Reply::error(code),
    };
    match p.text("action").map(str::trim) {
        None | Some("") => Reply::error(codes::EMPTY_ACTION),
        Some("get") => poll(st, acct, p, now),
        Some("threadsinfo") => {
            let t = st.threads_info(acct);
            // Observed shape: `threads` as a string, `working_threads` as a number.
            let body = json!({"status": 1, "threads": t.threads.to_string(), "working_threads": t.working_threads});
            let text = json!({"threads": t.threads.to_string(), "working_threads": t.working_threads}).to_string();
            Reply { json: body, text, code: "OK".into(), task_id: None }
        }
        Some("getbalance") => {
            let bal = st.account_mut(acct).account.balance;
            let n = serde_json::Number::from_f64(bal).map(Json::Number).unwrap_or(json!(0.0));
            Reply { text: n.to_string(), json: json!({"status": 1, "request": n}), code: "OK".into(), task_id: None }
        }
        Some(_) => Reply::error(codes::BAD_PARAMETERS),
    }
}

fn poll(st: &mut State, acct: usize, p: &Params, now: u64) -> Reply {
    let Some(id) = p.text("id").map(str::trim).filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
    else {
        return Reply::error(codes::WRONG_ID_FORMAT);
    };
    let Ok(id) = id.parse::<u64>() else {
        return Reply::error(codes::WRONG_CAPTCHA_ID);
    };
    let Some(task) = st.task_for_poll(acct, id) else {
        return Reply::error(codes::WRONG_CAPTCHA_ID);
    };
    task.polls = task.polls.saturating_add(1);
    if now < task.ready_at {
        return Reply::error(codes::NOT_READY);
    }
    match &task.outcome {
        Outcome::Unsolvable => Reply::error(codes::CAPTCHA_UNSOLVABLE),
        Outcome::Solved(answer) => {
            let mut extra = Vec::new();
            if task.spec.answer_in_result {
                // reCAPTCHA Enterprise / Cloudflare Challenge: the answer in `result` too.
                extra.push(("result", json!(answer)));
            }
            if let Some(ua) = &task.spec.user_agent {
                extra.push(("user_agent", json!(ua)));
            }
            Reply::ok(json!(answer), extra)
        }
    }
}

/// `/solve.php` outcome: either an immediate reply or an image being solved synchronously.
pub(crate) enum SyncSolve {
    Now(Reply),
    /// Holds a thread of `acct` for `delay_ms` (virtual), then replies.
    After {
        acct: usize,
        delay_ms: u64,
        reply: Reply,
    },
}

/// `/solve.php`: a normal image answered in the same request (holds a thread meanwhile).
pub(crate) fn solve_php(st: &mut State, ip: IpAddr, p: &Params, now: u64) -> SyncSolve {
    let acct = match st.authenticate(ip, p.text("key"), now) {
        Ok(a) => a,
        Err(code) => return SyncSolve::Now(Reply::error(code)),
    };
    let spec = match validate_sync_image(p) {
        Ok(s) => s,
        Err(code) => return SyncSolve::Now(Reply::error(code)),
    };
    match st.sync_acquire(acct, &spec) {
        Ok((delay_ms, answer)) => SyncSolve::After { acct, delay_ms, reply: Reply::ok(json!(answer), Vec::new()) },
        Err(code) => SyncSolve::Now(Reply::error(code)),
    }
}
