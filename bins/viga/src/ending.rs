//! How a command ends, in one place: what to do about each kind of failure (its exit code is
//! `FailureKind::exit_code`), and the last line of every run (a scene run, a Geometry Nodes
//! run, the add-on agent).

use std::path::Path;
use std::process::ExitCode;

use viga_protocol::event::{FailureKind, StopReason};
use viga_provider::ProviderError;

use crate::progress::Output;

/// What to do about a failure of `kind`, beyond what its message says; `run` is the run
/// folder, when there is one to resume.
pub fn advice(kind: FailureKind, run: Option<&Path>) -> Option<String> {
    let resume = run
        .map(|folder| format!(", then continue with `viga resume {}`", folder.display()))
        .unwrap_or_default();
    Some(match kind {
        FailureKind::ProviderAuth => format!(
            "check the API key: export the variable the message names (or name another with --api-key-env){resume}"
        ),
        FailureKind::ProviderUnavailable => format!(
            "the model server is down, overloaded, rate-limited or unreachable; try again later{resume} (a --provider-config file with a larger `retry` waits longer)"
        ),
        FailureKind::ContextOverflow => "the prompt is too long for the model even with old memory and older images left out; start again with a smaller --memory or --resolution, or use a model with a longer context".to_owned(),
        FailureKind::ProviderFailed => format!(
            "the provider refused the request or answered with something unusable; check --model and --base-url{resume}"
        ),
        FailureKind::WorkerUnavailable => format!(
            "the worker the programs run in (Blender, LibreOffice or Chromium) could not be started, reached or restarted: the message above says why (containment that is required but does not hold names what would make it hold); `viga doctor` shows which Blender and renderers are found and what containment holds here{resume}"
        ),
        FailureKind::Io => "a file or folder could not be read or written: check the path in the message, its permissions and the free disk space".to_owned(),
        // `other` is as often the model's (a Geometry Nodes step that never worked) as a bug:
        // its message says which, and no general advice fits both.
        FailureKind::Other | FailureKind::Config | FailureKind::Cancelled => return None,
    })
}

/// The kind of the first typed error in the chain, if any: every library error type that
/// can end a command says what kind of failure it is.
pub fn failure_kind_of(err: &anyhow::Error) -> Option<FailureKind> {
    err.chain().find_map(kind_of)
}

fn kind_of(cause: &(dyn std::error::Error + 'static)) -> Option<FailureKind> {
    if let Some(err) = cause.downcast_ref::<viga_app::AppError>() {
        return Some(err.kind());
    }
    if let Some(err) = cause.downcast_ref::<viga_core::CoreError>() {
        return Some(err.kind());
    }
    if let Some(err) = cause.downcast_ref::<ProviderError>() {
        return Some(viga_core::provider_failure_kind(err));
    }
    if let Some(err) = cause.downcast_ref::<viga_blender::TransportError>() {
        return Some(viga_domain_scene::blender_failure_kind(err));
    }
    if let Some(err) = cause.downcast_ref::<viga_gn::GnError>() {
        return Some(err.kind());
    }
    cause
        .downcast_ref::<viga_eval::EvalError>()
        .map(viga_eval::EvalError::kind)
}

/// How a followed run ended, for its last line.
#[derive(Debug)]
pub struct RunEnd<'a> {
    /// `None`: left to wind down after a cancel.
    pub stop: Option<&'a StopReason>,
    /// More words: an answer, a last message; a failure's advice is added here.
    pub message: String,
    /// The program a person can apply, when the run left one.
    pub final_program: Option<&'a Path>,
    /// The run folder, to resume after a failure.
    pub folder: Option<&'a Path>,
}

/// The last line of every run and its exit code: a failure says what to do about it.
pub fn finish(out: &Output, end: RunEnd<'_>) -> ExitCode {
    let left = StopReason::Cancelled;
    let stop = end.stop.unwrap_or(&left);
    let mut message = end.message;
    if let StopReason::Failed { message: why, kind } = stop {
        if message.is_empty() {
            message.clone_from(why);
        }
        if let Some(advice) = advice(*kind, end.folder) {
            out.say(&format!("what to do: {advice}"));
            message.push_str(&format!("\nwhat to do: {advice}"));
        }
    }
    let code = stop.exit_code();
    out.finished(stop, &message, end.final_program, code);
    ExitCode::from(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_errors_keep_their_kind_through_context() {
        let locate = anyhow::Error::new(viga_app::AppError::from(
            viga_blender::LocateError::NotFound {
                venv: std::path::PathBuf::from("/nowhere/.viga/venv"),
            },
        ))
        .context("starting Blender");
        assert_eq!(
            failure_kind_of(&locate),
            Some(FailureKind::WorkerUnavailable)
        );
        let frozen = anyhow::Error::new(viga_app::AppError::from(
            viga_blender::attach::AttachError::Unreachable {
                pid: 7,
                port: 1,
                message: "timed out".into(),
            },
        ));
        assert_eq!(
            failure_kind_of(&frozen),
            Some(FailureKind::WorkerUnavailable),
            "7, not 2"
        );
        let unwritable = anyhow::Error::new(viga_gn::GnError::File {
            path: "/x".into(),
            message: "read-only".into(),
        });
        assert_eq!(failure_kind_of(&unwritable), Some(FailureKind::Io));
        let eval = anyhow::Error::new(viga_eval::EvalError::Io {
            path: "/x".into(),
            message: "full".into(),
        });
        assert_eq!(failure_kind_of(&eval), Some(FailureKind::Io));
        let plain = anyhow::anyhow!("bad flag");
        assert_eq!(failure_kind_of(&plain), None, "untyped: a usage error (2)");
    }
}
