//! # viga-core
//!
//! The VIGA loop (seeds 000–002), driven as a queue pair: a front end starts a run, reads
//! typed [`TimedEvent`](viga_protocol::event::TimedEvent)s from the [`RunHandle`], and can
//! cancel it. That is the only way in, and the one way to drive any run: the handle is
//! generic over the outcome, and viga-gn's Geometry Nodes runs are driven through it too
//! ([`RunHandle::spawn`] hands a run its end of the pair, a [`RunLink`]). A cancel abandons a
//! model call in flight at once.
//!
//! **Owns:** the generator (plan, then code; the first fenced Python block wins; or, for a
//! model that calls tools, seed 001's tools, so a program run with `execute_code` is looked
//! at, fixed and run again within the iteration) and the verifier (the domain's first look,
//! its tools, the verdict); fast retry of E1/E2 failures with seed 002's prompt (at most
//! `max_fast_retries`, retries are not iterations, `retry_count` recorded), programs stopped
//! at the program timeout included; a domain's worker lost in any phase, restarted by its
//! supervisor, the result rebuilt and the phase done again; stop conditions
//! (verifier acceptance, the iteration budget, cancellation, failures nothing can fix, each
//! with its [`FailureKind`](viga_protocol::event::FailureKind)); the run folder, written as
//! events arrive; resume.
//!
//! What the loop builds is a [`domain::Domain`]: the loop's modules know programs, runs,
//! renders, tools and scores only through it. Each domain lives in a crate of its own
//! (viga-domain-scene for Blender, viga-domain-slides, viga-domain-page) with a
//! [`kind::DomainKind`]: what the report says of its runs and what it adds to them, asked
//! through the [`kind::DomainKinds`] a front end registers. [`renderer`] holds what a domain
//! whose worker is a supervised renderer process shares.
//!
//! **Must not:** parse command lines, print to a terminal, know which provider, domain or
//! worker it was given (they come in as trait objects), or depend on a renderer's crate
//! (Blender, slides, pages).
//!
//! ```no_run
//! # async fn demo(provider: std::sync::Arc<dyn viga_provider::Provider>,
//! #               domain: std::sync::Arc<dyn viga_core::Domain>) -> Result<(), viga_core::CoreError> {
//! let config = viga_core::RunConfig::new("a red cube on a grey floor");
//! let mut run = viga_core::start(config, provider, domain, std::path::Path::new("output"))?;
//! while let Some(event) = run.next_event().await {
//!     println!("{:?}", event.event);
//! }
//! let outcome = run.wait().await?;
//! println!("stopped: {:?} after {} iterations", outcome.stop, outcome.iterations);
//! # Ok(()) }
//! ```

#![warn(clippy::too_many_lines)] // no library function over 80 lines: clippy.toml sets the threshold

mod config;
pub mod conversation;
pub mod cut_off;
pub mod domain;
mod error;
mod excerpt;
mod extract;
pub mod folder;
mod handle;
pub mod kind;
mod offered;
mod program;
pub mod prompts;
mod recover;
pub mod renderer;
pub mod report;
mod run;
mod scores;
mod shrink;
pub mod targets;
#[cfg(test)]
mod test_domain;
pub mod time_limit;
mod tool_generator;
mod translate;
mod verify;
pub mod written_calls;

use std::path::Path;
use std::sync::Arc;

use viga_memory::{Memory, RunLog, iterations_in, read_run_log};
use viga_protocol::PROTOCOL_VERSION;
use viga_protocol::event::{RunEvent, StopReason};
use viga_protocol::iteration::{FailureClass, IterationRecord};
use viga_protocol::message::ImageData;
use viga_provider::Provider;

pub use config::{
    DEFAULT_GENERATOR_MAX_TURNS, DEFAULT_PROGRAM_TIMEOUT, GeneratorTools, RunConfig, TargetSpec,
    slug,
};
pub use domain::Domain;
pub use error::{CoreError, provider_failure_kind, worker_failure_kind};
pub use extract::first_python_block;
pub use folder::{RecordedDomain, RunFolder};
pub use handle::{Cancelled, Canceller, ModelText, RunHandle, RunLink, RunUpdate};
pub use kind::{DomainKind, DomainKinds};
pub use program::{BLENDER_CRASH_ERROR, LIMIT_ERROR, PROGRAM_TIMEOUT_ERROR, REPLY_REFUSED_ERROR};
pub use prompts::Prompts;
pub use run::RunOutcome;
pub use scores::{IterationScores, Scores};
pub use translate::{ModelCallRecord, ModelCalls, ProviderTranslator};

