//! The key-value data behind `spin:key-value`'s `default` store: one map shared by every request
//! and instance, in memory or persisted to a JSON file after every write.
//!
//! File format: `{"format":"host-tests-kv/1","entries":{"<key>":"<base64 value>",…}}`, written to
//! a temporary file and renamed into place, so a crash never leaves a torn file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use anyhow::Context;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::{Deserialize, Serialize};

/// Where the `default` store keeps its data.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum KvBackend {
    /// In memory; lost when the server stops.
    #[default]
    Memory,
    /// A JSON file, loaded at start (missing = empty) and rewritten after every change.
    File(PathBuf),
}

impl std::str::FromStr for KvBackend {
    type Err = anyhow::Error;

    /// `memory` or `file:PATH`.
    fn from_str(s: &str) -> anyhow::Result<KvBackend> {
        if s == "memory" {
            Ok(KvBackend::Memory)
        } else if let Some(path) = s.strip_prefix("file:").filter(|p| !p.is_empty()) {
            Ok(KvBackend::File(PathBuf::from(path)))
        } else {
            anyhow::bail!("--kv expects `memory` or `file:PATH`")
        }
    }
}

const FORMAT: &str = "host-tests-kv/1";

#[derive(Serialize, Deserialize)]
struct FileContents {
    format: String,
    entries: BTreeMap<String, String>,
}

/// The shared store. Cheap to clone (an `Arc`).
#[derive(Clone)]
pub(crate) struct KvData(Arc<Inner>);

struct Inner {
    map: Mutex<BTreeMap<String, Vec<u8>>>,
    file: Option<PathBuf>,
    /// Bumped on every change (under `map`'s lock).
    generation: AtomicU64,
    /// Serialises file writes; holds the generation last written.
    written: tokio::sync::Mutex<u64>,
}

impl std::fmt::Debug for KvData {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KvData").field("keys", &self.lock().len()).field("file", &self.0.file).finish()
    }
}

impl KvData {
    /// Opens the backend: loads the file if there is one.
    pub(crate) fn open(backend: &KvBackend) -> anyhow::Result<KvData> {
        let (map, file) = match backend {
            KvBackend::Memory => (BTreeMap::new(), None),
            KvBackend::File(path) => (load(path)?, Some(path.clone())),
        };
        Ok(KvData(Arc::new(Inner {
            map: Mutex::new(map),
            file,
            generation: AtomicU64::new(0),
            written: tokio::sync::Mutex::new(0),
        })))
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, Vec<u8>>> {
        self.0.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The value of `key`.
    pub(crate) fn get(&self, key: &str) -> Option<Vec<u8>> {
        self.lock().get(key).cloned()
    }

    /// Whether `key` exists.
    pub(crate) fn exists(&self, key: &str) -> bool {
        self.lock().contains_key(key)
    }

    /// All keys, sorted.
    pub(crate) fn keys(&self) -> Vec<String> {
        self.lock().keys().cloned().collect()
    }

    /// A copy of everything.
    pub(crate) fn snapshot(&self) -> BTreeMap<String, Vec<u8>> {
        self.lock().clone()
    }

    /// Sets `key`; with a file backend, returns once the file holds this write.
    pub(crate) async fn set(&self, key: String, value: Vec<u8>) -> anyhow::Result<()> {
        {
            let mut map = self.lock();
            map.insert(key, value);
            self.0.generation.fetch_add(1, Ordering::SeqCst);
        }
        self.persist().await
    }

    /// Deletes `key` (no error if absent); persisted like [`KvData::set`].
    pub(crate) async fn delete(&self, key: &str) -> anyhow::Result<()> {
        {
            let mut map = self.lock();
            if map.remove(key).is_none() {
                return Ok(());
            }
            self.0.generation.fetch_add(1, Ordering::SeqCst);
        }
        self.persist().await
    }

    /// Writes the current contents to the file unless a newer write already covered them. Writers
    /// queue on `written`; each writes the latest state, so the file never goes backwards.
    async fn persist(&self) -> anyhow::Result<()> {
        let Some(path) = self.0.file.clone() else { return Ok(()) };
        let mut written = self.0.written.lock().await;
        let (generation, bytes) = {
            let map = self.lock();
            let generation = self.0.generation.load(Ordering::SeqCst);
            if generation <= *written {
                return Ok(());
            }
            let entries = map.iter().map(|(k, v)| (k.clone(), BASE64.encode(v))).collect();
            (generation, serde_json::to_vec(&FileContents { format: FORMAT.into(), entries })?)
        };
        tokio::task::spawn_blocking(move || write_atomically(&path, &bytes))
            .await
            .context("the key-value file writer panicked")??;
        *written = generation;
        Ok(())
    }
}

fn load(path: &Path) -> anyhow::Result<BTreeMap<String, Vec<u8>>> {
    let text = match std::fs::read(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
        Err(e) => return Err(e).with_context(|| format!("reading the key-value file {}", path.display())),
    };
    let contents: FileContents = serde_json::from_slice(&text)
        .with_context(|| format!("the key-value file {} is not valid JSON of format {FORMAT}", path.display()))?;
    if contents.format != FORMAT {
        anyhow::bail!("the key-value file {} has format {:?}, expected {FORMAT}", path.display(), contents.format);
    }
    contents
        .entries
        .into_iter()
        .map(|(k, v)| {
            let v = BASE64.decode(v).with_context(|| format!("key-value file {}: bad base64 value", path.display()))?;
            Ok((k, v))
        })
        .collect()
}

fn write_atomically(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, bytes).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("renaming {} into place", tmp.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backend_flag_parses() {
        assert_eq!("memory".parse::<KvBackend>().unwrap(), KvBackend::Memory);
        assert_eq!("file:/tmp/x.json".parse::<KvBackend>().unwrap(), KvBackend::File("/tmp/x.json".into()));
        assert!("file:".parse::<KvBackend>().is_err());
        assert!("redis".parse::<KvBackend>().is_err());
    }

    #[tokio::test]
    async fn file_backend_round_trips() {
        let dir = std::env::temp_dir().join(format!("host-tests-kv-{}", std::process::id()));
        let path = dir.join("kv.json");
        let _ = std::fs::remove_file(&path);
        let kv = KvData::open(&KvBackend::File(path.clone())).unwrap();
        kv.set("a".into(), b"\x00\xffbinary".to_vec()).await.unwrap();
        kv.set("b".into(), b"two".to_vec()).await.unwrap();
        kv.delete("b").await.unwrap();
        kv.delete("never-there").await.unwrap();
        let again = KvData::open(&KvBackend::File(path.clone())).unwrap();
        assert_eq!(again.snapshot(), BTreeMap::from([("a".to_owned(), b"\x00\xffbinary".to_vec())]));
        std::fs::write(&path, b"not json").unwrap();
        assert!(KvData::open(&KvBackend::File(path.clone())).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
