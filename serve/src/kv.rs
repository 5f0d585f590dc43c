//! The `default` key-value store behind `wasi:keyvalue` and `spin:key-value`: in memory, SQLite
//! (Spin's default local store, same table) or Redis (Spin's `type = "redis"`), shared by every
//! request and instance of a server (and, for SQLite files and Redis, by other processes).
//!
//! Every operation is atomic on its own. [`KvStore::increment`] and
//! [`KvStore::compare_and_swap`] are atomic across all users of the store: an SQLite
//! `BEGIN IMMEDIATE` transaction, Redis `INCRBY` and a Lua script, a mutex in memory.
//!
//! Store faults: a Redis command that gets no answer within [`REDIS_RESPONSE_TIMEOUT`] fails
//! (the guest sees a store error, which the edge answers with a 503); a lost connection is
//! re-established on the next command, so the store comes back by itself once Redis does. An
//! SQLite file returns freed pages to the file system as values are deleted (incremental
//! vacuum), so it shrinks back after a burst of large values.
//!
//! Counters: SQLite and memory store a counter as 8 little-endian bytes (like Spin's SQLite
//! store), Redis as a decimal string (`INCRBY`). Incrementing a value that is not a counter is
//! [`KvError::NotACounter`].

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use anyhow::Context as _;
use rusqlite::{OptionalExtension as _, TransactionBehavior, params};

/// Where the `default` store keeps its data.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum KvBackend {
    /// In memory; lost when the server stops.
    #[default]
    Memory,
    /// An SQLite database file (created if missing), Spin's table layout.
    Sqlite(PathBuf),
    /// A Redis server, `redis://[user:password@]host[:port][/db]` (or `rediss://`).
    Redis(String),
}

impl std::str::FromStr for KvBackend {
    type Err = anyhow::Error;

    /// `memory`, `sqlite:PATH` or a `redis://` / `rediss://` URL.
    fn from_str(s: &str) -> anyhow::Result<KvBackend> {
        if s == "memory" {
            Ok(KvBackend::Memory)
        } else if let Some(path) = s.strip_prefix("sqlite:").filter(|p| !p.is_empty()) {
            Ok(KvBackend::Sqlite(PathBuf::from(path)))
        } else if s.starts_with("redis://") || s.starts_with("rediss://") {
            Ok(KvBackend::Redis(s.to_owned()))
        } else {
            anyhow::bail!("--kv expects `memory`, `sqlite:PATH` or `redis://HOST[:PORT]`")
        }
    }
}

impl std::fmt::Display for KvBackend {
    /// A description without credentials (a Redis URL's password is never shown).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KvBackend::Memory => write!(f, "memory"),
            KvBackend::Sqlite(path) => write!(f, "sqlite {}", path.display()),
            KvBackend::Redis(url) => match url.split_once("://") {
                Some((scheme, rest)) => {
                    let host = rest.rsplit_once('@').map_or(rest, |(_, host)| host);
                    write!(f, "redis {scheme}://{host}")
                }
                None => write!(f, "redis"),
            },
        }
    }
}

/// The file name of the default store under a state directory (as `spin up --state-dir`).
pub const SQLITE_FILE: &str = "sqlite_key_value.db";

