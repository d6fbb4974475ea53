//! Opening the index: refusing a file that is not ours, the connection's settings, the
//! schema's migrations and the files' private permissions, for writing or read-only.

use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::config::DbConfig;
use rusqlite::{Connection, OpenFlags, TransactionBehavior};
use rusqlite_migration::{M, Migrations};

use super::{Index, IndexError};

/// How long a writer waits for another process's write to finish.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Size of a write-ahead log's header: a log no longer than this holds no page of the index.
const WAL_HEADER_BYTES: u64 = 32;

/// Bytes of write-ahead log past which a connection that keeps the log on close checkpoints it
/// all the same (see [`Index::keep_log_on_close`]): 100 pages' frames.
pub(super) const KEPT_LOG_MOST: u64 = WAL_HEADER_BYTES + 100 * (24 + 4096);

/// The schema, oldest migration first. Append only: a migration that has shipped is never
/// edited, since databases out there already ran it.
pub(super) const MIGRATIONS: [&str; 5] = [
    include_str!("../../../migrations/001_runs.sql"),
    include_str!("../../../migrations/002_tags_and_indexes.sql"),
    include_str!("../../../migrations/003_spill_cap.sql"),
    include_str!("../../../migrations/004_tokens.sql"),
    include_str!("../../../migrations/005_folded_tokens.sql"),
];

