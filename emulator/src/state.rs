//! Emulator state: accounts and thread accounting, tasks, bans, fault queue, request log.
//! Time is virtual milliseconds since start; everything time-dependent is evaluated lazily
//! against the `now` passed in.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet, VecDeque};
use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use super::captcha::{TaskSpec, codes};
use super::config::{Account, BusyThreads, EmulatorConfig, Fault, Faults, NoPlan};
use super::log::RecordedRequest;
use super::rng::{self, Draw as _, SplitMix64};
use super::vocab::{CaptchaKind, key_well_formed};

const STREAM_TASK: u64 = 1;
const STREAM_IDS: u64 = 2;
const STREAM_FAULTS: u64 = 3;

/// An account's thread picture, as threadsinfo reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadsInfo {
    /// Plan cap.
    pub threads: u32,
    /// Threads in use: unfinished tasks + threads occupied by "other clients" + `/solve.php`
    /// requests in progress.
    pub working_threads: u32,
    /// Whether the plan is active.
    pub plan_active: bool,
    /// Tasks accepted while every thread was busy and still waiting for one
    /// ([`crate::BusyThreads::SilentQueue`]; never in threadsinfo replies).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub queued: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// Where a task is at a given moment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskState {
    /// Still being solved, or queued for a thread (`CAPCHA_NOT_READY`).
    Pending,
    /// Answer available.
    Solved,
    /// Ends as `ERROR_CAPTCHA_UNSOLVABLE`.
    Unsolvable,
}

/// A task as the emulator sees it (for test assertions).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TaskInfo {
    /// Task id.
    pub id: u64,
    /// Captcha family.
    pub kind: CaptchaKind,
    /// Virtual ms at submit.
    pub submitted_at_ms: u64,
    /// Virtual ms at which it is solved / unsolvable (`u64::MAX` while queued for a thread).
    pub ready_at_ms: u64,
    /// Virtual ms at which it got a thread (`None` while queued; equal to `submitted_at_ms`
    /// unless it was queued).
    pub started_at_ms: Option<u64>,
    /// State at the time of the call.
    pub state: TaskState,
    /// The answer it gives (or will give), `None` for unsolvable tasks.
    pub answer: Option<String>,
    /// `user_agent` sent with the answer, if any.
    pub user_agent: Option<String>,
    /// How many `action=get` polls it received.
    pub polls: u32,
}

/// Counters since start.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stats {
    /// Protocol requests received (in.php / res.php / solve.php / unknown paths).
    pub requests: u64,
    /// Tasks accepted by in.php.
    pub tasks_created: u64,
    /// Tasks currently pending.
    pub tasks_pending: u64,
    /// Tasks that ended (or will end) solved, among those created.
    pub tasks_solved: u64,
    /// Tasks that ended (or will end) unsolvable, among those created.
    pub tasks_unsolvable: u64,
    /// `/solve.php` images answered.
    pub sync_solves: u64,
    /// Faults applied (random or forced).
    pub faults: u64,
    /// Bans started.
    pub bans: u64,
    /// Request-log entries dropped because of `log_limit`.
    pub log_dropped: u64,
    /// Tasks accepted while every thread was busy (silent-queue mode), since start.
    pub tasks_queued: u64,
}

pub(crate) struct AccountState {
    pub account: Account,
    pub task_busy: u32,
    pub external_busy: u32,
    pub sync_busy: u32,
    /// Silent-queue mode: accepted task ids waiting for a thread, oldest first.
    pub queue: VecDeque<u64>,
}

impl AccountState {
    fn working(&self) -> u32 {
        self.task_busy.saturating_add(self.external_busy).saturating_add(self.sync_busy)
    }
}

#[derive(Clone, Debug)]
pub(crate) enum Outcome {
    Solved(String),
    Unsolvable,
}

pub(crate) struct Task {
    pub account: usize,
    pub spec: TaskSpec,
    pub submitted_at: u64,
    /// `u64::MAX` while queued for a thread.
    pub ready_at: u64,
    pub started_at: Option<u64>,
    pub solve_ms: u64,
    pub outcome: Outcome,
    pub polls: u32,
}

#[derive(Default)]
struct ClientState {
    bad_keys: u32,
    banned_until: u64,
}