/// The default store of a Spin runtime config file (`[key_value_store.default]`), if it names
/// one: `type = "redis"` with `url`, or `type = "spin"` with `path` (SQLite; relative to the
/// config file's directory) or without (memory). Other labels are rejected (this host serves
/// only `default`).
pub fn backend_from_runtime_config(path: &Path) -> anyhow::Result<Option<KvBackend>> {
    #[derive(serde::Deserialize)]
    struct RuntimeConfig {
        #[serde(default)]
        key_value_store: BTreeMap<String, StoreConfig>,
    }
    #[derive(serde::Deserialize)]
    #[serde(tag = "type", deny_unknown_fields)]
    enum StoreConfig {
        #[serde(rename = "redis")]
        Redis { url: String },
        #[serde(rename = "spin")]
        Spin { path: Option<PathBuf> },
    }
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading the runtime config file {}", path.display()))?;
    let config: RuntimeConfig =
        toml::from_str(&text).with_context(|| format!("the runtime config file {}", path.display()))?;
    let mut backend = None;
    for (label, store) in config.key_value_store {
        if label != "default" {
            anyhow::bail!(
                "the runtime config file {} configures key_value_store.{label}: only `default` is served",
                path.display()
            );
        }
        backend = Some(match store {
            StoreConfig::Redis { url } => {
                if !(url.starts_with("redis://") || url.starts_with("rediss://")) {
                    anyhow::bail!("key_value_store.default: url must start with redis:// or rediss://");
                }
                KvBackend::Redis(url)
            }
            StoreConfig::Spin { path: Some(file) } => {
                let base = path.parent().unwrap_or(Path::new("."));
                KvBackend::Sqlite(base.join(file))
            }
            StoreConfig::Spin { path: None } => KvBackend::Memory,
        });
    }
    Ok(backend)
}

/// A store operation that failed. Messages name keys and the backend, never values.
#[derive(Debug, thiserror::Error)]
pub enum KvError {
    /// `increment` on a key whose value is not a counter.
    #[error("key {0:?} does not hold a counter")]
    NotACounter(String),
    /// `increment` would overflow a signed 64-bit counter.
    #[error("incrementing key {0:?} overflows")]
    Overflow(String),
    /// SQLite failed (I/O, lock timeout, corrupt file).
    #[error("sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// Redis failed (connection, server error).
    #[error("redis: {0}")]
    Redis(#[from] redis::RedisError),
    /// The blocking worker running an SQLite call panicked or was cancelled.
    #[error("the sqlite worker failed: {0}")]
    Worker(String),
}

/// The store shared by all requests. Cheap to clone.
#[derive(Clone)]
pub struct KvStore(Inner);

#[derive(Clone)]
enum Inner {
    Memory(Arc<Mutex<HashMap<String, Vec<u8>>>>),
    Sqlite(Arc<Sqlite>),
    Redis(redis::aio::ConnectionManager),
}

impl std::fmt::Debug for KvStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match &self.0 {
            Inner::Memory(_) => "memory",
            Inner::Sqlite(_) => "sqlite",
            Inner::Redis(_) => "redis",
        };
        f.debug_tuple("KvStore").field(&kind).finish()
    }
}

/// How long a Redis command may wait for its answer before it fails (a paused or overloaded
/// server); also the bound on each connection attempt.
pub const REDIS_RESPONSE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// Free SQLite pages that trigger an incremental vacuum after a delete (4 KiB pages: 1 MiB).
const SQLITE_VACUUM_PAGES: i64 = 256;

/// The label of the store in Spin's SQLite table (this host serves only `default`).
const LABEL: &str = "default";

/// Atomic compare-and-swap in Redis: ARGV[1] = "1" if a value was expected (ARGV[2]), "0" if
/// the key was expected to be absent; ARGV[3] is the new value. Returns 1 if it wrote.
const REDIS_CAS: &str = r"
local current = redis.call('GET', KEYS[1])
if ARGV[1] == '0' then
  if current then return 0 end
elseif current ~= ARGV[2] then
  return 0
end
redis.call('SET', KEYS[1], ARGV[3])
return 1
";

fn encode_counter(value: i64) -> Vec<u8> {
    value.to_le_bytes().to_vec()
}

fn decode_counter(key: &str, bytes: Option<&[u8]>) -> Result<i64, KvError> {
    match bytes {
        None => Ok(0),
        Some(b) => <[u8; 8]>::try_from(b).map(i64::from_le_bytes).map_err(|_| KvError::NotACounter(key.to_owned())),
    }
}

