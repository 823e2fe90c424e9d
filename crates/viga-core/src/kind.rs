//! What viga knows of a domain from its run folders: its name there, what a report says of
//! its runs and adds to them, which of its run folders cannot be resumed, and how its domain
//! is built again on a new contained worker to resume one. Each domain crate has one
//! [`DomainKind`]; a front end registers the ones it knows in [`DomainKinds`], and the report
//! and resume ask them, so neither switches on a domain's name.

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use viga_contain::ContainedWorkers;
use viga_provider::Provider;

use crate::folder::{RecordedDomain, RunFolder};
use crate::{CoreError, Domain};

/// A domain as run folders know it.
#[async_trait]
pub trait DomainKind: Send + Sync + std::fmt::Debug {
    /// Its name, as `args.json` records it and its [`crate::Domain::name`] says.
    fn name(&self) -> &'static str;

    /// The recorded domain in a line, for the report's facts (what renders the verifier's
    /// pictures, at what size).
    fn describe(&self, recorded: &RecordedDomain, has_target: bool) -> String;

    /// A target's view as a person named it, for reports and messages: a camera's name, a
    /// slide's number, the page's window. The default says `the default view`.
    fn view_words(&self, view: Option<&str>, frame: Option<i32>) -> String {
        with_frame(view.unwrap_or("the default view"), frame)
    }

    /// HTML sections of its own the report shows before the iterations; none by default.
    fn report_sections(&self, _folder: &RunFolder) -> String {
        String::new()
    }

    /// The whole report of a run folder in a shape this kind owns (not the loop's
    /// iterations, such as a transcript of commands); `None` for every other folder.
    fn own_report(&self, _run_folder: &Path) -> Option<Result<String, CoreError>> {
        None
    }

    /// Why the run in `run_folder` cannot be resumed, when it is one of this kind's that
    /// cannot.
    fn refuses_resume(&self, _run_folder: &Path) -> Option<String> {
        None
    }

    /// The domain of the run in `run_folder` (one of this kind's), built again on a new
    /// worker started under `contained`, for [`crate::resume`].
    async fn reopen(
        &self,
        run_folder: &Path,
        contained: &ContainedWorkers,
        provider: Arc<dyn Provider>,
    ) -> Result<Arc<dyn Domain>, CoreError>;
}

/// The domains a front end knows, asked by name.
#[derive(Debug, Clone, Default)]
pub struct DomainKinds {
    kinds: Vec<Arc<dyn DomainKind>>,
}

impl DomainKinds {
    /// No domain yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The same, knowing `kind` too.
    pub fn with(mut self, kind: Arc<dyn DomainKind>) -> Self {
        self.kinds.push(kind);
        self
    }

    /// The kind called `name`.
    pub fn named(&self, name: &str) -> Option<&dyn DomainKind> {
        self.kinds
            .iter()
            .find(|kind| kind.name() == name)
            .map(AsRef::as_ref)
    }

    /// Every known domain's name, in the order they were registered.
    pub fn names(&self) -> Vec<&'static str> {
        self.kinds.iter().map(|kind| kind.name()).collect()
    }

    /// The report of `run_folder` when a kind owns the folder's shape.
    pub fn own_report(&self, run_folder: &Path) -> Option<Result<String, CoreError>> {
        self.kinds
            .iter()
            .find_map(|kind| kind.own_report(run_folder))
    }

    /// `Err` saying why, when a kind refuses to resume the run in `run_folder`.
    pub fn check_resumable(&self, run_folder: &Path) -> Result<(), CoreError> {
        match self
            .kinds
            .iter()
            .find_map(|kind| kind.refuses_resume(run_folder))
        {
            Some(why) => Err(CoreError::Config(why)),
            None => Ok(()),
        }
    }

    /// The domain of the run in `run_folder` built again on a new contained worker (see
    /// [`DomainKind::reopen`]), after checking that it may be resumed; a domain no kind knows
    /// is refused, naming the ones there are.
    pub async fn reopen(
        &self,
        run_folder: &Path,
        contained: &ContainedWorkers,
        provider: Arc<dyn Provider>,
    ) -> Result<Arc<dyn Domain>, CoreError> {
        self.check_resumable(run_folder)?;
        let (_, recorded) = RunFolder::open(run_folder)?.read_args()?;
        let Some(kind) = self.named(&recorded.name) else {
            return Err(CoreError::Config(format!(
                "{} is a {:?} run, a domain this build of viga does not know; it knows {}",
                run_folder.display(),
                recorded.name,
                self.names().join(", ")
            )));
        };
        kind.reopen(run_folder, contained, provider).await
    }

    /// A target's view in the words of the domain `domain` (see [`DomainKind::view_words`]).
    pub fn view_words(&self, domain: &str, view: Option<&str>, frame: Option<i32>) -> String {
        match self.named(domain) {
            Some(kind) => kind.view_words(view, frame),
            None => crate::domain::label_of(view, frame),
        }
    }

    /// The recorded domain in a line; a domain no kind knows is named as recorded.
    pub fn describe(&self, recorded: &RecordedDomain, has_target: bool) -> String {
        match self.named(&recorded.name) {
            Some(kind) => kind.describe(recorded, has_target),
            None => format!(
                "{}: a domain this build of viga does not know",
                recorded.name
            ),
        }
    }

    /// The recorded domain's own report sections; none for a domain no kind knows.
    pub fn report_sections(&self, recorded: &RecordedDomain, folder: &RunFolder) -> String {
        self.named(&recorded.name)
            .map(|kind| kind.report_sections(folder))
            .unwrap_or_default()
    }
}
/// `view`, and the animation frame when there is one: `Camera1, frame 24`.
pub fn with_frame(view: &str, frame: Option<i32>) -> String {
    match frame {
        Some(frame) => format!("{view}, frame {frame}"),
        None => view.to_owned(),
    }
}
