//! Host implementation of `wasi:keyvalue/{store,atomics,batch}@0.2.0-draft2` (the interfaces
//! Spin 4.1 implements) over the server's [`KvStore`]. The WIT functions are synchronous; the
//! host side is async (the guest's fiber waits while SQLite or Redis answers).
//!
//! * `open(label)`: the labels of [`crate::state::KvAccess`] as for `spin:key-value` (`access-denied` for a
//!   label the manifest does not list, `no-such-store` for anything but `default`).
//! * `cas.new` reads the key's current value; `current()` returns that read; `swap` writes only
//!   if the key still holds exactly those bytes (absent included) and answers `ok` if it wrote,
//!   `cas-failed` with a fresh handle (re-read) if not. Comparison is by value, so a writer that
//!   restores an earlier value (A→B→A) is not detected; callers keep values unique.
//! * `list-keys` returns every key at once (`cursor` is always `none`; a given cursor is
//!   refused).

use wasmtime::component::{HasData, Linker, Resource};

use crate::kv::{KvError, KvStore};
use crate::state::{HostState, MAX_OPEN_STORES, OpenRefused};

mod generated {
    wasmtime::component::bindgen!({
        path: "wit-spin",
        world: "keyvalue-imports",
        imports: { default: async | trappable },
        with: {
            "wasi:keyvalue/store.bucket": super::Bucket,
            "wasi:keyvalue/atomics.cas": super::Cas,
        },
    });
}

use generated::wasi::keyvalue::{atomics, batch, store};

/// An open bucket (always the `default` store).
pub struct Bucket {
    kv: KvStore,
}

/// A compare-and-swap in progress: the key and the value read when it started.
pub struct Cas {
    kv: KvStore,
    key: String,
    seen: Option<Vec<u8>>,
}

/// Marker for [`HasData`].
pub(crate) struct WasiKeyValue;

impl HasData for WasiKeyValue {
    type Data<'a> = &'a mut HostState;
}

/// Adds the three interfaces to `linker`.
pub(crate) fn add_to_linker(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    store::add_to_linker::<_, WasiKeyValue>(linker, |s| s)?;
    atomics::add_to_linker::<_, WasiKeyValue>(linker, |s| s)?;
    batch::add_to_linker::<_, WasiKeyValue>(linker, |s| s)?;
    Ok(())
}

fn other(e: KvError) -> store::Error {
    store::Error::Other(e.to_string())
}

type Trappable<T> = wasmtime::Result<T>;

impl HostState {
    fn bucket(&self, bucket: &Resource<Bucket>) -> Trappable<KvStore> {
        Ok(self.table.get(bucket)?.kv.clone())
    }
}

impl store::Host for &mut HostState {
    async fn open(&mut self, identifier: String) -> Trappable<Result<Resource<Bucket>, store::Error>> {
        if let Err(refused) = self.may_open(&identifier) {
            return Ok(Err(match refused {
                OpenRefused::AccessDenied => store::Error::AccessDenied,
                OpenRefused::NoSuchStore => store::Error::NoSuchStore,
                OpenRefused::TableFull => store::Error::Other(format!("more than {MAX_OPEN_STORES} buckets open")),
            }));
        }
        let handle = self.table.push(Bucket { kv: self.shared.kv.clone() })?;
        self.open_stores += 1;
        Ok(Ok(handle))
    }
}

impl store::HostBucket for &mut HostState {
    async fn get(&mut self, bucket: Resource<Bucket>, key: String) -> Trappable<Result<Option<Vec<u8>>, store::Error>> {
        Ok(self.bucket(&bucket)?.get(&key).await.map_err(other))
    }

    async fn set(
        &mut self,
        bucket: Resource<Bucket>,
        key: String,
        value: Vec<u8>,
    ) -> Trappable<Result<(), store::Error>> {
        Ok(self.bucket(&bucket)?.set(&key, value).await.map_err(other))
    }

