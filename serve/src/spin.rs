//! Host implementations of `spin:variables/variables@3.0.0` and `spin:key-value/key-value@3.0.0`,
//! from bindings generated over the WIT files copied from spin-sdk 7.0.0 (`serve/wit-spin`).
//! Every function of both interfaces is `async` in WIT, so each takes an `Accessor`. The
//! key-value store is the same [`crate::kv::KvStore`] `wasi:keyvalue` uses.

use wasmtime::component::{Accessor, FutureReader, HasData, Linker, Resource, StreamReader};

use crate::kv::{KvError, KvStore};
use crate::state::{HostState, OpenRefused};
use crate::variables::VariableError;

mod generated {
    wasmtime::component::bindgen!({
        path: "wit-spin",
        world: "spin-imports",
        imports: {
            // Creating the stream and future can fail (resource table full): trap then.
            "spin:key-value/key-value.[method]store.get-keys": async | store | trappable,
        },
        with: {
            "spin:key-value/key-value.store": super::KvHandle,
        },
    });
}

use generated::spin::key_value::key_value;
use generated::spin::variables::variables;

/// An open `spin:key-value` store (always the `default` one).
pub struct KvHandle {
    _private: (),
}

/// Marker for [`HasData`]: the spin interfaces see the whole [`HostState`].
pub(crate) struct Spin;

impl HasData for Spin {
    type Data<'a> = &'a mut HostState;
}

/// Adds both interfaces to `linker`.
pub(crate) fn add_to_linker(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    variables::add_to_linker::<_, Spin>(linker, |state| state)?;
    key_value::add_to_linker::<_, Spin>(linker, |state| state)?;
    Ok(())
}

impl variables::Host for &mut HostState {}

impl<T> variables::HostWithStore<T> for Spin {
    async fn get(accessor: &Accessor<T, Self>, name: String) -> Result<String, variables::Error> {
        accessor.with(|mut access| {
            let state: &mut HostState = access.get();
            match state.shared.variables.get(&name) {
                Ok(value) => Ok(value.to_owned()),
                Err(VariableError::InvalidName(why)) => Err(variables::Error::InvalidName(why)),
                Err(VariableError::Undefined(name)) => Err(variables::Error::Undefined(name)),
            }
        })
    }
}

impl key_value::Host for &mut HostState {}

impl key_value::HostStore for &mut HostState {
    fn drop(&mut self, store: Resource<KvHandle>) -> wasmtime::Result<()> {
        self.table.delete(store)?;
        self.open_stores = self.open_stores.saturating_sub(1);
        Ok(())
    }
}

/// The shared data behind an open store handle (checks the handle belongs to this instance).
fn data<T>(accessor: &Accessor<T, Spin>, store: &Resource<KvHandle>) -> Result<KvStore, key_value::Error> {
    accessor.with(|mut access| {
        let state: &mut HostState = access.get();
        match state.table.get(store) {
            Ok(_) => Ok(state.shared.kv.clone()),
            Err(e) => Err(key_value::Error::Other(format!("invalid store handle: {e}"))),
        }
    })
}

fn kv_error(e: KvError) -> key_value::Error {
    key_value::Error::Other(e.to_string())
}

impl<T> key_value::HostStoreWithStore<T> for Spin {
    async fn open(accessor: &Accessor<T, Self>, label: String) -> Result<Resource<KvHandle>, key_value::Error> {
        accessor.with(|mut access| {
            let state: &mut HostState = access.get();
            state.may_open(&label).map_err(|refused| match refused {
                OpenRefused::AccessDenied => key_value::Error::AccessDenied,
                OpenRefused::NoSuchStore => key_value::Error::NoSuchStore,
                OpenRefused::TableFull => key_value::Error::StoreTableFull,
            })?;
            let handle = state.table.push(KvHandle { _private: () }).map_err(|_| key_value::Error::StoreTableFull)?;
            state.open_stores += 1;
            Ok(handle)
        })
    }

    async fn get(
        accessor: &Accessor<T, Self>,
        store: Resource<KvHandle>,
        key: String,
    ) -> Result<Option<Vec<u8>>, key_value::Error> {
        data(accessor, &store)?.get(&key).await.map_err(kv_error)
    }

    async fn set(
        accessor: &Accessor<T, Self>,
        store: Resource<KvHandle>,
        key: String,
        value: Vec<u8>,
    ) -> Result<(), key_value::Error> {
        let kv = data(accessor, &store)?;
        kv.set(&key, value).await.map_err(kv_error)
    }

    async fn delete(
        accessor: &Accessor<T, Self>,
        store: Resource<KvHandle>,
        key: String,
    ) -> Result<(), key_value::Error> {
        let kv = data(accessor, &store)?;
        kv.delete(&key).await.map_err(kv_error)
    }

    async fn exists(
        accessor: &Accessor<T, Self>,
        store: Resource<KvHandle>,
        key: String,
    ) -> Result<bool, key_value::Error> {
        data(accessor, &store)?.exists(&key).await.map_err(kv_error)
    }

    async fn get_keys(
        accessor: &Accessor<T, Self>,
        store: Resource<KvHandle>,
    ) -> wasmtime::Result<(StreamReader<String>, FutureReader<Result<(), key_value::Error>>)> {
        let keys = match data(accessor, &store) {
            Ok(kv) => kv.keys().await.map_err(kv_error),
            Err(e) => Err(e),
        };
        accessor.with(|mut access| {
            let (keys, result) = match keys {
                Ok(keys) => (keys, Ok(())),
                Err(e) => (Vec::new(), Err(e)),
            };
            let stream = StreamReader::new(&mut access, keys)?;
            let future = FutureReader::new(&mut access, async move { wasmtime::Result::<_>::Ok(result) })?;
            Ok((stream, future))
        })
    }
}
