//! The serve host's key-value stores (`captchaai_serve::KvStore`) against real backends: the
//! same checks for memory, SQLite (a file under the test's target dir) and Redis (a
//! redis-server this test starts on a free loopback port; those tests are ignored by default
//! and run with `--include-ignored`). Atomicity is checked with concurrent callers on separate handles (for
//! SQLite and Redis: separate connections, as separate processes would have).

mod support;

use std::path::PathBuf;
use std::sync::Arc;

use captchaai_serve::kv::KvError;
use captchaai_serve::{KvBackend, KvStore};
use support::redis::RedisServer;

fn sqlite_path(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("serve-kv-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir.join("sqlite_key_value.db")
}

async fn open(backend: &KvBackend) -> KvStore {
    KvStore::open(backend).await.unwrap_or_else(|e| panic!("opening {backend}: {e:#}"))
}

/// get / set / delete / exists / keys / batch, binary and empty values.
async fn basic_operations(kv: &KvStore) {
    assert_eq!(kv.get("a").await.unwrap(), None);
    assert!(!kv.exists("a").await.unwrap());
    let binary: Vec<u8> = (0..=255).collect();
    kv.set("a", binary.clone()).await.unwrap();
    kv.set("b", b"two".to_vec()).await.unwrap();
    kv.set("b", b"2".to_vec()).await.unwrap();
    kv.set("empty", Vec::new()).await.unwrap();
    kv.set("ключ/ü", b"unicode key".to_vec()).await.unwrap();
    assert_eq!(kv.get("a").await.unwrap(), Some(binary.clone()));
    assert_eq!(kv.get("b").await.unwrap().as_deref(), Some(&b"2"[..]));
    assert_eq!(kv.get("empty").await.unwrap(), Some(Vec::new()));
    assert!(kv.exists("empty").await.unwrap());
    assert_eq!(kv.keys().await.unwrap(), ["a", "b", "empty", "ключ/ü"]);
    kv.delete("a").await.unwrap();
    kv.delete("never-set").await.unwrap();
    assert_eq!(kv.get("a").await.unwrap(), None);
    assert_eq!(kv.keys().await.unwrap(), ["b", "empty", "ключ/ü"]);

    kv.set_many(vec![("m1".into(), b"x".to_vec()), ("m2".into(), b"y".to_vec())]).await.unwrap();
    let got = kv.get_many(&["m1".into(), "nope".into(), "m2".into()]).await.unwrap();
    assert_eq!(
        got,
        [("m1".to_owned(), Some(b"x".to_vec())), ("nope".to_owned(), None), ("m2".to_owned(), Some(b"y".to_vec()))]
    );
    kv.delete_many(vec!["m1".into(), "m2".into(), "nope".into()]).await.unwrap();
    assert_eq!(kv.get_many(&["m1".into(), "m2".into()]).await.unwrap(), [("m1".into(), None), ("m2".into(), None)]);
    // A big value (an image task's snapshot is ~1.5 MB).
    let big: Vec<u8> = (0..2_000_000u32).map(|i| (i % 251) as u8).collect();
    kv.set("big", big.clone()).await.unwrap();
    assert_eq!(kv.get("big").await.unwrap(), Some(big));
    assert_eq!(kv.snapshot().await.unwrap().len(), 4);
}

/// increment and compare-and-swap, one caller.
async fn atomic_operations(kv: &KvStore) {
    assert_eq!(kv.increment("n", 0).await.unwrap(), 0);
    assert_eq!(kv.increment("n", 5).await.unwrap(), 5);
    assert_eq!(kv.increment("n", -7).await.unwrap(), -2);
    assert_eq!(kv.increment("n", 0).await.unwrap(), -2);
    kv.set("text", b"hello".to_vec()).await.unwrap();
    assert!(matches!(kv.increment("text", 1).await, Err(KvError::NotACounter(k)) if k == "text"));
    assert_eq!(kv.increment("big-n", i64::MAX).await.unwrap(), i64::MAX);
    assert!(matches!(kv.increment("big-n", 1).await, Err(KvError::Overflow(_))));
    assert_eq!(kv.increment("big-n", 0).await.unwrap(), i64::MAX, "a failed increment changes nothing");

    // Insert-if-absent, then only over the exact current value.
    assert!(kv.compare_and_swap("lease", None, b"holder-1".to_vec()).await.unwrap());
    assert!(!kv.compare_and_swap("lease", None, b"holder-2".to_vec()).await.unwrap());
    assert!(!kv.compare_and_swap("lease", Some(b"holder-x"), b"holder-2".to_vec()).await.unwrap());
    assert_eq!(kv.get("lease").await.unwrap().as_deref(), Some(&b"holder-1"[..]));
    assert!(kv.compare_and_swap("lease", Some(b"holder-1"), b"holder-2".to_vec()).await.unwrap());
    assert_eq!(kv.get("lease").await.unwrap().as_deref(), Some(&b"holder-2"[..]));
    kv.delete("lease").await.unwrap();
    assert!(!kv.compare_and_swap("lease", Some(b"holder-2"), b"holder-3".to_vec()).await.unwrap());
    assert_eq!(kv.get("lease").await.unwrap(), None);
}

const TASKS: usize = 48;
const ROUNDS: usize = 40;

/// Many tasks on two handles: increments end at the exact sum; a counter kept with
/// compare-and-swap (read, swap, retry on conflict) loses no update.
async fn concurrent_callers(a: &KvStore, b: &KvStore) {
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..TASKS {
        let kv = if i % 2 == 0 { a.clone() } else { b.clone() };
        tasks.spawn(async move {
            for _ in 0..ROUNDS {
                kv.increment("hits", 3).await.unwrap();
            }
        });
    }
    while let Some(r) = tasks.join_next().await {
        r.unwrap();
    }
    assert_eq!(a.increment("hits", 0).await.unwrap(), (TASKS * ROUNDS * 3) as i64);

    let conflicts = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    a.set("cas-counter", b"0".to_vec()).await.unwrap();
    for i in 0..TASKS {
        let kv = if i % 2 == 0 { a.clone() } else { b.clone() };
        let conflicts = conflicts.clone();
        tasks.spawn(async move {
            for _ in 0..ROUNDS / 4 {
                loop {
                    let seen = kv.get("cas-counter").await.unwrap().expect("counter exists");
                    let n: u64 = std::str::from_utf8(&seen).unwrap().parse().unwrap();
                    if kv.compare_and_swap("cas-counter", Some(&seen), (n + 1).to_string().into_bytes()).await.unwrap()
                    {
                        break;
                    }
                    conflicts.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            }
        });
    }
    while let Some(r) = tasks.join_next().await {
        r.unwrap();
    }
    let total = a.get("cas-counter").await.unwrap().unwrap();
    assert_eq!(std::str::from_utf8(&total).unwrap(), (TASKS * (ROUNDS / 4)).to_string());
    eprintln!("cas counter: {} conflicts retried", conflicts.load(std::sync::atomic::Ordering::Relaxed));

    // Insert-if-absent races: exactly one winner.
    let mut winners = 0;
    let racers: Vec<_> = (0..TASKS)
        .map(|i| {
            let kv = if i % 2 == 0 { a.clone() } else { b.clone() };
            tokio::spawn(
                async move { kv.compare_and_swap("once", None, format!("racer-{i}").into_bytes()).await.unwrap() },
            )
        })
        .collect();
    for r in racers {
        winners += usize::from(r.await.unwrap());
    }
    assert_eq!(winners, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_store() {
    let kv = open(&KvBackend::Memory).await;
    basic_operations(&kv).await;
    atomic_operations(&kv).await;
    let fresh = open(&KvBackend::Memory).await;
    concurrent_callers(&fresh, &fresh.clone()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_store() {
    let path = sqlite_path("ops");
    let backend = KvBackend::Sqlite(path.clone());
    let kv = open(&backend).await;
    basic_operations(&kv).await;
    atomic_operations(&kv).await;
    // Two connections to one file (as two processes would have).
    let path2 = sqlite_path("concurrent");
    let a = open(&KvBackend::Sqlite(path2.clone())).await;
    let b = open(&KvBackend::Sqlite(path2.clone())).await;
    concurrent_callers(&a, &b).await;
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
    let _ = std::fs::remove_dir_all(path2.parent().unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_store_survives_reopening_and_uses_spins_table() {
    let path = sqlite_path("reopen");
    let backend = KvBackend::Sqlite(path.clone());
    {
        let kv = open(&backend).await;
        kv.set("kept", b"value".to_vec()).await.unwrap();
        assert_eq!(kv.increment("count", 41).await.unwrap(), 41);
    }
    let kv = open(&backend).await;
    assert_eq!(kv.get("kept").await.unwrap().as_deref(), Some(&b"value"[..]));
    assert_eq!(kv.increment("count", 1).await.unwrap(), 42);
    // Spin's layout: table spin_key_value(store, key, value), counters as 8 little-endian bytes.
    let conn = rusqlite_probe(&path);
    assert_eq!(
        conn,
        [
            ("default".to_owned(), "count".to_owned(), 42i64.to_le_bytes().to_vec()),
            ("default".to_owned(), "kept".to_owned(), b"value".to_vec())
        ]
    );
    // A file that is not a database is a clear error, not a panic.
    let junk = path.with_file_name("junk.db");
    std::fs::write(&junk, b"this is not an sqlite database, just text that is long enough to be a header").unwrap();
    let err = KvStore::open(&KvBackend::Sqlite(junk)).await.unwrap_err();
    assert!(format!("{err:#}").contains("junk.db"), "{err:#}");
    let _ = std::fs::remove_dir_all(path.parent().unwrap());
}

/// The rows of Spin's table, read with the sqlite3 CLI-free way: a second KvStore cannot show
/// the table layout, so this opens the file with rusqlite directly.
fn rusqlite_probe(path: &std::path::Path) -> Vec<(String, String, Vec<u8>)> {
    let conn = rusqlite::Connection::open(path).unwrap();
    let mut stmt = conn.prepare("SELECT store, key, value FROM spin_key_value ORDER BY key").unwrap();
    stmt.query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?))).unwrap().map(Result::unwrap).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: --include-ignored"]
async fn redis_store() {
    let redis = RedisServer::start("ops");
    let backend = KvBackend::Redis(redis.url());
    let kv = open(&backend).await;
    basic_operations(&kv).await;
    atomic_operations(&kv).await;
    // Counters are decimal strings in Redis (INCRBY), as Spin's Redis store keeps them.
    assert_eq!(kv.get("n").await.unwrap().as_deref(), Some(&b"-2"[..]));
    let a = open(&backend).await;
    let b = open(&backend).await;
    for key in a.keys().await.unwrap() {
        a.delete(&key).await.unwrap();
    }
    concurrent_callers(&a, &b).await;
}

/// redis-server restarts under an open store: calls while it is down fail with a typed error
/// (no panic, no hang), and the store reconnects by itself once it is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server: --include-ignored"]
async fn redis_store_reconnects_after_a_redis_restart() {
    let mut redis = RedisServer::start("restart");
    let kv = open(&KvBackend::Redis(redis.url())).await;
    kv.set("before", b"1".to_vec()).await.unwrap();
    redis.restart();
    let mut failures = 0;
    let mut attempts = 0;
    loop {
        attempts += 1;
        match tokio::time::timeout(std::time::Duration::from_secs(10), kv.set("after", b"2".to_vec())).await {
            Ok(Ok(())) => break,
            Ok(Err(KvError::Redis(_))) => failures += 1,
            Ok(Err(other)) => panic!("not a Redis error: {other:?}"),
            Err(_) => panic!("a call hung for 10 s after the restart"),
        }
        assert!(attempts < 50, "never reconnected after {attempts} attempts");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    eprintln!("reconnected after {failures} failed calls");
    assert_eq!(kv.get("after").await.unwrap().as_deref(), Some(&b"2"[..]));
    assert_eq!(kv.get("before").await.unwrap(), None, "the restarted server kept nothing (no persistence)");
    assert_eq!(kv.increment("n", 3).await.unwrap(), 3, "atomics work on the new connection");
}

#[tokio::test]
async fn unreachable_redis_is_a_clear_error() {
    let port = support::redis::free_port();
    let err = KvStore::open(&KvBackend::Redis(format!("redis://:secret-pw@127.0.0.1:{port}"))).await.unwrap_err();
    let text = format!("{err:#}");
    assert!(text.contains(&port.to_string()), "{text}");
    assert!(!text.contains("secret-pw"), "the password leaked: {text}");
}
