//! The run index at every schema version it has had (`fixtures/index-vN.sqlite3`, written by
//! `fixtures/make_index_fixtures.py` when each version shipped) opens with today's build, is
//! migrated in place, and keeps every run it held: id, command, status, tags and counters (and
//! no made-up figures for what it never recorded: tokens, what folding saved).

use std::path::{Path, PathBuf};

use spillway::protocol::{RunId, RunStatus};
use spillway::storage::index::{HistoryFilter, INDEX_FILE, Index};

/// The versions with a fixture; a new migration adds its file here.
const VERSIONS: [usize; 5] = [1, 2, 3, 4, 5];

fn fixture(version: usize) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fixtures/index-v{version}.sqlite3"))
}

fn user_version(path: &Path) -> i64 {
    let conn = rusqlite::Connection::open(path).unwrap();
    conn.pragma_query_value(None, "user_version", |row| row.get(0))
        .unwrap()
}

#[test]
fn every_schema_version_opens_migrated_with_its_runs() {
    let latest = user_version(&fixture(*VERSIONS.last().unwrap()));
    for version in VERSIONS {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(INDEX_FILE);
        std::fs::copy(fixture(version), &path).unwrap();
        assert_eq!(
            user_version(&path),
            version as i64,
            "the fixture is v{version}"
        );

        let index = Index::open(&path).unwrap_or_else(|e| panic!("v{version}: {e}"));
        let runs = index.history(&HistoryFilter::default()).unwrap();
        assert_eq!(runs.len(), version, "v{version} keeps its runs");
        let first: RunId = "20261121-101502-k3f7".parse().unwrap();
        let row = index.get(&first).unwrap().expect("the first run is there");
        assert_eq!(row.command, "cargo build", "v{version}");
        assert_eq!(
            row.argv.as_deref(),
            Some(&["cargo".to_string(), "build".to_string()][..])
        );
        assert_eq!((row.status, row.exit_code), (RunStatus::Exited, Some(101)));
        assert_eq!(
            (row.total_lines, row.total_bytes),
            (Some(1250), Some(40960))
        );
        assert_eq!(row.tags.get("session").map(String::as_str), Some("a"));
        assert_eq!(row.spill_capped_at_line, None);
        drop(index);
        assert!(
            user_version(&path) >= latest,
            "v{version} was migrated to this build's schema"
        );
        // Tag lookups use the table migration 2 filled from the runs' JSON.
        let index = Index::open(&path).unwrap();
        let tagged = index
            .history(&HistoryFilter {
                tags: vec![("session".into(), "a".into())],
                ..HistoryFilter::default()
            })
            .unwrap();
        assert_eq!(tagged.len(), 1, "v{version}");
        // Runs recorded before token counts have none; the one recorded with them keeps them.
        assert_eq!(row.output_tokens, None, "v{version}");
        if version >= 4 {
            let counted: RunId = "20261121-101800-cccc".parse().unwrap();
            let row = index.get(&counted).unwrap().unwrap();
            assert_eq!(
                (row.output_tokens, row.preview_tokens),
                (Some(21877), Some(3412))
            );
            // Recorded before spillway split the saving: not known, rather than 0.
            assert_eq!(row.folded_tokens, None, "v{version}");
        }
        if version >= 5 {
            let split: RunId = "20261121-101900-dddd".parse().unwrap();
            let row = index.get(&split).unwrap().unwrap();
            assert_eq!(row.folded_tokens, Some(15020));
        }
        // The stats sum the split over the runs that recorded it, and only those.
        let stats = index.token_stats(10, chrono::DateTime::UNIX_EPOCH).unwrap();
        let split = stats.totals.saved_by.map(|by| (by.runs, by.folding));
        assert_eq!(split, (version >= 5).then_some((1, 15020)), "v{version}");
    }
}