use crate::domain::TargetView;
use crate::run::Run;

fn read_target(path: &Path) -> Result<ImageData, CoreError> {
    let data = std::fs::read(path).map_err(|err| CoreError::io(path, err))?;
    let media_type = match path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .as_deref()
    {
        Some("jpg" | "jpeg") => "image/jpeg",
        _ => "image/png",
    };
    Ok(ImageData {
        media_type: media_type.to_owned(),
        data,
    })
}

/// The targets `specs` name, read from `files` (the user's files, or the run folder's
/// copies when resuming).
pub fn read_targets(
    specs: &[TargetSpec],
    files: &[std::path::PathBuf],
) -> Result<Vec<TargetView>, CoreError> {
    if files.len() != specs.len() {
        return Err(CoreError::Config(format!(
            "the run names {} target pictures but {} were found",
            specs.len(),
            files.len()
        )));
    }
    specs
        .iter()
        .zip(files)
        .map(|(spec, file)| {
            Ok(TargetView {
                view: spec.view.clone(),
                frame: spec.frame,
                image: read_target(file)?,
            })
        })
        .collect()
}

/// Starts a new run of `domain` in a new folder under `output_root`.
pub fn start(
    config: RunConfig,
    provider: Arc<dyn Provider>,
    domain: Arc<dyn Domain>,
    output_root: &Path,
) -> Result<RunHandle, CoreError> {
    check_settings(&config, domain.as_ref())?;
    let folder = RunFolder::create(output_root, &config)?;
    start_in(folder, config, provider, domain)
}

/// Starts a new run of `domain` in `folder`, made with [`RunFolder::create`] before the
/// domain's worker started (so the worker could be allowed to read the folder's
/// [`RunFolder::worker_inputs`]).
pub fn start_in_folder(
    folder: RunFolder,
    config: RunConfig,
    provider: Arc<dyn Provider>,
    domain: Arc<dyn Domain>,
) -> Result<RunHandle, CoreError> {
    check_settings(&config, domain.as_ref())?;
    start_in(folder, config, provider, domain)
}

fn check_settings(config: &RunConfig, domain: &dyn Domain) -> Result<(), CoreError> {
    let mut problems = config.problems();
    problems.extend(domain.problems(config.generator_tools));
    check_problems(problems)
}

/// `Err` listing `problems` when there are any.
pub fn check_problems(problems: Vec<String>) -> Result<(), CoreError> {
    if problems.is_empty() {
        return Ok(());
    }
    Err(CoreError::Config(format!(
        "the run settings are invalid:\n  - {}",
        problems.join("\n  - ")
    )))
}

/// Records, before the run's first event, the settings `provider` was built from and the
/// containment `domain`'s worker runs under ([`folder::write_setup`]): a run that ends at
/// once still has them, and `resume` builds its provider from them.
fn write_setup(
    folder: &RunFolder,
    provider: &dyn Provider,
    domain: &dyn Domain,
) -> Result<(), CoreError> {
    folder::write_setup(
        folder.root(),
        provider.config(),
        domain.containment().as_ref(),
    )
}

fn recorded(domain: &dyn Domain) -> RecordedDomain {
    RecordedDomain {
        name: domain.name().to_owned(),
        settings: domain.settings(),
    }
}

/// Starts a new run of `domain` in `folder` whose settings the caller has checked (see
/// [`check_problems`]): for runs that start from something of their own (a person's scene,
/// a reconstruction) and check their own settings first.
pub fn start_in(
    folder: RunFolder,
    config: RunConfig,
    provider: Arc<dyn Provider>,
    domain: Arc<dyn Domain>,
) -> Result<RunHandle, CoreError> {
    let prompts = Prompts::load(config.prompts_dir.as_deref(), domain.prompts())?;
    folder.write_args(&config, &recorded(domain.as_ref()))?;
    let files: Vec<_> = config.targets.iter().map(|t| t.path.clone()).collect();
    let targets = read_targets(&config.targets, &files)?;
    let images: Vec<ImageData> = targets.iter().map(|t| t.image.clone()).collect();
    folder.write_targets(&config.targets, &images)?;
    write_setup(&folder, provider.as_ref(), domain.as_ref())?;
    let log = RunLog::create(&folder.events_path())?;
    let mut memory = Memory::new(Run::memory_config(&config))?;
    memory.set_anchor(Run::anchor(&config, domain.as_ref(), &targets));
    launch(Launch {
        config,
        prompts,
        provider,
        domain,
        folder,
        log,
        memory,
        targets,
        first_index: 1,
        records: Vec::new(),
    })
}

