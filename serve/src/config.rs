//! How to serve: [`ServeConfig`], the front end's [`Limits`] and the instance [`Allocation`].

use std::collections::BTreeMap;
use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::kv::KvBackend;
use crate::variables;

/// How to serve a component. Build with [`ServeConfig::new`] and adjust the fields. `Debug`
/// shows variable names, never values.
#[derive(Clone)]
pub struct ServeConfig {
    /// The component (`.wasm`). `None`: the manifest component's `source`.
    pub component: Option<PathBuf>,
    /// Address to listen on (port 0 = any free port). Default `127.0.0.1:3000`.
    pub listen: SocketAddr,
    /// Application variables given as flags (`--variable name=value`); they win over `env`.
    pub variables: BTreeMap<String, String>,
    /// The environment `SPIN_VARIABLE_<NAME>` entries are read from (other entries are ignored).
    /// [`ServeConfig::new`] fills it from the process environment.
    pub env: BTreeMap<String, String>,
    /// A spin.toml: the component's variables, `allowed_outbound_hosts`, `key_value_stores` and
    /// (when [`ServeConfig::component`] is `None`) `source` come from it.
    pub manifest: Option<PathBuf>,
    /// Which `[component.NAME]` of the manifest (`None`: the only one).
    pub component_name: Option<String>,
    /// Where the `default` key-value store lives.
    pub kv: KvBackend,
    /// Allowed outbound destinations (`scheme://host[:port]` patterns, see [`crate::AllowedHosts`]), in
    /// addition to the manifest's.
    pub allowed_outbound: Vec<String>,
    /// Directory for compiled components (`None`: compile at every start).
    pub cache_dir: Option<PathBuf>,
    /// Whether the guest's stdout/stderr go to this process's (like `spin up`); otherwise they
    /// are discarded.
    pub inherit_stdio: bool,
    /// How instances are allocated (pooled by default).
    pub allocation: Allocation,
    /// Timeouts and size limits.
    pub limits: Limits,
}

/// Timeouts and limits of the HTTP front end. Requests over a limit get a JSON error from the
/// host and never reach the guest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// A connection must deliver a whole request head within this (else it is closed).
    pub header_read_timeout: Duration,
    /// Longest pause between two chunks of a request body (the guest then sees a read error).
    pub body_timeout: Duration,
    /// A request's whole life: a guest that has not answered by then is interrupted (epoch
    /// interruption, also inside a busy loop), its instance freed, and the client gets a JSON
    /// 503 (`deadline_exceeded`); a response still streaming is cut off.
    pub request_timeout: Duration,
    /// Connections served at once; more get a JSON 503 and are closed.
    pub max_connections: usize,
    /// Largest request body: a larger `Content-Length` gets 413; a longer chunked body is cut
    /// off (the guest sees an error).
    pub max_body_bytes: u64,
    /// Longest request target (path and query): 414 beyond.
    pub max_uri_bytes: usize,
    /// Most request header bytes (names + values) and headers (100): 431 beyond.
    pub max_header_bytes: usize,
    /// On shutdown, how long in-flight requests may still run before they get a JSON 503.
    pub shutdown_grace: Duration,
}

impl Default for Limits {
    /// 10 s head, 30 s body pause, 60 s per request (the edge's longest wait is 25 s plus its
    /// upstream timeout), 4,096 connections, 16 MiB body, 8 KiB target, 64 KiB headers, 10 s
    /// shutdown grace.
    fn default() -> Limits {
        Limits {
            header_read_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            request_timeout: Duration::from_secs(60),
            max_connections: 4_096,
            max_body_bytes: 16 << 20,
            max_uri_bytes: 8 << 10,
            max_header_bytes: 64 << 10,
            shutdown_grace: Duration::from_secs(10),
        }
    }
}

/// How wasmtime allocates instances.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Allocation {
    /// wasmtime's pooling allocator: instance and memory slots reserved once and reused, which
    /// makes instantiation cheaper (about 40% more requests per second for a hello component).
    /// At most `max_instances` requests run at once; more get `503` with `Retry-After: 1`. Each
    /// instance's linear memory is capped at `max_memory_bytes`. If the component does not fit
    /// the pool, the server falls back to [`Allocation::OnDemand`] (with a warning).
    Pooling {
        /// Concurrent instances (= requests in flight).
        max_instances: u32,
        /// Linear memory cap per instance, bytes.
        max_memory_bytes: usize,
    },
    /// Allocate every instance on demand: no cap on concurrency or memory.
    OnDemand,
}

impl Default for Allocation {
    /// Pooling, 1,000 instances of at most 512 MiB each.
    fn default() -> Allocation {
        Allocation::Pooling { max_instances: 1_000, max_memory_bytes: 512 << 20 }
    }
}

impl fmt::Debug for ServeConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServeConfig")
            .field("component", &self.component)
            .field("listen", &self.listen)
            .field("variables", &self.variables.keys().collect::<Vec<_>>())
            .field("env", &self.env.keys().filter(|k| k.starts_with(variables::ENV_PREFIX)).collect::<Vec<_>>())
            .field("manifest", &self.manifest)
            .field("component_name", &self.component_name)
            .field("kv", &self.kv)
            .field("allowed_outbound", &self.allowed_outbound)
            .field("cache_dir", &self.cache_dir)
            .field("inherit_stdio", &self.inherit_stdio)
            .field("allocation", &self.allocation)
            .field("limits", &self.limits)
            .finish()
    }
}

/// The process environment's `SPIN_VARIABLE_*` entries. One that is not valid UTF-8 is left
/// out with a warning naming it, never its value (it may be a key): `std::env::vars` would panic
/// and print the value.
fn prefixed_env() -> BTreeMap<String, String> {
    let mut env = BTreeMap::new();
    for (name, value) in std::env::vars_os() {
        let Some(name) = name.to_str().filter(|name| name.starts_with(variables::ENV_PREFIX)) else { continue };
        match value.into_string() {
            Ok(value) => {
                env.insert(name.to_owned(), value);
            }
            Err(_) => eprintln!("serve: {name} is left out: its value is not valid UTF-8"),
        }
    }
    env
}

impl ServeConfig {
    /// Serves `component` on 127.0.0.1:3000 with variables from the process environment, an
    /// in-memory store, no outbound access, no compile cache, guest stdio inherited.
    pub fn new(component: impl Into<PathBuf>) -> ServeConfig {
        ServeConfig {
            component: Some(component.into()),
            listen: SocketAddr::from(([127, 0, 0, 1], 3000)),
            variables: BTreeMap::new(),
            env: prefixed_env(),
            manifest: None,
            component_name: None,
            kv: KvBackend::Memory,
            allowed_outbound: Vec::new(),
            cache_dir: None,
            inherit_stdio: true,
            allocation: Allocation::default(),
            limits: Limits::default(),
        }
    }
}

/// How the component was loaded.
#[derive(Clone, Copy, Debug)]
pub struct LoadStats {
    /// Compiled now (`false`: deserialized from the cache).
    pub compiled: bool,
    /// Time to compile or deserialize, link and pre-instantiate.
    pub duration: Duration,
}
