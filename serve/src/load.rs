//! Compiling (or loading from the on-disk cache) and linking the component.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use wasmtime::component::{Component, Linker};
use wasmtime_wasi_http::p3::bindings::ServicePre;

use crate::config::Allocation;
use crate::state::{HostState, Shared, new_store};
use crate::{keyvalue, spin};

/// The wasmtime engine configuration: component model with async, and the allocator.
fn engine(allocation: Allocation) -> anyhow::Result<wasmtime::Engine> {
    let mut config = wasmtime::Config::new();
    config.wasm_component_model(true);
    config.wasm_component_model_async(true);
    config.epoch_interruption(true);
    if let Allocation::Pooling { max_instances, max_memory_bytes } = allocation {
        // A Rust wasip2 component holds a handful of core instances and tables and one or two
        // memories; the totals leave room for that.
        let mut pool = wasmtime::PoolingAllocationConfig::default();
        pool.total_component_instances(max_instances)
            .total_core_instances(max_instances.saturating_mul(8))
            .total_memories(max_instances.saturating_mul(2))
            .total_tables(max_instances.saturating_mul(8))
            .total_stacks(max_instances.saturating_mul(2))
            .max_memory_size(max_memory_bytes);
        config.allocation_strategy(wasmtime::InstanceAllocationStrategy::Pooling(pool));
    }
    Ok(wasmtime::Engine::new(&config)?)
}

/// [`load`] on the blocking pool (compiling takes a while).
pub(crate) async fn load_blocking(
    path: &Path,
    cache_dir: Option<PathBuf>,
    allocation: Allocation,
) -> anyhow::Result<(wasmtime::Engine, ServicePre<HostState>, bool)> {
    let path = path.to_owned();
    tokio::task::spawn_blocking(move || load(&path, cache_dir.as_deref(), allocation))
        .await
        .context("the component loader panicked")?
}

/// One instantiation in a throwaway store.
pub(crate) async fn probe(
    engine: &wasmtime::Engine,
    pre: &ServicePre<HostState>,
    shared: &Arc<Shared>,
) -> anyhow::Result<()> {
    let mut store = new_store(engine, shared, Instant::now() + Duration::from_secs(60));
    pre.instantiate_async(&mut store).await.map_err(anyhow::Error::from).context("instantiating the component")?;
    Ok(())
}

/// Compiles (or loads from `cache_dir`) and pre-instantiates the component against the linker.
fn load(
    path: &Path,
    cache_dir: Option<&Path>,
    allocation: Allocation,
) -> anyhow::Result<(wasmtime::Engine, ServicePre<HostState>, bool)> {
    let engine = engine(allocation)?;
    let bytes = std::fs::read(path).with_context(|| format!("reading the component {}", path.display()))?;
    let cached = cache_dir.map(|dir| cache_path(dir, &engine, &bytes));
    let from_cache = match cached.as_deref().filter(|p| p.exists()) {
        // SAFETY: the file was written by `Component::serialize` of this wasmtime build (its name
        // holds the engine's compatibility hash and a hash of the component bytes), in a cache
        // directory the caller chose.
        Some(p) => unsafe { Component::deserialize_file(&engine, p) }.ok(),
        None => None,
    };
    let compiled = from_cache.is_none();
    let component = match from_cache {
        Some(component) => component,
        None => Component::new(&engine, &bytes)
            .map_err(anyhow::Error::from)
            .with_context(|| format!("compiling {} (is it a wasm component?)", path.display()))?,
    };
    if let (Some(cache), true) = (&cached, compiled) {
        // A cache that cannot be written only costs the next start a compile.
        if let Err(e) = write_cache(cache, &component) {
            eprintln!("serve: cannot write the compile cache {}: {e:#}", cache.display());
        }
    }
    let mut linker = Linker::<HostState>::new(&engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
    wasmtime_wasi::p3::add_to_linker(&mut linker)?;
    wasmtime_wasi_http::p3::add_to_linker(&mut linker)?;
    spin::add_to_linker(&mut linker)?;
    keyvalue::add_to_linker(&mut linker)?;
    let pre = linker
        .instantiate_pre(&component)
        .map_err(anyhow::Error::from)
        .with_context(|| format!("linking {}: it imports something this host does not provide", path.display()))?;
    let pre = ServicePre::new(pre).map_err(anyhow::Error::from).with_context(|| {
        format!("{} does not export wasi:http/handler@0.3.0 (is it a spin-sdk 7 HTTP component?)", path.display())
    })?;
    Ok((engine, pre, compiled))
}

fn cache_path(dir: &Path, engine: &wasmtime::Engine, bytes: &[u8]) -> PathBuf {
    use std::hash::{DefaultHasher, Hash, Hasher};
    let mut hasher = DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut hasher);
    "serve-p3-epoch".hash(&mut hasher);
    bytes.hash(&mut hasher);
    dir.join(format!("spin-component-{:016x}.cwasm", hasher.finish()))
}

/// Writes the compiled component through a temporary file of its own in the same directory,
/// renamed into place: a reader never sees half a file, and concurrent writers do not race.
fn write_cache(path: &Path, component: &Component) -> anyhow::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let mut file = tempfile::NamedTempFile::new_in(dir)?;
    std::io::Write::write_all(&mut file, &component.serialize()?)?;
    file.persist(path)?;
    Ok(())
}