/// The settings of the run in `run_folder` and of its domain, as [`resume`] continues it
/// (what its worker must be able to read is in them).
pub fn resumable_config(run_folder: &Path) -> Result<(RunConfig, RecordedDomain), CoreError> {
    RunFolder::open(run_folder)?.read_args()
}

/// The settings of `domain` that the run in `run_folder` recorded in its `args.json`, read
/// back as `T`; a run of another domain is refused.
pub fn recorded_settings<T: serde::de::DeserializeOwned>(
    run_folder: &Path,
    domain: &str,
) -> Result<T, CoreError> {
    let (_, recorded) = resumable_config(run_folder)?;
    if recorded.name != domain {
        return Err(CoreError::Config(format!(
            "{} is a {} run, not a {domain} run",
            run_folder.display(),
            recorded.name
        )));
    }
    serde_json::from_value(recorded.settings).map_err(|err| {
        CoreError::Config(format!(
            "{}: the {domain} settings in args.json are not valid: {err}",
            run_folder.display()
        ))
    })
}

/// Continues a run from its folder at the iteration after the last one recorded, with the
/// settings in its `args.json`; `domain` must be built from the folder's recorded domain
/// ([`RunFolder::read_args`]); `max_iterations` may raise the budget.
pub fn resume(
    run_folder: &Path,
    provider: Arc<dyn Provider>,
    domain: Arc<dyn Domain>,
    max_iterations: Option<u32>,
) -> Result<RunHandle, CoreError> {
    let folder = RunFolder::open(run_folder)?;
    let (mut config, recorded_domain) = resumable_config(run_folder)?;
    if recorded_domain.name != domain.name() {
        return Err(CoreError::Config(format!(
            "{} is a {} run; it cannot be resumed as a {} run",
            run_folder.display(),
            recorded_domain.name,
            domain.name()
        )));
    }
    if let Some(max) = max_iterations {
        config.max_iterations = max;
    }
    let contents = read_run_log(&folder.events_path())?;
    let accepted = contents.events.iter().any(|e| {
        matches!(
            &e.event,
            RunEvent::RunFinished {
                stop: StopReason::Accepted,
                ..
            }
        )
    });
    let records = iterations_in(&contents.events);
    let done = records.last().map(|r| r.index).unwrap_or(0);
    if accepted {
        return Err(CoreError::Config(format!(
            "{} already finished: the verifier accepted iteration {done}; nothing to resume",
            run_folder.display()
        )));
    }
    if done >= config.max_iterations {
        return Err(CoreError::Config(format!(
            "{} already ran all {} iterations; pass --max-iterations N (N > {done}) to continue",
            run_folder.display(),
            config.max_iterations
        )));
    }
    let prompts = Prompts::load(config.prompts_dir.as_deref(), domain.prompts())?;
    let targets = read_targets(&config.targets, &folder.target_copies(&config.targets))?;
    let anchor = Run::anchor(&config, domain.as_ref(), &targets);
    let memory = Memory::rebuild(Run::memory_config(&config), Some(anchor), records.clone())?;
    let log = RunLog::open_append(&folder.events_path())?;
    folder.write_args(&config, &recorded(domain.as_ref()))?;
    write_setup(&folder, provider.as_ref(), domain.as_ref())?;
    launch(Launch {
        config,
        prompts,
        provider,
        domain,
        folder,
        log,
        memory,
        targets,
        first_index: done + 1,
        records,
    })
}