impl KvStore {
    /// Opens the backend: creates the SQLite file (and its directory) and table if missing,
    /// connects to Redis (fails if it does not answer `PING`).
    pub async fn open(backend: &KvBackend) -> anyhow::Result<KvStore> {
        Ok(KvStore(match backend {
            KvBackend::Memory => Inner::Memory(Arc::default()),
            KvBackend::Sqlite(path) => {
                let path = path.clone();
                let db = tokio::task::spawn_blocking(move || Sqlite::open(&path))
                    .await
                    .context("the sqlite opener panicked")??;
                Inner::Sqlite(Arc::new(db))
            }
            KvBackend::Redis(url) => {
                let shown = backend.to_string();
                let client = redis::Client::open(url.as_str()).with_context(|| format!("{shown}: bad URL"))?;
                // A command waits at most REDIS_RESPONSE_TIMEOUT; a broken connection is
                // replaced on the next command, after one quick retry.
                let config = redis::aio::ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(REDIS_RESPONSE_TIMEOUT))
                    .set_response_timeout(Some(REDIS_RESPONSE_TIMEOUT))
                    .set_number_of_retries(1)
                    .set_max_delay(std::time::Duration::from_millis(200));
                let mut conn = tokio::time::timeout(
                    std::time::Duration::from_secs(15),
                    redis::aio::ConnectionManager::new_with_config(client, config),
                )
                .await
                .with_context(|| format!("{shown}: no answer"))?
                .with_context(|| format!("connecting to {shown}"))?;
                let _: String =
                    redis::cmd("PING").query_async(&mut conn).await.with_context(|| format!("{shown}: PING failed"))?;
                Inner::Redis(conn)
            }
        }))
    }

    fn memory(map: &Mutex<HashMap<String, Vec<u8>>>) -> MutexGuard<'_, HashMap<String, Vec<u8>>> {
        map.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs the read-only `f` on the SQLite connection: right here if the connection is free
    /// (a WAL read never waits for a writer: microseconds), else on the blocking pool.
    async fn sqlite_read<R: Send + 'static>(
        db: &Arc<Sqlite>,
        f: impl FnOnce(&mut rusqlite::Connection) -> Result<R, KvError> + Send + 'static,
    ) -> Result<R, KvError> {
        if let Ok(mut conn) = db.conn.try_lock() {
            return f(&mut conn);
        }
        Self::sqlite(db, f).await
    }

    /// Runs `f` on the SQLite connection on the blocking pool (a write may wait up to the busy
    /// timeout for another process's lock).
    async fn sqlite<R: Send + 'static>(
        db: &Arc<Sqlite>,
        f: impl FnOnce(&mut rusqlite::Connection) -> Result<R, KvError> + Send + 'static,
    ) -> Result<R, KvError> {
        let db = db.clone();
        tokio::task::spawn_blocking(move || {
            let mut conn = db.conn.lock().unwrap_or_else(|e| e.into_inner());
            f(&mut conn)
        })
        .await
        .map_err(|e| KvError::Worker(e.to_string()))?
    }

    /// The value of `key`.
    pub async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, KvError> {
        match &self.0 {
            Inner::Memory(map) => Ok(Self::memory(map).get(key).cloned()),
            Inner::Sqlite(db) => {
                let key = key.to_owned();
                Self::sqlite_read(db, move |c| Ok(sqlite_get(c, &key)?)).await
            }
            Inner::Redis(conn) => Ok(redis::cmd("GET").arg(key).query_async(&mut conn.clone()).await?),
        }
    }

    /// Sets `key` to `value`.
    pub async fn set(&self, key: &str, value: Vec<u8>) -> Result<(), KvError> {
        match &self.0 {
            Inner::Memory(map) => {
                Self::memory(map).insert(key.to_owned(), value);
                Ok(())
            }
            Inner::Sqlite(db) => {
                let key = key.to_owned();
                Self::sqlite(db, move |c| Ok(sqlite_set(c, &key, &value)?)).await
            }
            Inner::Redis(conn) => Ok(redis::cmd("SET").arg(key).arg(value).query_async(&mut conn.clone()).await?),
        }
    }

    /// Deletes `key` (no error if absent).
    pub async fn delete(&self, key: &str) -> Result<(), KvError> {
        match &self.0 {
            Inner::Memory(map) => {
                Self::memory(map).remove(key);
                Ok(())
            }
            Inner::Sqlite(db) => {
                let key = key.to_owned();
                Self::sqlite(db, move |c| {
                    c.prepare_cached("DELETE FROM spin_key_value WHERE store = ?1 AND key = ?2")?
                        .execute(params![LABEL, key])?;
                    sqlite_return_free_pages(c);
                    Ok(())
                })
                .await
            }
            Inner::Redis(conn) => Ok(redis::cmd("DEL").arg(key).query_async(&mut conn.clone()).await?),
        }
    }

    /// Whether `key` exists.
    pub async fn exists(&self, key: &str) -> Result<bool, KvError> {
        match &self.0 {
            Inner::Memory(map) => Ok(Self::memory(map).contains_key(key)),
            Inner::Sqlite(db) => {
                let key = key.to_owned();
                Self::sqlite_read(db, move |c| {
                    Ok(c.prepare_cached("SELECT 1 FROM spin_key_value WHERE store = ?1 AND key = ?2")?
                        .exists(params![LABEL, key])?)
                })
                .await
            }
            Inner::Redis(conn) => Ok(redis::cmd("EXISTS").arg(key).query_async::<i64>(&mut conn.clone()).await? > 0),
        }
    }

    /// All keys, sorted. (Redis: every key of the database, by `SCAN`.)
    pub async fn keys(&self) -> Result<Vec<String>, KvError> {
        let mut keys = match &self.0 {
            Inner::Memory(map) => Self::memory(map).keys().cloned().collect(),
            Inner::Sqlite(db) => {
                Self::sqlite_read(db, |c| {
                    let mut stmt = c.prepare_cached("SELECT key FROM spin_key_value WHERE store = ?1")?;
                    let keys = stmt.query_map(params![LABEL], |row| row.get(0))?.collect::<Result<Vec<String>, _>>()?;
                    Ok(keys)
                })
                .await?
            }
            Inner::Redis(conn) => {
                let mut conn = conn.clone();
                let mut keys = Vec::new();
                let mut cursor = 0u64;
                loop {
                    let (next, page): (u64, Vec<String>) =
                        redis::cmd("SCAN").arg(cursor).arg("COUNT").arg(1000).query_async(&mut conn).await?;
                    keys.extend(page);
                    if next == 0 {
                        break;
                    }
                    cursor = next;
                }
                keys.sort();
                keys.dedup(); // SCAN may return a key twice
                keys
            }
        };
        keys.sort();
        Ok(keys)
    }

    /// Everything (for tests and diagnostics).
    pub async fn snapshot(&self) -> Result<BTreeMap<String, Vec<u8>>, KvError> {
        let keys = self.keys().await?;
        let values = self.get_many(&keys).await?;
        Ok(values.into_iter().filter_map(|(k, v)| v.map(|v| (k, v))).collect())
    }

    /// Atomically adds `delta` to the counter at `key` (absent = 0) and returns the new value.
    pub async fn increment(&self, key: &str, delta: i64) -> Result<i64, KvError> {
        match &self.0 {
            Inner::Memory(map) => {
                let mut map = Self::memory(map);
                let current = decode_counter(key, map.get(key).map(Vec::as_slice))?;
                let new = current.checked_add(delta).ok_or_else(|| KvError::Overflow(key.to_owned()))?;
                map.insert(key.to_owned(), encode_counter(new));
                Ok(new)
            }
            Inner::Sqlite(db) => {
                let key = key.to_owned();
                Self::sqlite(db, move |c| {
                    let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
                    let current = decode_counter(&key, sqlite_get(&tx, &key)?.as_deref())?;
                    let new = current.checked_add(delta).ok_or_else(|| KvError::Overflow(key.clone()))?;
                    sqlite_set(&tx, &key, &encode_counter(new))?;
                    tx.commit()?;
                    Ok(new)
                })
                .await
            }
            Inner::Redis(conn) => match redis::cmd("INCRBY").arg(key).arg(delta).query_async(&mut conn.clone()).await {
                Ok(n) => Ok(n),
                Err(e) if e.to_string().contains("overflow") => Err(KvError::Overflow(key.to_owned())),
                Err(e) if e.to_string().contains("not an integer") => Err(KvError::NotACounter(key.to_owned())),
                Err(e) => Err(e.into()),
            },
        }
    }

    /// Atomically sets `key` to `new` if it still holds exactly `expected` (`None`: if it is
    /// absent). Returns whether it wrote.
    pub async fn compare_and_swap(&self, key: &str, expected: Option<&[u8]>, new: Vec<u8>) -> Result<bool, KvError> {
        match &self.0 {
            Inner::Memory(map) => {
                let mut map = Self::memory(map);
                if map.get(key).map(Vec::as_slice) != expected {
                    return Ok(false);
                }
                map.insert(key.to_owned(), new);
                Ok(true)
            }
            Inner::Sqlite(db) => {
                let key = key.to_owned();
                let expected = expected.map(<[u8]>::to_vec);
                Self::sqlite(db, move |c| {
                    let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
                    if sqlite_get(&tx, &key)? != expected {
                        return Ok(false); // the transaction rolls back on drop (nothing written)
                    }
                    sqlite_set(&tx, &key, &new)?;
                    tx.commit()?;
                    Ok(true)
                })
                .await
            }
            Inner::Redis(conn) => {
                let script = redis::Script::new(REDIS_CAS);
                let mut invocation = script.key(key);
                match expected {
                    Some(bytes) => invocation.arg("1").arg(bytes),
                    None => invocation.arg("0").arg(""),
                };
                let wrote: i64 = invocation.arg(new).invoke_async(&mut conn.clone()).await?;
                Ok(wrote == 1)
            }
        }
    }

    /// The values of `keys` (`None` where absent), in order.
    pub async fn get_many(&self, keys: &[String]) -> Result<Vec<(String, Option<Vec<u8>>)>, KvError> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        match &self.0 {
            Inner::Memory(map) => {
                let map = Self::memory(map);
                Ok(keys.iter().map(|k| (k.clone(), map.get(k).cloned())).collect())
            }
            Inner::Sqlite(db) => {
                let keys = keys.to_vec();
                Self::sqlite_read(db, move |c| {
                    let tx = c.transaction()?;
                    let values =
                        keys.into_iter().map(|k| Ok((k.clone(), sqlite_get(&tx, &k)?))).collect::<Result<_, KvError>>();
                    tx.commit()?;
                    values
                })
                .await
            }
            Inner::Redis(conn) => {
                let values: Vec<Option<Vec<u8>>> = redis::cmd("MGET").arg(keys).query_async(&mut conn.clone()).await?;
                Ok(keys.iter().cloned().zip(values).collect())
            }
        }
    }

    /// Sets every pair (one transaction in SQLite, one `MSET` in Redis).
    pub async fn set_many(&self, pairs: Vec<(String, Vec<u8>)>) -> Result<(), KvError> {
        if pairs.is_empty() {
            return Ok(());
        }
        match &self.0 {
            Inner::Memory(map) => {
                Self::memory(map).extend(pairs);
                Ok(())
            }
            Inner::Sqlite(db) => {
                Self::sqlite(db, move |c| {
                    let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
                    for (k, v) in &pairs {
                        sqlite_set(&tx, k, v)?;
                    }
                    tx.commit()?;
                    Ok(())
                })
                .await
            }
            Inner::Redis(conn) => {
                let mut cmd = redis::cmd("MSET");
                for (k, v) in &pairs {
                    cmd.arg(k).arg(v);
                }
                Ok(cmd.query_async(&mut conn.clone()).await?)
            }
        }
    }

    /// Deletes every key (absent ones are skipped).
    pub async fn delete_many(&self, keys: Vec<String>) -> Result<(), KvError> {
        if keys.is_empty() {
            return Ok(());
        }
        match &self.0 {
            Inner::Memory(map) => {
                let mut map = Self::memory(map);
                for k in &keys {
                    map.remove(k);
                }
                Ok(())
            }
            Inner::Sqlite(db) => {
                Self::sqlite(db, move |c| {
                    let tx = c.transaction_with_behavior(TransactionBehavior::Immediate)?;
                    for k in &keys {
                        tx.prepare_cached("DELETE FROM spin_key_value WHERE store = ?1 AND key = ?2")?
                            .execute(params![LABEL, k])?;
                    }
                    tx.commit()?;
                    sqlite_return_free_pages(c);
                    Ok(())
                })
                .await
            }
            Inner::Redis(conn) => Ok(redis::cmd("DEL").arg(keys).query_async(&mut conn.clone()).await?),
        }
    }
}

