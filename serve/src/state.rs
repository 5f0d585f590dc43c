//! What the host's modules build on: what every request shares ([`Shared`], [`App`]), one
//! request's store data ([`HostState`], [`new_store`]) and which key-value stores a guest may
//! open ([`KvAccess`]). It imports none of the modules that use it.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use wasmtime::component::ResourceTable;
use wasmtime::{Store, UpdateDeadline};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};
use wasmtime_wasi_http::p3::bindings::ServicePre;
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use crate::config::Limits;
use crate::kv::KvStore;
use crate::outbound::{AllowedHosts, OutboundHooks};
use crate::variables::{ComponentVariables, Redactor};

/// The label of the only store this host provides.
pub(crate) const DEFAULT_STORE: &str = "default";

/// Most stores one instance may hold open at once, through both key-value interfaces.
pub(crate) const MAX_OPEN_STORES: usize = 64;

/// Which `open` labels a component may use.
#[derive(Clone, Debug)]
pub(crate) enum KvAccess {
    /// No manifest: `default` opens, any other label is `no-such-store`.
    DefaultOnly,
    /// From the manifest's `key_value_stores`: labels not listed are `access-denied` (as in Spin,
    /// checked first); listed labels other than `default` cannot occur (rejected at startup).
    Listed(Vec<String>),
}

/// Why a store did not open; each interface maps it to its own error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum OpenRefused {
    /// The manifest does not list the label.
    AccessDenied,
    /// A label other than `default`.
    NoSuchStore,
    /// [`MAX_OPEN_STORES`] are open already.
    TableFull,
}

/// What every request's store can see: resolved once at start.
pub(crate) struct Shared {
    pub(crate) variables: ComponentVariables,
    pub(crate) kv: KvStore,
    pub(crate) kv_access: KvAccess,
    pub(crate) allowed: Arc<AllowedHosts>,
    pub(crate) redactor: Redactor,
    pub(crate) inherit_stdio: bool,
}

/// Per-request store data.
pub(crate) struct HostState {
    pub(crate) table: ResourceTable,
    pub(crate) wasi: WasiCtx,
    pub(crate) http: WasiHttpCtx,
    pub(crate) hooks: OutboundHooks,
    pub(crate) shared: Arc<Shared>,
    pub(crate) open_stores: usize,
}

impl HostState {
    fn new(shared: Arc<Shared>) -> HostState {
        let mut wasi = WasiCtx::builder();
        if shared.inherit_stdio {
            wasi.inherit_stdout().inherit_stderr();
        }
        HostState {
            table: ResourceTable::new(),
            wasi: wasi.build(),
            http: WasiHttpCtx::new(),
            hooks: OutboundHooks { allowed: shared.allowed.clone() },
            shared,
            open_stores: 0,
        }
    }

    /// Whether the guest may open the store `label` now: the manifest's list first (as in
    /// Spin), then the label, then the count of stores open.
    pub(crate) fn may_open(&self, label: &str) -> Result<(), OpenRefused> {
        if let KvAccess::Listed(labels) = &self.shared.kv_access
            && !labels.iter().any(|l| l == label)
        {
            return Err(OpenRefused::AccessDenied);
        }
        if label != DEFAULT_STORE {
            return Err(OpenRefused::NoSuchStore);
        }
        if self.open_stores >= MAX_OPEN_STORES {
            return Err(OpenRefused::TableFull);
        }
        Ok(())
    }
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

impl WasiHttpView for HostState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView { ctx: &mut self.http, table: &mut self.table, hooks: &mut self.hooks }
    }
}

/// The compiled component and everything requests share.
pub(crate) struct App {
    pub(crate) engine: wasmtime::Engine,
    pub(crate) pre: ServicePre<HostState>,
    pub(crate) shared: Arc<Shared>,
    pub(crate) addr: SocketAddr,
    pub(crate) limits: Limits,
}

/// A store for one request: interrupted (trapped) at the first epoch check after `deadline`,
/// yielding to the scheduler at every tick before.
pub(crate) fn new_store(engine: &wasmtime::Engine, shared: &Arc<Shared>, deadline: Instant) -> Store<HostState> {
    let mut store = Store::new(engine, HostState::new(shared.clone()));
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(move |_| {
        Ok(if Instant::now() >= deadline { UpdateDeadline::Interrupt } else { UpdateDeadline::Yield(1) })
    });
    store
}