pub(crate) struct State {
    seed: u64,
    cfg: EmulatorConfig,
    unsolvable: HashSet<String>,
    accounts: Vec<AccountState>,
    by_key: HashMap<String, usize>,
    tasks: HashMap<u64, Task>,
    /// (ready_at, task id, account): releases the task's thread.
    busy_heap: BinaryHeap<Reverse<(u64, u64, usize)>>,
    /// (expire_at, task id): forgets the task.
    expire_heap: BinaryHeap<Reverse<(u64, u64)>>,
    next_id: u64,
    id_rng: SplitMix64,
    clients: HashMap<IpAddr, ClientState>,
    pub faults: Faults,
    pub forced: VecDeque<Fault>,
    fault_rng: SplitMix64,
    log: VecDeque<RecordedRequest>,
    next_seq: u64,
    pub stats: Stats,
}

impl State {
    pub(crate) fn new(cfg: &EmulatorConfig) -> Self {
        let mut s = State {
            seed: cfg.seed,
            cfg: cfg.clone(),
            unsolvable: cfg.unsolvable_sitekeys.iter().cloned().collect(),
            accounts: Vec::new(),
            by_key: HashMap::new(),
            tasks: HashMap::new(),
            busy_heap: BinaryHeap::new(),
            expire_heap: BinaryHeap::new(),
            next_id: 73_000_000_000 + rng::stream(cfg.seed, STREAM_IDS, 0).range(0, 999_999_999),
            id_rng: rng::stream(cfg.seed, STREAM_IDS, 1),
            clients: HashMap::new(),
            faults: cfg.faults,
            forced: VecDeque::new(),
            fault_rng: rng::stream(cfg.seed, STREAM_FAULTS, 0),
            log: VecDeque::new(),
            next_seq: 0,
            stats: Stats::default(),
        };
        for a in &cfg.accounts {
            s.upsert_account(a.clone());
        }
        s
    }

    /// Adds an account or replaces its plan fields (busy counts are kept).
    pub(crate) fn upsert_account(&mut self, a: Account) {
        match self.by_key.get(&a.key) {
            Some(&i) => self.accounts[i].account = a,
            None => {
                self.by_key.insert(a.key.clone(), self.accounts.len());
                self.accounts.push(AccountState {
                    account: a,
                    task_busy: 0,
                    external_busy: 0,
                    sync_busy: 0,
                    queue: VecDeque::new(),
                });
            }
        }
    }

    pub(crate) fn config(&self) -> &EmulatorConfig {
        &self.cfg
    }

    pub(crate) fn known_keys(&self) -> impl Iterator<Item = &str> {
        self.accounts.iter().map(|a| a.account.key.as_str())
    }

    pub(crate) fn account_index(&self, key: &str) -> Option<usize> {
        self.by_key.get(key).copied()
    }

    pub(crate) fn account_mut(&mut self, i: usize) -> &mut AccountState {
        &mut self.accounts[i]
    }

    /// Applies everything due by `now`, in time order: thread releases (each handing its thread
    /// to the account's oldest queued task at that moment) and task expiry.
    pub(crate) fn advance(&mut self, now: u64) {
        while let Some(&Reverse((at, _id, acct))) = self.busy_heap.peek() {
            if at > now {
                break;
            }
            self.busy_heap.pop();
            let a = &mut self.accounts[acct];
            a.task_busy = a.task_busy.saturating_sub(1);
            self.stats.tasks_pending = self.stats.tasks_pending.saturating_sub(1);
            self.start_queued(acct, at);
        }
        while let Some(&Reverse((at, id))) = self.expire_heap.peek() {
            if at > now {
                break;
            }
            self.expire_heap.pop();
            self.tasks.remove(&id);
        }
    }