impl Index {
    /// Opens (creating) the index at `path`, applies migrations, sets WAL and the busy timeout.
    /// A file that is not a spillway index (or is a newer one) is refused untouched.
    pub fn open(path: &Path) -> Result<Index, IndexError> {
        let opened = |source| IndexError::Open {
            path: path.to_path_buf(),
            source,
        };
        refuse_symlink(path)?;
        create_private(path).map_err(|source| IndexError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        // NOFOLLOW as well: a symlink put there after the check is refused by SQLite itself.
        let flags = OpenFlags::default() | OpenFlags::SQLITE_OPEN_NOFOLLOW;
        let mut conn = Connection::open_with_flags(path, flags).map_err(opened)?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(opened)?;
        check_ours(&conn, path)?;
        configure(&mut conn).map_err(opened)?;
        migrate(&mut conn, path)?;
        make_private(path);
        Ok(Index {
            conn,
            path: path.to_path_buf(),
            read_only: false,
            busy_timeout: BUSY_TIMEOUT,
            keeps_log: false,
        })
    }

    /// Opens an existing index read-only, for a daemon on a disk too full to open it for
    /// writing: reading needs no room. Opening for writing fails there because SQLite must
    /// size its shared-memory file (`-shm`) for the write-ahead log, which a full disk
    /// refuses; a read-only connection gets one of two ways round it. With no log to read (no
    /// `-wal`, or one that holds no more than its header: the last daemon stopped cleanly, and
    /// a failed opening for writing may have begun a new log on the page a full disk had
    /// left) it opens the file as
    /// immutable, which needs no `-shm` at all; with a log (a daemon was killed) the `-shm`
    /// is there already, sized, and an ordinary read-only connection uses it. A database
    /// that is not ours, or not of this build's schema (which would need writing to migrate),
    /// is refused as [`Index::open`] refuses it. The first write on it opens it for writing
    /// again, so it is writable as soon as the disk has room ([`Index::writable`]).
    pub fn open_read_only(path: &Path) -> Result<Index, IndexError> {
        let opened = |source| IndexError::Open {
            path: path.to_path_buf(),
            source,
        };
        refuse_symlink(path)?;
        let mut wal = path.as_os_str().to_owned();
        wal.push("-wal");
        let no_log = !std::fs::metadata(&wal).is_ok_and(|meta| meta.len() > WAL_HEADER_BYTES);
        let query = if no_log { "immutable=1" } else { "mode=ro" };
        let uri = format!("file:{}?{query}", uri_path(path));
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
            | OpenFlags::SQLITE_OPEN_NOFOLLOW;
        let conn = Connection::open_with_flags(uri, flags).map_err(opened)?;
        conn.busy_timeout(BUSY_TIMEOUT).map_err(opened)?;
        check_ours(&conn, path)?;
        let version = schema_version(&conn)?;
        if version != MIGRATIONS.len() {
            return Err(IndexError::Migrate {
                path: path.to_path_buf(),
                reason: format!(
                    "it has schema {version}, this build {}, and it is open read-only",
                    MIGRATIONS.len()
                ),
            });
        }
        Ok(Index {
            conn,
            path: path.to_path_buf(),
            read_only: true,
            busy_timeout: BUSY_TIMEOUT,
            keeps_log: false,
        })
    }

    /// Leaves the write-ahead log to the next connection when this one closes. The last
    /// connection to close would checkpoint the log into the database and delete it, and the
    /// next to open would begin a new one: four `fsync`s, some 4 ms on this project's
    /// machine, for the one row a short-lived process (`spillway truncate`, its token count)
    /// writes. A kept log is read by the next connection as a crashed process's would be.
    ///
    /// Only while the log is short. The next connection reads and checks every page of a
    /// kept log when it opens (when no other connection has it open), up to 1,000 pages
    /// (4.1 MB) before SQLite's own checkpoint; and a connection that writes once after such
    /// a reading cannot start the log over (it no longer knows the pages are in the
    /// database), so 400 such connections in a row left 7.2 MB of log. A connection closing
    /// with a log past [`KEPT_LOG_MOST`] checkpoints it and deletes it, as the last
    /// connection to close does without this setting (one that is not the last leaves it to
    /// the next). 150 `truncate`s of 100 KB in a row (each with its token count) took
    /// 15.0-17.9 ms each with the log kept to 1,000 pages, 14.2-16.4 ms with it kept to 100
    /// (means, three rounds of the two builds in turn).
    pub fn keep_log_on_close(&mut self) -> Result<(), IndexError> {
        self.conn
            .set_db_config(DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true)
            .map_err(|source| IndexError::Open {
                path: self.path.clone(),
                source,
            })?;
        self.keeps_log = true;
        Ok(())
    }

    /// The write-ahead log's path (the file is absent when no connection has the index open).
    pub(super) fn log_path(&self) -> PathBuf {
        let mut log = self.path.clone().into_os_string();
        log.push("-wal");
        PathBuf::from(log)
    }

    /// Whether this connection was opened read-only ([`Index::open_read_only`]) and has not
    /// been opened for writing since.
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// Makes a read-only connection a writable one (see [`Index::open`]), if the disk now lets
    /// it be opened so; every write calls this first. Fails, as [`Index::open`] does, while it
    /// cannot, and the connection stays read-only.
    pub fn writable(&mut self) -> Result<(), IndexError> {
        if !self.read_only {
            return Ok(());
        }
        let mut fresh = Index::open(&self.path)?;
        fresh.set_busy_timeout(self.busy_timeout)?;
        *self = fresh;
        tracing::info!(path = %self.path.display(), "the run index is writable again");
        Ok(())
    }

    /// Sets how long a write waits for another connection's lock before it fails busy (5 s
    /// unless set): a writer that retries by itself waits less, to know sooner.
    pub fn set_busy_timeout(&mut self, timeout: Duration) -> Result<(), IndexError> {
        self.conn.busy_timeout(timeout)?;
        self.busy_timeout = timeout;
        Ok(())
    }
}

impl Drop for Index {
    /// Lets SQLite checkpoint and delete a kept log that has grown past [`KEPT_LOG_MOST`]
    /// as this connection closes (see [`Index::keep_log_on_close`]).
    fn drop(&mut self) {
        let long = || std::fs::metadata(self.log_path()).is_ok_and(|m| m.len() > KEPT_LOG_MOST);
        if self.keeps_log && long() {
            let checkpoint = self
                .conn
                .set_db_config(DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, false);
            if let Err(e) = checkpoint {
                tracing::debug!(error = %e, "the index's log is left as it is");
            }
        }
    }
}

/// An index path that is a symlink is refused: it could point the daemon's writes anywhere.
fn refuse_symlink(path: &Path) -> Result<(), IndexError> {
    if std::fs::symlink_metadata(path).is_ok_and(|meta| meta.file_type().is_symlink()) {
        return Err(IndexError::Symlink {
            path: path.to_path_buf(),
        });
    }
    Ok(())
}

/// Refuses, before anything is written to it, a file that is not a spillway index (or not yet
/// one: an empty database is ours to set up) or that a newer spillway wrote.
fn check_ours(conn: &Connection, path: &Path) -> Result<(), IndexError> {
    // The first read of the file: one that is not a database fails here.
    let version = schema_version(conn).map_err(|e| match e {
        IndexError::Sql(error @ rusqlite::Error::SqliteFailure(failure, _))
            if matches!(
                failure.code,
                rusqlite::ErrorCode::NotADatabase | rusqlite::ErrorCode::DatabaseCorrupt
            ) =>
        {
            IndexError::NotADatabase {
                path: path.to_path_buf(),
                reason: error.to_string(),
            }
        }
        other => other,
    })?;
    let tables = user_tables(conn)?;
    // Tables with no schema version, or without ours, are another program's.
    if !tables.is_empty() && (version == 0 || !tables.iter().any(|t| t == "runs")) {
        return Err(IndexError::Foreign {
            path: path.to_path_buf(),
            tables: tables.join(", "),
        });
    }
    if version > MIGRATIONS.len() {
        return Err(IndexError::TooNew {
            path: path.to_path_buf(),
            found: version,
            supported: MIGRATIONS.len(),
        });
    }
    Ok(())
}

/// The database's own tables, by name.
fn user_tables(conn: &Connection) -> Result<Vec<String>, IndexError> {
    let mut statement = conn.prepare(
        "SELECT name FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' \
         ESCAPE '\\' ORDER BY name",
    )?;
    let names = statement.query_map([], |row| row.get(0))?;
    Ok(names.collect::<Result<_, _>>()?)
}

/// Sets up a fresh connection: WAL, immediate transactions, foreign keys.
fn configure(conn: &mut Connection) -> rusqlite::Result<()> {
    conn.set_transaction_behavior(TransactionBehavior::Immediate);
    let mode: String =
        conn.pragma_update_and_check(None, "journal_mode", "wal", |row| row.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        tracing::warn!(
            mode,
            "the run index cannot use WAL mode here; readers will wait for writers"
        );
    }
    // With WAL, NORMAL loses nothing to a crashed process, only (at worst) the last
    // transactions to a power cut, and never corrupts.
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.pragma_update(None, "foreign_keys", true)
}

/// Brings the schema up to date, refusing a database from a newer build.
fn migrate(conn: &mut Connection, path: &Path) -> Result<(), IndexError> {
    let migrations = Migrations::new(MIGRATIONS.iter().map(|sql| M::up(sql)).collect());
    // Two processes opening a new database at once both read version 0; the one that loses
    // the race fails its transaction, and its second try finds the schema up to date.
    let result = migrations
        .to_latest(conn)
        .or_else(|_| migrations.to_latest(conn));
    // A database too new was refused by `check_ours`.
    result.map_err(|e| IndexError::Migrate {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })
}

/// How many migrations the database has had.
pub(super) fn schema_version(conn: &Connection) -> Result<usize, IndexError> {
    let version: i64 = conn.pragma_query_value(None, "user_version", |row| row.get(0))?;
    Ok(usize::try_from(version).unwrap_or(0))
}

/// Creates the index file, empty and private (0600), unless it exists: SQLite would make it
/// 0644, and its `-wal` and `-shm` files take the database file's mode.
fn create_private(path: &Path) -> io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let created = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits())
        .open(path);
    match created {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

/// `path` as the path of an SQLite URI: every byte but the unreserved ones and `/`
/// percent-encoded, so that no `?`, `#` or `%` in a directory's name is read as URI syntax.
fn uri_path(path: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    path.as_os_str()
        .as_bytes()
        .iter()
        .map(|&b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Makes the database and its `-wal` and `-shm` files private (0600) if an older spillway, or
/// SQLite, left them readable by others. Run only once the file is known to be ours. By path,
/// never by opening them: closing a descriptor of a file drops every POSIX lock this process
/// holds on it, SQLite's included, and another process would then take itself for the last
/// connection and delete the write-ahead log under us. Symlinks are left alone (a symlink put
/// there after the check needs our uid, in our 0700 directory); failures are logged, never
/// fatal.
fn make_private(path: &Path) {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    for suffix in ["", "-wal", "-shm"] {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        let name = PathBuf::from(name);
        let Ok(meta) = std::fs::symlink_metadata(&name) else {
            continue;
        };
        if meta.is_file()
            && meta.mode() & 0o777 != 0o600
            && let Err(e) = std::fs::set_permissions(&name, std::fs::Permissions::from_mode(0o600))
        {
            tracing::warn!(path = %name.display(), error = %e, "cannot make the run index private");
        }
    }
}
