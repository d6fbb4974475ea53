//! Where the daemon listens: resolved the same way by client and daemon, so a client finds
//! the daemon it (or systemd) started.

use std::path::{Path, PathBuf};

/// Environment variable naming the socket.
pub const SOCKET_ENV: &str = "SPILLWAY_SOCKET";

/// File name of the socket in its directory.
const SOCKET_NAME: &str = "spillway.sock";

/// The socket path: `explicit` (from `--socket` or `SPILLWAY_SOCKET`), else
/// `$XDG_RUNTIME_DIR/spillway/spillway.sock`, else `<data-dir>/spillway.sock`. Relative paths
/// are made absolute, so a daemon started elsewhere finds the same file.
pub fn socket_path(explicit: Option<&Path>, data_dir: &Path) -> PathBuf {
    let path = match explicit {
        Some(path) => path.to_path_buf(),
        None => match std::env::var_os("XDG_RUNTIME_DIR").filter(|v| !v.is_empty()) {
            Some(runtime) => PathBuf::from(runtime).join("spillway").join(SOCKET_NAME),
            None => data_dir.join(SOCKET_NAME),
        },
    };
    std::path::absolute(&path).unwrap_or(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_explicit_socket_wins_and_becomes_absolute() {
        let p = socket_path(Some(Path::new("s.sock")), Path::new("/data"));
        assert!(p.is_absolute() && p.ends_with("s.sock"));
        assert_eq!(
            socket_path(Some(Path::new("/x/s.sock")), Path::new("/data")),
            Path::new("/x/s.sock")
        );
    }
}
