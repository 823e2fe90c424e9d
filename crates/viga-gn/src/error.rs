//! Everything that can go wrong in the Geometry Nodes assistant, with messages that say what
//! was wrong and what to do.

use std::path::PathBuf;

use viga_blender::TransportError;
use viga_protocol::ProtocolError;
use viga_protocol::event::FailureKind;
use viga_provider::ProviderError;

#[derive(Debug, thiserror::Error)]
pub enum GnError {
    /// The scene could not do what a step asked (a missing node, a socket that does not
    /// exist, a refused snippet). The message is written for the model and goes back to it.
    #[error("{0}")]
    Step(String),
    /// Blender itself failed or went away (failure class E0).
    #[error("Blender failed during `{function}`: {source}")]
    Blender {
        function: String,
        #[source]
        source: TransportError,
    },
    /// An exception escaped viga-gn's own Blender-side code: a trusted snippet that raised
    /// `SystemExit`, or a bug in `crates/viga-gn/python`.
    #[error(
        "Blender raised {error_type} in viga-gn's `{function}`: {message}; if no trusted snippet caused it, report it as a viga-gn bug with this traceback:\n{traceback}"
    )]
    Program {
        function: String,
        error_type: String,
        message: String,
        traceback: String,
    },
    /// The Blender side printed no result line: its output was cut or the bridge changed.
    #[error(
        "viga-gn's `{function}` printed no result line in Blender; the end of its output was: {tail:?}"
    )]
    NoResult { function: String, tail: String },
    #[error("viga-gn's `{function}` answered with an unexpected shape: {message}")]
    Decode { function: String, message: String },
    /// A step of a type no executor takes: the model can use another type.
    #[error(
        "no executor is registered for {action_type} steps; the registered types are {}",
        registered.join(", ")
    )]
    NoExecutor {
        action_type: String,
        registered: Vec<String>,
    },
    /// An action type that cannot be registered (a bad name, a payload schema that is not
    /// one): a mistake of the code registering it.
    #[error("{0}")]
    ActionType(String),
    #[error(
        "trusted Python needs both the explicit setting and this run's confirmation; {missing}"
    )]
    TrustedNotAllowed { missing: &'static str },
    #[error("the model call failed: {0}")]
    Provider(#[from] ProviderError),
    #[error(transparent)]
    Protocol(#[from] ProtocolError),
    /// A file could not be read or written.
    #[error("{path}: {message}")]
    File { path: PathBuf, message: String },
    /// A preset file or name that cannot be used (invalid content, a bad name, a name
    /// already stored): a setting to fix.
    #[error("{path}: {message}")]
    Preset { path: PathBuf, message: String },
    /// What the worker reported as the run's result is not one to hand to a person's
    /// Blender (model code ran in the worker, so it is checked like any untrusted data).
    #[error("the run's result cannot be brought into your scene: {0}")]
    Result(String),
    /// A run folder a follow-up cannot continue (not a Geometry Nodes run, no result to
    /// start from): a setting to fix.
    #[error("{path}: {message}")]
    FollowUp { path: PathBuf, message: String },
    #[error("no preset named {name:?} in {}; stored presets: {}", dir.display(), list_or_none(stored))]
    PresetNotFound {
        name: String,
        dir: PathBuf,
        stored: Vec<String>,
    },
}

fn list_or_none(names: &[String]) -> String {
    if names.is_empty() {
        "none".to_owned()
    } else {
        names.join(", ")
    }
}

impl GnError {
    /// Whether the model can repair this failure of a step with its next reply: the scene
    /// refused what the step asked, or no executor takes its action type. Any other failure
    /// (Blender lost, an exception in viga-gn's own code) leaves the scene in an unknown
    /// state, so the run ends instead.
    pub fn is_step_failure(&self) -> bool {
        matches!(self, Self::Step(_) | Self::NoExecutor { .. })
    }

    /// What kind of failure this is when it ends a run, so front ends can tell a provider
    /// or Blender failure from a bug.
    pub fn kind(&self) -> FailureKind {
        match self {
            Self::Provider(err) => viga_core::provider_failure_kind(err),
            Self::Blender { source, .. } => viga_domain_scene::blender_failure_kind(source),
            Self::File { .. } => FailureKind::Io,
            Self::TrustedNotAllowed { .. }
            | Self::PresetNotFound { .. }
            | Self::Preset { .. }
            | Self::FollowUp { .. }
            | Self::ActionType(_) => FailureKind::Config,
            Self::Step(_)
            | Self::Program { .. }
            | Self::NoResult { .. }
            | Self::Decode { .. }
            | Self::NoExecutor { .. }
            | Self::Result(_)
            | Self::Protocol(_) => FailureKind::Other,
        }
    }

    pub(crate) fn file(path: impl Into<PathBuf>, message: impl std::fmt::Display) -> Self {
        Self::File {
            path: path.into(),
            message: message.to_string(),
        }
    }

    pub(crate) fn preset(path: impl Into<PathBuf>, message: impl std::fmt::Display) -> Self {
        Self::Preset {
            path: path.into(),
            message: message.to_string(),
        }
    }
}
