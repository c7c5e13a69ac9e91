//! Damaged files: a log cut at random offsets and single flipped bytes in the log and in the
//! database file. Each case either recovers every acknowledged write or refuses to open with
//! an error that names the file; none silently loses one. Seeds are printed (set
//! `JOBSD_TEST_SEED` to replay one).

use super::*;

/// Cases per test.
const CASES: usize = 100;

/// A seeded generator; the seed is printed so that a failure can be replayed.
fn rng(test: &str) -> fastrand::Rng {
    let seed = std::env::var("JOBSD_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| fastrand::u64(..));
    println!("{test}: JOBSD_TEST_SEED={seed}");
    fastrand::Rng::with_seed(seed)
}

/// 20 acknowledged batches of different sizes, only in the log; the crashed copy, the jobs
/// they made (in key order, which is batch order) and the end of the last record.
async fn logged() -> (TempDir, Vec<LoadedJob>, u64) {
    let dir = tempfile::tempdir().unwrap();
    let s = Redb::open_with(dir.path(), no_checkpoints()).unwrap();
    for i in 0..20 {
        write1(&s, put(&key(i), job(1, &"x".repeat(1 + i * 37)), true)).await;
    }
    let live = state(&s).await;
    let crashed = crash_copy(dir.path());
    drop(s);
    let (records, _) = read_records(&crashed.path().join(WAL_FILE), 0).unwrap();
    assert_eq!(records.len(), 20);
    let end = records.last().map(|r| r.offset + r.size).unwrap();
    (crashed, live, end)
}

/// A fresh copy of `dir` with `damage` done to its file `name`.
fn damaged(dir: &Path, name: &str, damage: impl FnOnce(&mut Vec<u8>)) -> TempDir {
    let copy = crash_copy(dir);
    let path = copy.path().join(name);
    let mut bytes = std::fs::read(&path).unwrap();
    damage(&mut bytes);
    std::fs::write(&path, bytes).unwrap();
    copy
}

/// Opens `dir`: the jobs it holds, or the error's text (which must name `file`).
async fn open_or_refusal(dir: &Path, file: &str, what: &str) -> Result<Vec<LoadedJob>, String> {
    match Redb::open(dir) {
        Ok(s) => {
            // Every job must read back whole, or the read names what is corrupt.
            let mut scan = s.scan("", 64).await.map_err(|e| e.to_string())?;
            let mut jobs = Vec::new();
            while let Some(page) = scan.next_page().await.map_err(|e| e.to_string())? {
                jobs.extend(page);
            }
            Ok(jobs)
        }
        Err(err) => {
            let text = err.to_string();
            assert!(
                text.contains(&dir.join(file).display().to_string()),
                "{what}: the refusal does not name {file}: {text}"
            );
            Err(text)
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_cut_anywhere_keeps_every_record_wholly_before_the_cut() {
    let (crashed, live, end) = logged().await;
    let (records, _) = read_records(&crashed.path().join(WAL_FILE), 0).unwrap();
    let mut rng = rng("a_log_cut_anywhere_keeps_every_record_wholly_before_the_cut");
    for _ in 0..CASES {
        let cut = rng.u64(0..=end + 64);
        let copy = damaged(crashed.path(), WAL_FILE, |b| b.truncate(cut as usize));
        let whole = records.iter().filter(|r| r.offset + r.size <= cut).count();
        let what = format!("cut at {cut} of {end}");
        // A cut is what a crash leaves: never a refusal.
        let got = open_or_refusal(copy.path(), WAL_FILE, &what)
            .await
            .unwrap_or_else(|e| panic!("{what}: refused: {e}"));
        assert!(got.len() >= whole, "{what}: {} of {whole} kept", got.len());
        assert!(
            got == live[..got.len()],
            "{what}: not the writes before the cut"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flipped_byte_in_the_log_recovers_everything_or_refuses_naming_it() {
    let (crashed, live, end) = logged().await;
    let mut rng = rng("a_flipped_byte_in_the_log_recovers_everything_or_refuses_naming_it");
    let mut refused = 0;
    for _ in 0..CASES {
        // Mostly inside the records, sometimes in the zeros after them.
        let at = rng.usize(0..end as usize + 32);
        let bit = 1u8 << rng.u8(0..8);
        let copy = damaged(crashed.path(), WAL_FILE, |b| b[at] ^= bit);
        let what = format!("bit {bit:#04x} of byte {at} flipped (records end at {end})");
        match open_or_refusal(copy.path(), WAL_FILE, &what).await {
            Ok(got) => assert!(got == live, "{what}: opened, but not with every write"),
            Err(_) => refused += 1,
        }
    }
    println!("{refused} of {CASES} flips refused");
    assert!(refused > 0, "no flip inside a record was noticed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flipped_byte_in_the_database_recovers_everything_or_refuses_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let s = Redb::open(dir.path()).unwrap();
    for i in 0..50 {
        write1(&s, put(&key(i), job(1, &"y".repeat(1 + i * 11)), true)).await;
    }
    let live = state(&s).await;
    s.close().await.unwrap();
    drop(s);
    let len = std::fs::metadata(dir.path().join(DB_FILE)).unwrap().len() as usize;
    let mut rng = rng("a_flipped_byte_in_the_database_recovers_everything_or_refuses_naming_it");
    let mut refused = 0;
    for _ in 0..CASES {
        let at = rng.usize(0..len);
        let bit = 1u8 << rng.u8(0..8);
        let copy = damaged(dir.path(), DB_FILE, |b| b[at] ^= bit);
        let what = format!("bit {bit:#04x} of byte {at} of {len} flipped");
        match open_or_refusal(copy.path(), DB_FILE, &what).await {
            Ok(got) => assert!(got == live, "{what}: opened, but not with every job"),
            Err(e) if e.contains(DB_FILE) => refused += 1,
            Err(e) => panic!("{what}: {e}"),
        }
    }
    println!("{refused} of {CASES} flips refused");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_checksum_pass_runs_as_store_check_says() {
    // A small file: `auto` verifies it, like `always`; `never` opens it unchecked.
    let dir = tempfile::tempdir().unwrap();
    let s = Redb::open(dir.path()).unwrap();
    for i in 0..50 {
        write1(&s, put(&key(i), job(1, &"z".repeat(1 + i * 13)), true)).await;
    }
    s.close().await.unwrap();
    drop(s);
    let len = std::fs::metadata(dir.path().join(DB_FILE)).unwrap().len() as usize;
    let with = |check| RedbOptions {
        check,
        ..RedbOptions::default()
    };
    let mut rng = rng("the_checksum_pass_runs_as_store_check_says");
    let mut shown = 0;
    for _ in 0..200 {
        let at = rng.usize(0..len);
        let copy = damaged(dir.path(), DB_FILE, |b| b[at] ^= 0x10);
        let auto = Redb::open_with(copy.path(), with(StoreCheck::Auto)).map(drop);
        if auto.is_ok() {
            continue;
        }
        let copy = damaged(dir.path(), DB_FILE, |b| b[at] ^= 0x10);
        let always = Redb::open_with(copy.path(), with(StoreCheck::Always)).map(drop);
        assert!(
            always.is_err(),
            "byte {at}: `always` opened a file `auto` refused"
        );
        let copy = damaged(dir.path(), DB_FILE, |b| b[at] ^= 0x10);
        if opens_unchecked(copy.path()) {
            // Only the checksum pass saw this flip (others redb notices however it opens).
            shown += 1;
        }
    }
    assert!(shown > 0, "no flip was found only by the checksum pass");
}

/// The variable that makes [`open_unchecked_in_a_child`] open a data dir.
const UNCHECKED_DIR: &str = "JOBSD_TEST_OPEN_UNCHECKED";

/// Whether the damaged data dir `dir` opens with `--store-check never`, asked of a child
/// process: on some flips redb asserts while it commits the recovery and asserts again in a
/// destructor while that unwinds, which aborts the process (nothing is written). A crash of
/// the child counts as a refusal.
fn opens_unchecked(dir: &Path) -> bool {
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "store::tests::wal::damage::open_unchecked_in_a_child",
            "--test-threads=1",
            "--quiet",
        ])
        .env(UNCHECKED_DIR, dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    status.success()
}

/// The child of [`opens_unchecked`]: opens the data dir it is given with `--store-check
/// never` and fails when that is refused. Without the variable (a normal run) it does nothing.
#[test]
fn open_unchecked_in_a_child() {
    let Some(dir) = std::env::var_os(UNCHECKED_DIR) else {
        return;
    };
    let options = RedbOptions {
        check: StoreCheck::Never,
        ..RedbOptions::default()
    };
    assert!(Redb::open_with(Path::new(&dir), options).is_ok());
}

#[test]
fn auto_verifies_files_up_to_its_bound_only() {
    for (check, small, large) in [
        (StoreCheck::Auto, true, false),
        (StoreCheck::Always, true, true),
        (StoreCheck::Never, false, false),
    ] {
        assert_eq!(check.applies_to(AUTO_CHECK_MAX_BYTES), small, "{check:?}");
        assert_eq!(
            check.applies_to(AUTO_CHECK_MAX_BYTES + 1),
            large,
            "{check:?}"
        );
    }
}
