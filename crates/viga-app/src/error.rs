//! Every way a command can fail, typed once: each library's error comes in by `From`, and
//! [`AppError::kind`] says which kind of failure it is, so a front end needs no downcasting
//! to choose its advice and exit code.

use std::path::PathBuf;

use viga_protocol::event::FailureKind;

#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error(transparent)]
    Core(Box<viga_core::CoreError>),
    #[error(transparent)]
    Provider(Box<viga_provider::ProviderError>),
    /// The provider could not be built, and the key store it would have read a key from
    /// could not be read either: both are said.
    #[error("{error}; the key store cannot be read: {store}")]
    ProviderWithoutStore {
        error: Box<viga_provider::ProviderError>,
        store: Box<viga_keys::KeyError>,
    },
    #[error(transparent)]
    Keys(Box<viga_keys::KeyError>),
    #[error(transparent)]
    Blender(Box<viga_blender::TransportError>),
    #[error(transparent)]
    Contained(Box<viga_blender::ContainedWorkersError>),
    #[error(transparent)]
    Locate(Box<viga_blender::LocateError>),
    #[error(transparent)]
    Attach(Box<viga_blender::attach::AttachError>),
    #[error(transparent)]
    Slides(Box<viga_slides::SlidesError>),
    #[error(transparent)]
    Web(Box<viga_web::WebError>),
    /// A program a domain needs (LibreOffice, Chromium) is not installed.
    #[error(transparent)]
    NotFound(Box<viga_slides::NotFound>),
    #[error(transparent)]
    Gn(Box<viga_gn::GnError>),
    #[error(transparent)]
    Eval(Box<viga_eval::EvalError>),
    /// A tool (add-on discovery) failed.
    #[error(transparent)]
    Tool(Box<viga_skills::ToolError>),
    /// A scene the person named that Blender could not open.
    #[error("cannot open {}: {source}", path.display())]
    OpenScene {
        path: PathBuf,
        source: Box<viga_blender::TransportError>,
    },
    /// Settings that cannot work, said in the person's words.
    #[error("{0}")]
    Config(String),
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// `From` each library's error, boxed: an `AppError` stays small however large they are.
macro_rules! from_boxed {
    ($($variant:ident: $error:ty),* $(,)?) => {$(
        impl From<$error> for AppError {
            fn from(err: $error) -> Self {
                Self::$variant(Box::new(err))
            }
        }
    )*};
}

from_boxed! {
    Core: viga_core::CoreError,
    Provider: viga_provider::ProviderError,
    Keys: viga_keys::KeyError,
    Blender: viga_blender::TransportError,
    Contained: viga_blender::ContainedWorkersError,
    Locate: viga_blender::LocateError,
    Attach: viga_blender::attach::AttachError,
    Slides: viga_slides::SlidesError,
    Web: viga_web::WebError,
    NotFound: viga_slides::NotFound,
    Gn: viga_gn::GnError,
    Tool: viga_skills::ToolError,
}

impl From<viga_blender::StartError> for AppError {
    fn from(err: viga_blender::StartError) -> Self {
        match err {
            viga_blender::StartError::Contained(err) => err.into(),
            viga_blender::StartError::Start(err) => err.into(),
        }
    }
}

impl AppError {
    /// What kind of failure this is, for the advice and the exit code.
    pub fn kind(&self) -> FailureKind {
        match self {
            Self::Core(err) => err.kind(),
            Self::Provider(err) | Self::ProviderWithoutStore { error: err, .. } => {
                viga_core::provider_failure_kind(err)
            }
            Self::Keys(_) | Self::Config(_) => FailureKind::Config,
            Self::Blender(err) => viga_domain_scene::blender_failure_kind(err),
            Self::Contained(_)
            | Self::Locate(_)
            | Self::Slides(_)
            | Self::Web(_)
            | Self::NotFound(_) => FailureKind::WorkerUnavailable,
            Self::Attach(err) => err.kind(),
            Self::Gn(err) => err.kind(),
            Self::Tool(_) => FailureKind::Other,
            Self::OpenScene { source, .. } => viga_domain_scene::blender_failure_kind(source),
            Self::Eval(err) => err.kind(),
            Self::Io { .. } => FailureKind::Io,
        }
    }

    /// Blender could not open the scene at `path`.
    pub fn open_scene(path: impl Into<PathBuf>, source: viga_blender::TransportError) -> Self {
        Self::OpenScene {
            path: path.into(),
            source: Box::new(source),
        }
    }

    /// An I/O error on `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }
}
