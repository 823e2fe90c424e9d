//! Whether the model behind an OpenAI-compatible server calls tools (`--generator-tools
//! auto`): asked once with one small call ([`viga_provider::tool_probe`]) and remembered per
//! base URL and model in `tool-calling.json` in viga's cache folder (`$XDG_CACHE_HOME/viga`,
//! else `~/.cache/viga`), so the next run does not ask again. A provider config that says
//! `tool_calling` is its person's word and is never second-guessed; the other kinds' models
//! call tools.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use viga_provider::tool_probe::{ToolProbe, probe_tool_calling};
use viga_provider::{ProviderConfig, ProviderKind};

use crate::Tell;

/// The file in the cache folder.
const MEMORY_FILE: &str = "tool-calling.json";
/// A memory file larger than this is not read (it is not one viga wrote).
const LARGEST_MEMORY: u64 = 1 << 20;

/// What was found out about one server and model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Found {
    calls_tools: bool,
    /// Why, in words (a refusal's message).
    why: String,
    unix_ms: u64,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Memory {
    /// By `<base URL> <model>`.
    servers: BTreeMap<String, Found>,
}

/// Sets `settings.tool_calling` for an OpenAI-compatible server whose config leaves it
/// unset: from what an earlier run found for the same base URL and model, else by asking the
/// server once (and remembering the answer). Returns how it was decided, in words for the
/// run's record; `None` when nothing was decided here (another kind, a config that says, or
/// a server that could not be asked: then the run goes on without tools, and says why).
pub async fn find_out(settings: &mut ProviderConfig, tell: &dyn Tell) -> Option<String> {
    find_out_in(settings, memory_path().as_deref(), tell).await
}

/// [`find_out`] with the memory file at `memory` (`None`: nothing is remembered).
pub async fn find_out_in(
    settings: &mut ProviderConfig,
    memory: Option<&Path>,
    tell: &dyn Tell,
) -> Option<String> {
    if settings.kind != ProviderKind::OpenAiCompatible || settings.tool_calling.is_some() {
        return None;
    }
    let url = settings.base_url.clone().unwrap_or_default();
    let key = format!("{url} {}", settings.model);
    let mut remembered = memory.map(read_memory).unwrap_or_default();
    if let Some(found) = remembered.servers.get(&key) {
        settings.tool_calling = Some(found.calls_tools);
        return Some(format!(
            "tool calling {}: remembered from asking {url} earlier ({}); delete {} to ask again",
            on_off(found.calls_tools),
            found.why,
            memory
                .map(Path::display)
                .map(|p| p.to_string())
                .unwrap_or_default()
        ));
    }
    let found = ask(settings, &url, tell).await?;
    settings.tool_calling = Some(found.calls_tools);
    let said = format!(
        "tool calling {}: found by asking {url} ({})",
        on_off(found.calls_tools),
        found.why
    );
    if let Some(path) = memory {
        remembered.servers.insert(key, found);
        if let Err(err) = write_memory(path, &remembered) {
            tell.warn(&format!(
                "what the server said about tool calling is not remembered ({}: {err}); the next run asks again",
                path.display()
            ));
        }
    }
    Some(said)
}

/// One small call to the server, without retries (a refusal is an answer here).
async fn ask(settings: &ProviderConfig, url: &str, tell: &dyn Tell) -> Option<Found> {
    let mut once = settings.clone();
    once.retry.max_attempts = 1;
    let probed = match crate::provider::build(&once) {
        Ok(provider) => probe_tool_calling(provider.as_ref())
            .await
            .map_err(|err| err.to_string()),
        Err(err) => Err(err.to_string()),
    };
    let unix_ms = viga_io::files::unix_ms();
    match probed {
        Ok(ToolProbe::Calls) => Some(Found {
            calls_tools: true,
            why: "the model called the tool it was given".to_owned(),
            unix_ms,
        }),
        Ok(ToolProbe::DoesNotCall(why)) => Some(Found {
            calls_tools: false,
            why,
            unix_ms,
        }),
        Err(err) => {
            tell.warn(&format!(
                "could not ask {url} whether {} calls tools ({err}); the generator answers with fenced programs this run (--generator-tools on to use tools anyway)",
                settings.model
            ));
            None
        }
    }
}

fn on_off(on: bool) -> &'static str {
    if on { "on" } else { "off" }
}

/// `$XDG_CACHE_HOME/viga/tool-calling.json`, else `~/.cache/viga/tool-calling.json`.
fn memory_path() -> Option<PathBuf> {
    viga_io::files::user_cache_dir("").map(|viga| viga.join(MEMORY_FILE))
}

/// The memory, or an empty one when the file is missing, too large or unreadable (it is
/// written again whole).
fn read_memory(path: &Path) -> Memory {
    let small = std::fs::metadata(path).is_ok_and(|meta| meta.len() <= LARGEST_MEMORY);
    small
        .then(|| std::fs::read_to_string(path).ok())
        .flatten()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_default()
}

fn write_memory(path: &Path, memory: &Memory) -> std::io::Result<()> {
    let text = serde_json::to_string_pretty(memory).map_err(std::io::Error::other)?;
    viga_io::files::write_atomic(path, text.as_bytes())
}