    /// `Err(IP_BANNED)` while `ip` is banned.
    pub(crate) fn check_ban(&self, ip: IpAddr, now: u64) -> Result<(), &'static str> {
        match self.clients.get(&ip) {
            Some(c) if now < c.banned_until => Err(codes::IP_BANNED),
            _ => Ok(()),
        }
    }

    /// Resolves the request's key to an account; bad keys (and keys of accounts without a
    /// plan answered as [`NoPlan::KeyDoesNotExist`]) count towards a ban.
    pub(crate) fn authenticate(&mut self, ip: IpAddr, key: Option<&str>, now: u64) -> Result<usize, &'static str> {
        self.check_ban(ip, now)?;
        let key = key.map(str::trim).unwrap_or("");
        let err = if !key_well_formed(key) {
            codes::WRONG_USER_KEY
        } else if let Some(&i) = self.by_key.get(key) {
            let a = &self.accounts[i].account;
            if a.plan_active || a.no_plan != NoPlan::KeyDoesNotExist {
                return Ok(i);
            }
            codes::KEY_DOES_NOT_EXIST
        } else {
            codes::KEY_DOES_NOT_EXIST
        };
        if self.cfg.ban_after_bad_keys > 0 {
            let c = self.clients.entry(ip).or_default();
            c.bad_keys += 1;
            if c.bad_keys >= self.cfg.ban_after_bad_keys {
                c.bad_keys = 0;
                c.banned_until = now.saturating_add(self.cfg.ban_ms);
                self.stats.bans += 1;
            }
        }
        Err(err)
    }

    /// The account's thread picture (what threadsinfo reports: `threads` 0 and
    /// `working_threads` 0 for a planless account answered as [`NoPlan::ZeroThreads`]).
    pub(crate) fn threads_info(&self, acct: usize) -> ThreadsInfo {
        let a = &self.accounts[acct];
        let queued = a.queue.len().try_into().unwrap_or(u32::MAX);
        if !a.account.plan_active && a.account.no_plan == NoPlan::ZeroThreads {
            return ThreadsInfo { threads: 0, working_threads: 0, plan_active: false, queued };
        }
        ThreadsInfo {
            threads: a.account.threads,
            working_threads: a.working(),
            plan_active: a.account.plan_active,
            queued,
        }
    }

    /// `Ok` when the account may start one more piece of work now.
    fn capacity(&self, acct: usize) -> Result<(), &'static str> {
        let a = &self.accounts[acct];
        if !a.account.plan_active || a.working() >= a.account.threads {
            return Err(codes::ZERO_BALANCE);
        }
        Ok(())
    }

    /// Gives free threads of `acct` to its queued tasks, oldest first, as of `at`.
    pub(crate) fn start_queued(&mut self, acct: usize, at: u64) {
        loop {
            let a = &self.accounts[acct];
            if !a.account.plan_active || a.working() >= a.account.threads {
                return;
            }
            let Some(id) = self.accounts[acct].queue.pop_front() else { return };
            self.start(id, at);
        }
    }

    /// Task `id` takes a thread of its account at `at`: its solve time starts counting.
    fn start(&mut self, id: u64, at: u64) {
        let Some(t) = self.tasks.get_mut(&id) else { return };
        t.started_at = Some(at);
        t.ready_at = at.saturating_add(t.solve_ms);
        let (acct, ready_at) = (t.account, t.ready_at);
        self.accounts[acct].task_busy += 1;
        self.busy_heap.push(Reverse((ready_at, id, acct)));
        self.expire_heap.push(Reverse((ready_at.saturating_add(self.cfg.retention_ms), id)));
    }

    fn draw_solve_ms(&self, kind: CaptchaKind, rng: &mut SplitMix64) -> u64 {
        let t = self.cfg.solve_time(kind);
        let a = rng.range(t.min_ms, t.max_ms);
        let b = rng.range(t.min_ms, t.max_ms);
        (a + b) / 2
    }

    /// Accepts a validated task: draws solve time, outcome and answer, and takes a thread, or
    /// (silent-queue mode, every thread busy) joins the account's queue.
    pub(crate) fn submit(&mut self, acct: usize, spec: TaskSpec, now: u64) -> Result<u64, &'static str> {
        let queue = match self.capacity(acct) {
            Ok(()) => false,
            Err(_) if self.accounts[acct].account.plan_active && self.cfg.busy_threads == BusyThreads::SilentQueue => {
                true
            }
            Err(code) => return Err(code),
        };
        let id = self.next_id;
        self.next_id += self.id_rng.range(1, 37);
        let mut rng = rng::stream(self.seed, STREAM_TASK, id);
        let solve_ms = self.draw_solve_ms(spec.kind, &mut rng);
        let unsolvable =
            spec.sitekey.as_ref().is_some_and(|k| self.unsolvable.contains(k)) || rng.chance(self.cfg.unsolvable_rate);
        let outcome = if unsolvable { Outcome::Unsolvable } else { Outcome::Solved(spec.answer.generate(&mut rng)) };
        self.stats.tasks_created += 1;
        self.stats.tasks_pending += 1;
        if unsolvable {
            self.stats.tasks_unsolvable += 1;
        } else {
            self.stats.tasks_solved += 1;
        }
        self.tasks.insert(
            id,
            Task {
                account: acct,
                spec,
                submitted_at: now,
                ready_at: u64::MAX,
                started_at: None,
                solve_ms,
                outcome,
                polls: 0,
            },
        );
        if queue {
            self.accounts[acct].queue.push_back(id);
            self.stats.tasks_queued += 1;
        } else {
            self.start(id, now);
        }
        Ok(id)
    }

    /// The task for a poll by `acct` (other accounts' tasks are invisible).
    pub(crate) fn task_for_poll(&mut self, acct: usize, id: u64) -> Option<&mut Task> {
        self.tasks.get_mut(&id).filter(|t| t.account == acct)
    }

    /// Takes a thread for a synchronous `/solve.php` image and draws its solve time and answer.
    pub(crate) fn sync_acquire(&mut self, acct: usize, spec: &TaskSpec) -> Result<(u64, String), &'static str> {
        self.capacity(acct)?;
        let n = self.stats.sync_solves;
        let mut rng = rng::stream(self.seed, STREAM_TASK ^ 0xABCD, n);
        let ms = self.draw_solve_ms(spec.kind, &mut rng);
        let answer = spec.answer.generate(&mut rng);
        self.accounts[acct].sync_busy += 1;
        self.stats.sync_solves += 1;
        Ok((ms, answer))
    }

    /// A `/solve.php` image is answered at `now`: its thread goes back (to a queued task first).
    pub(crate) fn sync_release(&mut self, acct: usize, now: u64) {
        self.advance(now);
        let a = &mut self.accounts[acct];
        a.sync_busy = a.sync_busy.saturating_sub(1);
        self.start_queued(acct, now);
    }

    pub(crate) fn task_info(&self, id: u64, now: u64) -> Option<TaskInfo> {
        let t = self.tasks.get(&id)?;
        let state = match (&t.outcome, now >= t.ready_at) {
            (_, false) => TaskState::Pending,
            (Outcome::Solved(_), true) => TaskState::Solved,
            (Outcome::Unsolvable, true) => TaskState::Unsolvable,
        };
        Some(TaskInfo {
            id,
            kind: t.spec.kind,
            submitted_at_ms: t.submitted_at,
            ready_at_ms: t.ready_at,
            started_at_ms: t.started_at,
            state,
            answer: match &t.outcome {
                Outcome::Solved(a) => Some(a.clone()),
                Outcome::Unsolvable => None,
            },
            user_agent: t.spec.user_agent.clone(),
            polls: t.polls,
        })
    }

    pub(crate) fn next_fault(&mut self) -> Option<Fault> {
        if let Some(f) = self.forced.pop_front() {
            return Some(f);
        }
        let f = self.faults;
        let u = self.fault_rng.unit();
        let mut edge = f.drop_rate;
        if u < edge {
            return Some(Fault::Drop);
        }
        edge += f.html_502_rate;
        if u < edge {
            return Some(Fault::Html502);
        }
        edge += f.plain_text_rate;
        if u < edge {
            // The text depends on the endpoint; http.rs fills it in.
            return Some(Fault::PlainText(String::new()));
        }
        edge += f.slow_rate;
        if u < edge {
            return Some(Fault::Slow(f.slow_ms));
        }
        None
    }

    pub(crate) fn next_seq(&mut self) -> u64 {
        let s = self.next_seq;
        self.next_seq += 1;
        s
    }

    pub(crate) fn record(&mut self, r: RecordedRequest) {
        if self.cfg.log_limit == 0 {
            self.stats.log_dropped += 1;
            return;
        }
        while self.log.len() >= self.cfg.log_limit {
            self.log.pop_front();
            self.stats.log_dropped += 1;
        }
        // Keep arrival order even when a later request finished first.
        let pos = self.log.iter().rposition(|e| e.seq < r.seq).map(|p| p + 1).unwrap_or(0);
        self.log.insert(pos, r);
    }

    pub(crate) fn requests_since(&self, since: u64) -> Vec<RecordedRequest> {
        self.log.iter().filter(|r| r.seq >= since).cloned().collect()
    }

    pub(crate) fn clear_log(&mut self) {
        self.log.clear();
    }
}
