//! Calling viga-gn's Blender-side library through the bridge's `execute` command.
//!
//! Each call sends the whole library (`python/gn_lib.py` and `python/gn_safe.py`, embedded
//! here) followed by one `_gn_main("<function>", <args>)` line, so nothing has to be installed
//! in Blender and the bridge needs no GN-specific command. The bridge runs every command on
//! Blender's main thread, so all of this does too. The library prints its answer as the last
//! line `VIGA_GN_RESULT {...}` of stdout.

use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use viga_blender::{BlenderCommands as _, BlenderTransport};

use crate::GnError;

const LIBRARY: &str = concat!(
    include_str!("../python/gn_lib.py"),
    "\n",
    include_str!("../python/gn_safe.py"),
);

/// The library with the docs index's reader after it (`python/gn_docs.py`), sent only to
/// build the index.
const DOCS_LIBRARY: &str = concat!(
    include_str!("../python/gn_lib.py"),
    "\n",
    include_str!("../python/gn_safe.py"),
    "\n",
    include_str!("../python/gn_docs.py"),
);

const RESULT_MARKER: &str = "VIGA_GN_RESULT ";

#[derive(Debug, Deserialize)]
struct Reply {
    ok: bool,
    #[serde(default)]
    value: Value,
    #[serde(default)]
    error: String,
}

/// A Blender worker seen through viga-gn's library.
#[derive(Clone)]
pub struct GnBlender {
    transport: Arc<dyn BlenderTransport>,
    timeout: Option<Duration>,
}

impl std::fmt::Debug for GnBlender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GnBlender")
            .field("transport", &self.transport.describe())
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl GnBlender {
    pub fn new(transport: Arc<dyn BlenderTransport>) -> Self {
        Self {
            transport,
            timeout: None,
        }
    }

    /// Overrides the transport's per-call timeout (a hung snippet is killed after it).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    pub fn transport(&self) -> &Arc<dyn BlenderTransport> {
        &self.transport
    }

    /// Calls one library function with JSON arguments and decodes its value.
    pub async fn call<T: DeserializeOwned>(
        &self,
        function: &str,
        args: &Value,
    ) -> Result<T, GnError> {
        self.call_in(LIBRARY, function, args).await
    }

    /// [`GnBlender::call`] of a function of the docs index's reader.
    pub(crate) async fn call_docs<T: DeserializeOwned>(
        &self,
        function: &str,
        args: &Value,
    ) -> Result<T, GnError> {
        self.call_in(DOCS_LIBRARY, function, args).await
    }

    async fn call_in<T: DeserializeOwned>(
        &self,
        library: &str,
        function: &str,
        args: &Value,
    ) -> Result<T, GnError> {
        let value = self.call_value(library, function, args).await?;
        serde_json::from_value(value).map_err(|err| GnError::Decode {
            function: function.to_owned(),
            message: err.to_string(),
        })
    }

    async fn call_value(
        &self,
        library: &str,
        function: &str,
        args: &Value,
    ) -> Result<Value, GnError> {
        let program = program(library, function, args);
        let result = self
            .transport
            .execute(&program, None, self.timeout)
            .await
            .map_err(|source| GnError::Blender {
                function: function.to_owned(),
                source,
            })?;
        if let Some(error) = result.error {
            return Err(GnError::Program {
                function: function.to_owned(),
                error_type: error.error_type,
                message: error.message,
                traceback: error.traceback,
            });
        }
        let line = result
            .stdout
            .lines()
            .rev()
            .find_map(|line| line.strip_prefix(RESULT_MARKER))
            .ok_or_else(|| GnError::NoResult {
                function: function.to_owned(),
                tail: tail(&result.stdout, 400),
            })?;
        let reply: Reply = serde_json::from_str(line).map_err(|err| GnError::Decode {
            function: function.to_owned(),
            message: err.to_string(),
        })?;
        if reply.ok {
            Ok(reply.value)
        } else {
            Err(GnError::Step(reply.error))
        }
    }
}

/// The program sent to Blender. Both the function name and the arguments travel as JSON
/// string literals, which Python reads as its own string literals.
fn program(library: &str, function: &str, args: &Value) -> String {
    let name = Value::String(function.to_owned()).to_string();
    let json = Value::String(args.to_string()).to_string();
    format!("{library}\n_gn_main({name}, json.loads({json}))\n")
}

/// The last `max` characters of `text`, cut on a character boundary.
pub(crate) fn tail(text: &str, max: usize) -> String {
    let count = text.chars().count();
    text.chars().skip(count.saturating_sub(max)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_survive_quotes_newlines_and_unicode() {
        let args = serde_json::json!({"code": "print(\"a'b\")\n\\x", "name": "Würfel ✓"});
        let program = program(LIBRARY, "run_python", &args);
        let last = program.lines().last().unwrap_or_default();
        // The literal is JSON inside JSON; decoding it twice gives the arguments back.
        let inner = last
            .strip_prefix("_gn_main(\"run_python\", json.loads(")
            .and_then(|rest| rest.strip_suffix("))"))
            .unwrap_or_default();
        let text: String = serde_json::from_str(inner).unwrap_or_default();
        let back: Value = serde_json::from_str(&text).unwrap_or_default();
        assert_eq!(back, args);
    }

    #[test]
    fn tail_cuts_on_characters() {
        assert_eq!(tail("ääbc", 3), "äbc");
        assert_eq!(tail("ab", 5), "ab");
    }
}
