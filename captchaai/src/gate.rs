//! The engine's thread-budget gate, awaitable: `enter` returns once the engine admits the
//! ticket. The admission decisions are the engine's (`account.thread-gate`); this only waits.

use std::collections::HashSet;
use std::sync::Mutex;

use anyhow::{Result, anyhow};
use tokio::sync::Notify;
use wasmtime::component::ResourceAny;

use crate::component::{Admission, EngineHost, EngineInstance, Failure};

/// Admits at most `plan threads - reserve` solves at once, in arrival order.
pub struct Gate {
    inner: Mutex<Inner>,
    changed: Notify,
}

struct Inner {
    instance: EngineInstance,
    gate: ResourceAny,
    /// Tickets the engine admitted while their owners were waiting.
    admitted: HashSet<u64>,
}

impl Gate {
    /// A gate in its own small engine instance.
    pub fn new(host: &EngineHost, plan_threads: u64, reserve: u64) -> Result<Result<Gate, Failure>> {
        let mut instance = host.instantiate(64 << 20)?;
        let gate = match instance.gate_create(plan_threads, reserve)? {
            Ok(gate) => gate,
            Err(failure) => return Ok(Err(failure)),
        };
        Ok(Ok(Gate { inner: Mutex::new(Inner { instance, gate, admitted: HashSet::new() }), changed: Notify::new() }))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Waits until the engine admits a new solve; returns its ticket (give it to [`Gate::leave`]).
    pub async fn enter(&self) -> Result<u64> {
        let (ticket, admission) = {
            let mut inner = self.lock();
            let gate = inner.gate;
            inner.instance.gate_enter(gate)?
        };
        if let Admission::Admitted = admission {
            return Ok(ticket);
        }
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if self.lock().admitted.remove(&ticket) {
                return Ok(ticket);
            }
            changed.await;
        }
    }

    /// How many solves the engine admits at once (the plan's threads less the reserve).
    pub fn capacity(&self) -> Result<u64> {
        let mut inner = self.lock();
        let gate = inner.gate;
        Ok(inner.instance.gate_capacity(gate)?)
    }

    /// Ends an admitted solve (or withdraws a waiting one) and wakes the solves it admits.
    pub fn leave(&self, ticket: u64) -> Result<()> {
        let mut inner = self.lock();
        let gate = inner.gate;
        let admitted =
            inner.instance.gate_leave(gate, ticket)?.ok_or_else(|| anyhow!("ticket {ticket} is not in the gate"))?;
        inner.admitted.extend(admitted);
        drop(inner);
        self.changed.notify_waiters();
        Ok(())
    }
}