/// The SQLite database. One connection serialised by a mutex (each call is short); other
/// processes may use the same file (WAL mode, 5 s busy timeout, `BEGIN IMMEDIATE` for
/// read-modify-write).
struct Sqlite {
    conn: Mutex<rusqlite::Connection>,
}

impl Sqlite {
    fn open(path: &Path) -> anyhow::Result<Sqlite> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        let setup = || -> rusqlite::Result<rusqlite::Connection> {
            let conn = rusqlite::Connection::open(path)?;
            conn.busy_timeout(std::time::Duration::from_secs(5))?;
            // WAL: readers do not block the writer; NORMAL: a commit survives a crash of this
            // process (not necessarily a power loss), without an fsync per write.
            // Incremental auto-vacuum: freed pages can be given back to the file system
            // (`sqlite_return_free_pages`). It takes effect on a new file; an existing file
            // (e.g. Spin's) is converted by one VACUUM, skipped while another process holds it.
            if conn.pragma_query_value(None, "auto_vacuum", |row| row.get::<_, i64>(0))? != 2 {
                conn.pragma_update(None, "auto_vacuum", "INCREMENTAL")?;
                if let Err(e) = conn.execute_batch("VACUUM") {
                    eprintln!("serve: {}: not converted to incremental vacuum now: {e}", path.display());
                }
            }
            conn.pragma_update(None, "journal_mode", "WAL")?;
            conn.pragma_update(None, "synchronous", "NORMAL")?;
            // The write-ahead log is cut back to this size after each checkpoint.
            conn.pragma_update(None, "journal_size_limit", 4 * 1024 * 1024)?;
            conn.execute_batch(
                "CREATE TABLE IF NOT EXISTS spin_key_value (
                    store TEXT NOT NULL, key TEXT NOT NULL, value BLOB NOT NULL, PRIMARY KEY (store, key))",
            )?;
            Ok(conn)
        };
        let conn = setup().with_context(|| format!("{} is not a usable key-value database", path.display()))?;
        Ok(Sqlite { conn: Mutex::new(conn) })
    }
}