/// What a run starts with, new or resumed.
struct Launch {
    config: RunConfig,
    prompts: Prompts,
    provider: Arc<dyn Provider>,
    domain: Arc<dyn Domain>,
    folder: RunFolder,
    log: RunLog,
    memory: Memory,
    targets: Vec<TargetView>,
    first_index: u32,
    /// The iterations recorded before (a resumed run's).
    records: Vec<IterationRecord>,
}

fn launch(mut start: Launch) -> Result<RunHandle, CoreError> {
    let root = start.folder.root().to_path_buf();
    // Logged before anything is spawned, so a run folder that cannot be written is refused
    // here rather than reported by a run that already started.
    let started = start.log.append(RunEvent::RunStarted {
        run_id: root.display().to_string(),
        task: start.config.task.clone(),
        protocol_version: PROTOCOL_VERSION,
        resumed_from_iteration: (start.first_index > 1).then_some(start.first_index),
    })?;
    // The programs that ran without error (whatever the verifier thought of their result:
    // E3; before E3 was recorded, no failure at all), oldest first; the last is the result.
    let history: Vec<String> = start
        .records
        .iter()
        .filter(|r| matches!(r.failure, None | Some(FailureClass::E3)) && !r.code.is_empty())
        .map(|r| r.code.clone())
        .collect();
    let scores = existing_scores(&start.folder);
    // Views scored before a resume were seen; which target each was is not recorded.
    let targets_scored = if scores.iterations.is_empty() {
        std::collections::BTreeSet::new()
    } else {
        start.targets.iter().map(TargetView::label).collect()
    };
    let format = start.domain.program_format();
    let time_limit = start.config.time_limit;
    Ok(RunHandle::spawn(root, |link| {
        link.send(started);
        Run {
            config: start.config,
            prompts: start.prompts,
            provider: start.provider,
            domain: start.domain,
            format,
            memory: start.memory,
            folder: start.folder,
            log: start.log,
            link,
            targets: start.targets,
            targets_scored,
            scores,
            first_index: start.first_index,
            final_code: history.last().cloned(),
            scene_program: None,
            history,
        }
        .run()
    })
    .with_time_limit(time_limit))
}

