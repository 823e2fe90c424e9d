//! Why an add-on's tools are not offered. Every refusal is kept with a machine-readable
//! reason (serialised with a `kind` tag), so a listing or a UI can show what is unavailable
//! and why, while the model is only ever offered add-ons that can run.

use serde::Serialize;

use super::AddonError;

/// Something that keeps an add-on (or part of the listing) from being offered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AddonProblem {
    /// The add-on's id, when its manifest was read far enough to know it.
    pub addon: Option<String>,
    /// The manifest file the problem is about, when known.
    pub source: Option<String>,
    pub reason: ProblemReason,
}

/// The machine-readable part of an [`AddonProblem`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, thiserror::Error)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ProblemReason {
    /// Blender could not load or read an add-on, or an add-on folder is gone (the bridge's
    /// own words).
    #[error("{message}")]
    NotLoadable { message: String },
    #[error("invalid manifest: {message}")]
    InvalidManifest { message: String },
    #[error("it has a manifest but no VIGA_COMMANDS handlers; its tools are not offered")]
    NoHandlers,
    #[error("it needs Blender {required} or newer; this is Blender {running}")]
    BlenderTooOld { required: String, running: String },
    #[error(
        "its blender_version_min {required:?} is not a version like \"4.2.0\"; it is not offered until the manifest is fixed"
    )]
    InvalidVersionRequirement { required: String },
    #[error(
        "it needs Blender {required} or newer, and this Blender's version {running:?} cannot be read"
    )]
    UnknownBlenderVersion { required: String, running: String },
    #[error(
        "it needs Python packages this Blender does not have: {}; install them into Blender's Python",
        missing.join(", ")
    )]
    MissingDependencies { missing: Vec<String> },
    #[error("its tool {tool:?} has the name of a built-in tool; rename the add-on's tool")]
    BuiltInToolClash { tool: String },
    #[error("its tool {tool:?} is already provided by add-on {owner:?}; rename one of them")]
    ToolClash { tool: String, owner: String },
    #[error("its id is also declared by {first_source}, which is used instead")]
    DuplicateId { first_source: String },
}

impl AddonProblem {
    /// A problem the bridge reported as text (a package that cannot be loaded).
    pub(super) fn not_loadable(message: String) -> Self {
        Self {
            addon: None,
            source: None,
            reason: ProblemReason::NotLoadable { message },
        }
    }

    /// A problem of the add-on `addon` whose manifest is `source`.
    pub(super) fn of_addon(addon: &str, source: &str, reason: ProblemReason) -> Self {
        Self {
            addon: Some(addon.to_owned()),
            source: Some(source.to_owned()),
            reason,
        }
    }
}

impl std::fmt::Display for AddonProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.addon, &self.source) {
            (Some(addon), Some(source)) => {
                write!(f, "add-on {addon:?} ({source}): {}", self.reason)
            }
            (Some(addon), None) => write!(f, "add-on {addon:?}: {}", self.reason),
            (None, Some(source)) => write!(f, "{source}: {}", self.reason),
            (None, None) => write!(f, "{}", self.reason),
        }
    }
}

impl From<AddonError> for AddonProblem {
    fn from(err: AddonError) -> Self {
        match err {
            AddonError::Manifest {
                source_name,
                message,
            } => Self {
                addon: None,
                source: Some(source_name),
                reason: ProblemReason::InvalidManifest { message },
            },
            AddonError::ToolClash { addon, tool, owner } => Self {
                addon: Some(addon),
                source: None,
                reason: ProblemReason::ToolClash { tool, owner },
            },
            AddonError::BuiltInToolClash { addon, tool } => Self {
                addon: Some(addon),
                source: None,
                reason: ProblemReason::BuiltInToolClash { tool },
            },
        }
    }
}