/// Gives free pages back to the file system once there are [`SQLITE_VACUUM_PAGES`] of them:
/// an incremental vacuum, then a checkpoint that also empties the write-ahead log (it waits, up
/// to the busy timeout, for other processes' readers). Best effort: a failure is logged, never
/// the caller's.
fn sqlite_return_free_pages(c: &rusqlite::Connection) {
    let result = (|| -> rusqlite::Result<()> {
        let free: i64 = c.pragma_query_value(None, "freelist_count", |row| row.get(0))?;
        if free >= SQLITE_VACUUM_PAGES {
            // Each step frees pages: run the statement to its end.
            let mut vacuum = c.prepare("PRAGMA incremental_vacuum")?;
            let mut rows = vacuum.query([])?;
            while rows.next()?.is_some() {}
            c.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
        }
        Ok(())
    })();
    if let Err(e) = result {
        eprintln!("serve: sqlite: returning free pages: {e}");
    }
}

fn sqlite_get(c: &rusqlite::Connection, key: &str) -> rusqlite::Result<Option<Vec<u8>>> {
    c.prepare_cached("SELECT value FROM spin_key_value WHERE store = ?1 AND key = ?2")?
        .query_row(params![LABEL, key], |row| row.get(0))
        .optional()
}

fn sqlite_set(c: &rusqlite::Connection, key: &str, value: &[u8]) -> rusqlite::Result<()> {
    c.prepare_cached(
        "INSERT INTO spin_key_value (store, key, value) VALUES (?1, ?2, ?3)
         ON CONFLICT (store, key) DO UPDATE SET value = excluded.value",
    )?
    .execute(params![LABEL, key, value])?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backend_flag_parses_and_hides_passwords() {
        assert_eq!("memory".parse::<KvBackend>().unwrap(), KvBackend::Memory);
        assert_eq!("sqlite:/tmp/x.db".parse::<KvBackend>().unwrap(), KvBackend::Sqlite("/tmp/x.db".into()));
        assert_eq!(
            "redis://127.0.0.1:6379".parse::<KvBackend>().unwrap(),
            KvBackend::Redis("redis://127.0.0.1:6379".into())
        );
        assert!("sqlite:".parse::<KvBackend>().is_err());
        assert!("file:/tmp/kv.json".parse::<KvBackend>().is_err());
        let shown = KvBackend::Redis("redis://user:hunter2@db:6379/1".into()).to_string();
        assert_eq!(shown, "redis redis://db:6379/1");
    }

    /// A burst of large values written and deleted: the SQLite file (and its write-ahead log)
    /// give the freed pages back, a file written by another host without auto-vacuum included.
    #[tokio::test]
    async fn sqlite_returns_free_pages() {
        let dir = std::env::temp_dir().join(format!("captchaai-serve-vacuum-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(SQLITE_FILE);
        // A file as Spin (or this host's earlier versions) created it: no auto-vacuum, WAL.
        rusqlite::Connection::open(&path)
            .unwrap()
            .execute_batch(
                "PRAGMA journal_mode = WAL; CREATE TABLE spin_key_value (store TEXT NOT NULL, key TEXT NOT NULL, value BLOB NOT NULL,
                 PRIMARY KEY (store, key))",
            )
            .unwrap();
        let size = || {
            let file =
                |suffix: &str| std::fs::metadata(format!("{}{suffix}", path.display())).map(|m| m.len()).unwrap_or(0);
            file("") + file("-wal")
        };
        let kv = KvStore::open(&KvBackend::Sqlite(path.clone())).await.unwrap();
        let empty = size();
        let keys: Vec<String> = (0..20).map(|i| format!("solve/{i}/base")).collect();
        for key in &keys {
            kv.set(key, vec![7; 200_000]).await.unwrap();
        }
        kv.set("kept", b"small".to_vec()).await.unwrap();
        let full = size();
        for key in &keys[..10] {
            kv.delete(key).await.unwrap();
        }
        kv.delete_many(keys[10..].to_vec()).await.unwrap();
        let after = size();
        eprintln!("sqlite file + wal: empty {empty} B, 4 MB stored {full} B, deleted {after} B");
        assert!(full > 4_000_000, "{full}");
        assert!(after < 1_000_000, "freed pages were not returned: {after} B of {full} B");
        assert_eq!(kv.get("kept").await.unwrap().as_deref(), Some(&b"small"[..]));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn runtime_config_default_store() {
        let dir = std::env::temp_dir().join(format!("captchaai-serve-rc-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("runtime-config.toml");
        std::fs::write(&file, "[key_value_store.default]\ntype = \"redis\"\nurl = \"redis://127.0.0.1:7000\"\n")
            .unwrap();
        assert_eq!(
            backend_from_runtime_config(&file).unwrap(),
            Some(KvBackend::Redis("redis://127.0.0.1:7000".into()))
        );
        std::fs::write(&file, "[key_value_store.default]\ntype = \"spin\"\npath = \"kv.db\"\n").unwrap();
        assert_eq!(backend_from_runtime_config(&file).unwrap(), Some(KvBackend::Sqlite(dir.join("kv.db"))));
        std::fs::write(&file, "[key_value_store.other]\ntype = \"spin\"\n").unwrap();
        assert!(backend_from_runtime_config(&file).is_err());
        std::fs::write(&file, "[key_value_store.default]\ntype = \"azure_cosmos\"\n").unwrap();
        assert!(backend_from_runtime_config(&file).is_err());
        std::fs::write(&file, "").unwrap();
        assert_eq!(backend_from_runtime_config(&file).unwrap(), None);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