fn existing_scores(folder: &RunFolder) -> Scores {
    std::fs::read_to_string(folder.root().join(folder::SCORES_FILE))
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::sync::Arc;

    use serde_json::json;
    use viga_protocol::event::{RunEvent, StopReason};
    use viga_provider::{Provider, ProviderConfig, ProviderKind};
    use viga_sandbox::{ContainmentPolicy, ContainmentStatus, Guard};

    use crate::folder::{CONTAINMENT_FILE, PROVIDER_FILE, SavedProvider};
    use crate::test_domain::Notes;
    use crate::{RunConfig, RunFolder};

    /// A scripted provider built from settings, as a front end builds one, whose script
    /// file `name` in `dir` holds no turn: its first call fails.
    fn failing_provider(dir: &Path, name: &str) -> (ProviderConfig, Arc<dyn Provider>) {
        let script = dir.join(name);
        std::fs::write(&script, json!({"description": "", "turns": []}).to_string()).unwrap();
        let mut settings = ProviderConfig::new(ProviderKind::Scripted, "");
        settings.script = Some(script);
        let provider = viga_provider::build_provider_with_env(&settings, |_| None).unwrap();
        (settings, provider)
    }

    fn notes(containment: ContainmentStatus) -> Arc<Notes> {
        let mut notes = Notes::default();
        notes.containment = Some(containment);
        Arc::new(notes)
    }

    fn recorded_containment(folder: &Path) -> ContainmentStatus {
        let text = std::fs::read_to_string(folder.join(CONTAINMENT_FILE)).unwrap();
        serde_json::from_str(&text).unwrap()
    }

    /// How a run was set up is in its folder before its first event, so a run that fails at
    /// once still says it, and `resume` can build its provider again; a resumed run records
    /// the provider and containment it goes on with.
    #[tokio::test]
    async fn a_run_that_fails_at_once_has_recorded_its_provider_and_containment() {
        let dir = tempfile::tempdir().unwrap();
        let (settings, provider) = failing_provider(dir.path(), "first.json");
        let held = ContainmentStatus {
            policy: ContainmentPolicy::Auto,
            network: Guard::active("a network namespace of its own"),
            ..ContainmentStatus::off()
        };
        let mut config = RunConfig::new("a note");
        config.plan_each_iteration = false;
        config.max_iterations = 2;
        let output = dir.path().join("output");
        let mut run = crate::start(config, provider, notes(held.clone()), &output).unwrap();
        let folder = run.folder().to_path_buf();
        let first = run.next_event().await.unwrap();
        assert!(matches!(first.event, RunEvent::RunStarted { .. }));
        for file in [PROVIDER_FILE, CONTAINMENT_FILE] {
            assert!(folder.join(file).is_file(), "{file} before the first event");
        }
        while run.next_event().await.is_some() {}
        let outcome = run.wait().await.unwrap();
        assert!(
            matches!(outcome.stop, StopReason::Failed { .. }),
            "{:?}",
            outcome.stop
        );
        let saved = RunFolder::open(&folder).unwrap().read_provider();
        assert_eq!(
            saved,
            Some(SavedProvider {
                settings,
                untrusted_base_url: None,
                untrusted_key_env: None,
            })
        );
        assert_eq!(recorded_containment(&folder), held);

        let (resumed_with, provider) = failing_provider(dir.path(), "second.json");
        let run = crate::resume(&folder, provider, notes(ContainmentStatus::off()), None).unwrap();
        run.wait().await.unwrap();
        let saved = RunFolder::open(&folder).unwrap().read_provider().unwrap();
        assert_eq!(saved.settings, resumed_with);
        assert_eq!(recorded_containment(&folder), ContainmentStatus::off());
    }

    /// A model that never answers.
    struct Silent;

    #[async_trait::async_trait]
    impl Provider for Silent {
        fn name(&self) -> &str {
            "silent"
        }
        fn model(&self) -> &str {
            "silent"
        }
        async fn complete(
            &self,
            _request: &viga_provider::ModelRequest,
        ) -> Result<viga_provider::ModelResponse, viga_provider::ProviderError> {
            std::future::pending().await
        }
    }

    /// A run whose model never answers ends at its time limit, with a `run_finished` that
    /// says so as its folder's last line.
    #[tokio::test]
    async fn a_run_stops_at_its_time_limit_and_its_folder_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = RunConfig::new("a note");
        config.time_limit = Some(std::time::Duration::from_secs(1));
        let output = dir.path().join("output");
        let mut run = crate::start(
            config,
            Arc::new(Silent),
            notes(ContainmentStatus::off()),
            &output,
        )
        .unwrap();
        let folder = run.folder().to_path_buf();
        while run.next_event().await.is_some() {}
        let outcome = run.wait().await.unwrap();
        assert_eq!(outcome.stop, StopReason::TimeLimit { seconds: 1 });
        assert_eq!(outcome.stop.exit_code(), 0);
        let log = std::fs::read_to_string(folder.join(crate::folder::EVENTS_FILE)).unwrap();
        let last: serde_json::Value = serde_json::from_str(log.lines().last().unwrap()).unwrap();
        assert_eq!(last["type"], "run_finished", "{last}");
        assert_eq!(last["stop"], json!({"reason": "time_limit", "seconds": 1}));
    }

    /// A failed run's report says why in words, never as Rust's debug form of the stop.
    #[tokio::test]
    async fn a_failed_runs_report_gives_the_reason_in_words() {
        let dir = tempfile::tempdir().unwrap();
        let (_, provider) = failing_provider(dir.path(), "empty.json");
        let mut config = RunConfig::new("a note");
        config.plan_each_iteration = false;
        let mut run = crate::start(
            config,
            provider,
            notes(ContainmentStatus::off()),
            &dir.path().join("output"),
        )
        .unwrap();
        let folder = run.folder().to_path_buf();
        while run.next_event().await.is_some() {}
        run.wait().await.unwrap();
        let html = crate::report::render_html(&folder, &crate::DomainKinds::new()).unwrap();
        let stopped = html
            .split("<th>stopped</th><td>")
            .nth(1)
            .and_then(|rest| rest.split("</td>").next())
            .unwrap();
        assert!(
            !stopped.contains("Failed {") && !stopped.contains("kind:"),
            "{stopped}"
        );
        insta::assert_snapshot!(stopped, @"failed: model call failed: scripted provider: the script scripted:empty has 0 turns and all were used; add turns or lower --max-iterations");
    }
}