    async fn delete(&mut self, bucket: Resource<Bucket>, key: String) -> Trappable<Result<(), store::Error>> {
        Ok(self.bucket(&bucket)?.delete(&key).await.map_err(other))
    }

    async fn exists(&mut self, bucket: Resource<Bucket>, key: String) -> Trappable<Result<bool, store::Error>> {
        Ok(self.bucket(&bucket)?.exists(&key).await.map_err(other))
    }

    async fn list_keys(
        &mut self,
        bucket: Resource<Bucket>,
        cursor: Option<String>,
    ) -> Trappable<Result<store::KeyResponse, store::Error>> {
        let kv = self.bucket(&bucket)?;
        if cursor.is_some() {
            return Ok(Err(store::Error::Other("list-keys: this host returns every key at once; no cursor".into())));
        }
        Ok(kv.keys().await.map(|keys| store::KeyResponse { keys, cursor: None }).map_err(other))
    }

    async fn drop(&mut self, bucket: Resource<Bucket>) -> Trappable<()> {
        self.table.delete(bucket)?;
        self.open_stores = self.open_stores.saturating_sub(1);
        Ok(())
    }
}

impl atomics::Host for &mut HostState {
    async fn increment(
        &mut self,
        bucket: Resource<Bucket>,
        key: String,
        delta: i64,
    ) -> Trappable<Result<i64, store::Error>> {
        Ok(self.bucket(&bucket)?.increment(&key, delta).await.map_err(other))
    }

    async fn swap(&mut self, cas: Resource<Cas>, value: Vec<u8>) -> Trappable<Result<(), atomics::CasError>> {
        let Cas { kv, key, seen } = self.table.delete(cas)?;
        match kv.compare_and_swap(&key, seen.as_deref(), value).await {
            Ok(true) => Ok(Ok(())),
            Ok(false) => match kv.get(&key).await {
                Ok(seen) => {
                    let fresh = self.table.push(Cas { kv, key, seen })?;
                    Ok(Err(atomics::CasError::CasFailed(fresh)))
                }
                Err(e) => Ok(Err(atomics::CasError::StoreError(other(e)))),
            },
            Err(e) => Ok(Err(atomics::CasError::StoreError(other(e)))),
        }
    }
}

impl atomics::HostCas for &mut HostState {
    async fn new(&mut self, bucket: Resource<Bucket>, key: String) -> Trappable<Result<Resource<Cas>, store::Error>> {
        let kv = self.bucket(&bucket)?;
        match kv.get(&key).await {
            Ok(seen) => Ok(Ok(self.table.push(Cas { kv, key, seen })?)),
            Err(e) => Ok(Err(other(e))),
        }
    }

    async fn current(&mut self, cas: Resource<Cas>) -> Trappable<Result<Option<Vec<u8>>, store::Error>> {
        Ok(Ok(self.table.get(&cas)?.seen.clone()))
    }

    async fn drop(&mut self, cas: Resource<Cas>) -> Trappable<()> {
        self.table.delete(cas)?;
        Ok(())
    }
}

impl batch::Host for &mut HostState {
    async fn get_many(
        &mut self,
        bucket: Resource<Bucket>,
        keys: Vec<String>,
    ) -> Trappable<Result<Vec<(String, Option<Vec<u8>>)>, store::Error>> {
        Ok(self.bucket(&bucket)?.get_many(&keys).await.map_err(other))
    }

    async fn set_many(
        &mut self,
        bucket: Resource<Bucket>,
        key_values: Vec<(String, Vec<u8>)>,
    ) -> Trappable<Result<(), store::Error>> {
        Ok(self.bucket(&bucket)?.set_many(key_values).await.map_err(other))
    }

    async fn delete_many(
        &mut self,
        bucket: Resource<Bucket>,
        keys: Vec<String>,
    ) -> Trappable<Result<(), store::Error>> {
        Ok(self.bucket(&bucket)?.delete_many(keys).await.map_err(other))
    }
}
