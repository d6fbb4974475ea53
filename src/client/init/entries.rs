//! spillway's entries in a host's JSON settings: its hook in a group of its own and its MCP
//! server, added or replaced in place, recognised by their program, removed exactly.

use std::path::Path;

use anyhow::{Result, bail};

use super::Mode;
use super::json::Json;
use crate::client::hook::Host;

/// Whether `command` is `<...>/spillway hook HOST` as `init` writes it.
fn is_our_hook(command: &str, host: Host) -> bool {
    match shlex::split(command).as_deref() {
        Some([program, verb, name]) => {
            is_spillway(program) && verb == "hook" && name == host.name()
        }
        _ => false,
    }
}

pub(super) fn is_spillway(program: &str) -> bool {
    Path::new(program).file_name().and_then(|n| n.to_str()) == Some("spillway")
}

/// Adds (or removes) `entry` in `doc.hooks[event]`, the `[{matcher, hooks: [...]}]` layout that
/// Claude Code, Codex and Gemini CLI share. spillway's entry goes in a group of its own, so the
/// user's groups are never touched.
pub(super) fn edit_hook_groups(
    doc: &mut Json,
    host: Host,
    event: &str,
    group: &Json,
    entry: &Json,
    mode: Mode,
) -> Result<()> {
    let ours = |hook: &Json| {
        hook.get("command")
            .and_then(Json::as_str)
            .is_some_and(|c| is_our_hook(c, host))
    };
    if mode == Mode::Uninstall {
        let Some(hooks) = doc.get_mut("hooks") else {
            return Ok(());
        };
        let Some(Json::Array(groups)) = hooks.get_mut(event) else {
            return Ok(());
        };
        groups.retain_mut(|group| {
            let Some(Json::Array(list)) = group.get_mut("hooks") else {
                return true;
            };
            let before = list.len();
            list.retain(|hook| !ours(hook));
            before == list.len() || !list.is_empty()
        });
        if groups.is_empty() {
            hooks.remove(event);
        }
        if hooks.is_empty_container() {
            doc.remove("hooks");
        }
        return Ok(());
    }
    if doc.get("hooks").is_none() {
        doc.insert("hooks", Json::Object(vec![]));
    }
    let Some(hooks @ Json::Object(_)) = doc.get_mut("hooks") else {
        bail!("its \"hooks\" is not an object");
    };
    if hooks.get(event).is_none() {
        hooks.insert(event, Json::Array(vec![]));
    }
    let Some(Json::Array(groups)) = hooks.get_mut(event) else {
        bail!("its \"hooks\".\"{event}\" is not an array");
    };
    for group in groups.iter_mut() {
        if let Some(Json::Array(list)) = group.get_mut("hooks")
            && let Some(found) = list.iter_mut().find(|hook| ours(hook))
        {
            // Installed already: bring it up to date (another program path) in place.
            if found != entry {
                *found = entry.clone();
            }
            return Ok(());
        }
    }
    let mut group = group.clone();
    group.insert("hooks", Json::Array(vec![entry.clone()]));
    groups.push(group);
    Ok(())
}

/// Adds (or removes) the MCP server `spillway` under `doc[key]`. An entry of that name is
/// `init`'s when it is what `init` writes but for the program's path (an earlier install from
/// another path); any other entry is the user's own: one that runs spillway with their own
/// flags is left as it is by installing and uninstalling alike, and one that runs another
/// program stops `init` before anything is written.
pub(super) fn edit_mcp(doc: &mut Json, key: &str, entry: &Json, mode: Mode) -> Result<()> {
    let ours = |server: &Json| with_program_of(server, entry).is_some_and(|s| s == *entry);
    if mode == Mode::Uninstall {
        if let Some(servers) = doc.get_mut(key) {
            if servers.get("spillway").is_some_and(ours) {
                servers.remove("spillway");
            }
            if servers.is_empty_container() {
                doc.remove(key);
            }
        }
        return Ok(());
    }
    if doc.get(key).is_none() {
        doc.insert(key, Json::Object(vec![]));
    }
    let Some(servers @ Json::Object(_)) = doc.get_mut(key) else {
        bail!("its \"{key}\" is not an object");
    };
    match servers.get("spillway") {
        Some(existing) if existing == entry => {}
        // The user's own spillway server (their flags): theirs to keep.
        Some(existing) if with_program_of(existing, entry).is_some() && !ours(existing) => {}
        Some(existing) if !ours(existing) => {
            bail!("it already has an MCP server named \"spillway\" that does not run spillway")
        }
        _ => servers.insert("spillway", entry.clone()),
    }
    Ok(())
}

/// `server` with its program (`command`, or the first word of a `command` array) replaced by
/// `entry`'s, when it is a spillway program; None otherwise.
fn with_program_of(server: &Json, entry: &Json) -> Option<Json> {
    let mut server = server.clone();
    match (server.get_mut("command")?, entry.get("command")?) {
        (Json::String(program), Json::String(new)) if is_spillway(program) => {
            *program = new.clone()
        }
        (Json::Array(argv), Json::Array(new)) => {
            let first = argv.first_mut()?;
            if !first.as_str().is_some_and(is_spillway) {
                return None;
            }
            *first = new.first()?.clone();
        }
        _ => return None,
    }
    Some(server)
}
