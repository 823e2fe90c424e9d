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
//! at, fixed and run again within the iteration) and the verifier (canonical views, tools,
//! verdict; Cycles renders when there is a target); fast retry of E1/E2 failures with seed
//! 002's prompt (at most `max_fast_retries`, retries are not iterations, `retry_count` recorded),
//! programs stopped at the program timeout included; Blender lost in any phase, restarted by
//! the worker supervisor, the scene rebuilt and the phase done again; stop conditions
//! (verifier acceptance, the iteration budget, cancellation, failures nothing can fix, each
//! with its [`FailureKind`](viga_protocol::event::FailureKind)); the run folder, written as
//! events arrive; resume.
//!
//! **Must not:** parse command lines, print to a terminal, or know which provider or Blender
//! transport it was given: both come in as trait objects.
//!
//! ```no_run
//! # async fn demo(provider: std::sync::Arc<dyn viga_provider::Provider>,
//! #               blender: std::sync::Arc<dyn viga_blender::BlenderTransport>) -> Result<(), viga_core::CoreError> {
//! let config = viga_core::RunConfig::new("a red cube on a grey floor");
//! let mut run = viga_core::start(config, provider, blender, std::path::Path::new("output"))?;
//! while let Some(event) = run.next_event().await {
//!     println!("{:?}", event.event);
//! }
//! let outcome = run.wait().await?;
//! println!("stopped: {:?} after {} iterations", outcome.stop, outcome.iterations);
//! # Ok(()) }
//! ```

pub mod addon_agent;
pub mod attached;
mod config;
mod error;
mod excerpt;
mod extract;
pub mod folder;
mod handle;
mod program;
mod prompts;
mod recover;
pub mod report;
mod run;
mod scores;
mod shrink;
mod tool_generator;
mod translate;
mod verify;
mod watch;

use std::path::Path;
use std::sync::Arc;

use viga_blender::BlenderTransport;
use viga_memory::{Memory, RunLog, iterations_in, read_run_log};
use viga_protocol::PROTOCOL_VERSION;
use viga_protocol::event::{RunEvent, StopReason};
use viga_protocol::iteration::FailureClass;
use viga_protocol::message::ImageData;
use viga_provider::Provider;

pub use config::{
    DEFAULT_GENERATOR_MAX_TURNS, DEFAULT_PROGRAM_TIMEOUT, GeneratorTools, RunConfig,
    VERIFIER_CYCLES_SAMPLES, slug,
};
pub use error::{CoreError, blender_failure_kind, provider_failure_kind};
pub use extract::first_python_block;
pub use folder::RunFolder;
pub use handle::{Cancelled, Canceller, RunHandle, RunLink};
pub use program::{BLENDER_CRASH_ERROR, PROGRAM_TIMEOUT_ERROR};
pub use prompts::Prompts;
pub use run::RunOutcome;
pub use scores::{IterationScores, Scores};
pub use translate::ProviderTranslator;

use crate::run::Run;
use crate::watch::WatchedBlender;

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

/// Starts a new run in a new folder under `output_root`.
pub fn start(
    config: RunConfig,
    provider: Arc<dyn Provider>,
    blender: Arc<dyn BlenderTransport>,
    output_root: &Path,
) -> Result<RunHandle, CoreError> {
    check_settings(&config)?;
    let prompts = Prompts::load(config.prompts_dir.as_deref())?;
    let folder = RunFolder::create(output_root, &config)?;
    start_in(folder, prompts, config, provider, blender)
}

fn check_settings(config: &RunConfig) -> Result<(), CoreError> {
    let problems = config.problems();
    if problems.is_empty() {
        return Ok(());
    }
    Err(CoreError::Config(format!(
        "the run settings are invalid:\n  - {}",
        problems.join("\n  - ")
    )))
}

fn start_in(
    folder: RunFolder,
    prompts: Prompts,
    config: RunConfig,
    provider: Arc<dyn Provider>,
    blender: Arc<dyn BlenderTransport>,
) -> Result<RunHandle, CoreError> {
    folder.write_args(&config)?;
    let target = match &config.target {
        Some(path) => {
            let image = read_target(path)?;
            folder.write_bytes(folder::TARGET_FILE, &image.data)?;
            Some(image)
        }
        None => None,
    };
    let log = RunLog::create(&folder.events_path())?;
    let mut memory = Memory::new(Run::memory_config(&config))?;
    memory.set_anchor(Run::anchor(&config, target.as_ref()));
    launch(
        config, prompts, provider, blender, folder, log, memory, target, 1, None,
    )
}

/// The settings of the run in `run_folder` as [`resume`] continues it (what its Blender
/// must be able to read is in them). An add-on agent run is refused: it cannot be resumed.
pub fn resumable_config(run_folder: &Path) -> Result<RunConfig, CoreError> {
    let folder = RunFolder::open(run_folder)?;
    if addon_agent::is_agent_run(run_folder) {
        return Err(CoreError::Config(format!(
            "{} is an add-on agent run, which cannot be resumed; start a new one with `viga agent`",
            run_folder.display()
        )));
    }
    folder.read_args()
}

/// Continues a run from its folder at the iteration after the last one recorded, with the
/// settings in its `args.json`; `max_iterations` may raise the budget.
pub fn resume(
    run_folder: &Path,
    provider: Arc<dyn Provider>,
    blender: Arc<dyn BlenderTransport>,
    max_iterations: Option<u32>,
) -> Result<RunHandle, CoreError> {
    let folder = RunFolder::open(run_folder)?;
    let mut config = resumable_config(run_folder)?;
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
    let prompts = Prompts::load(config.prompts_dir.as_deref())?;
    let target_path = folder.target_path();
    let target = if target_path.is_file() {
        Some(read_target(&target_path)?)
    } else {
        None
    };
    let anchor = Run::anchor(&config, target.as_ref());
    let memory = Memory::rebuild(Run::memory_config(&config), Some(anchor), records.clone())?;
    // The last program that ran without error, whatever the verifier thought of its scene
    // (E3; before E3 was recorded, no failure at all).
    let final_code = records
        .iter()
        .rev()
        .find(|r| matches!(r.failure, None | Some(FailureClass::E3)) && !r.code.is_empty())
        .map(|r| r.code.clone());
    let log = RunLog::open_append(&folder.events_path())?;
    folder.write_args(&config)?;
    launch(
        config,
        prompts,
        provider,
        blender,
        folder,
        log,
        memory,
        target,
        done + 1,
        final_code,
    )
}

#[allow(clippy::too_many_arguments)] // one private constructor shared by start and resume
fn launch(
    config: RunConfig,
    prompts: Prompts,
    provider: Arc<dyn Provider>,
    blender: Arc<dyn BlenderTransport>,
    folder: RunFolder,
    mut log: RunLog,
    memory: Memory,
    target: Option<ImageData>,
    first_index: u32,
    final_code: Option<String>,
) -> Result<RunHandle, CoreError> {
    let root = folder.root().to_path_buf();
    // Logged before anything is spawned, so a run folder that cannot be written is refused
    // here rather than reported by a run that already started.
    let started = log.append(RunEvent::RunStarted {
        run_id: root.display().to_string(),
        task: config.task.clone(),
        protocol_version: PROTOCOL_VERSION,
        resumed_from_iteration: (first_index > 1).then_some(first_index),
    })?;
    let blender = Arc::new(WatchedBlender::new(blender));
    let tools = Run::tool_context(&config, &prompts, &provider, blender.clone())?;
    let scores = existing_scores(&folder);
    Ok(RunHandle::spawn(root, |link| {
        link.send(started);
        Run {
            config,
            prompts,
            provider,
            blender,
            tools,
            memory,
            folder,
            log,
            link,
            target,
            scores,
            first_index,
            final_code,
            scene_program: None,
        }
        .run()
    }))
}

fn existing_scores(folder: &RunFolder) -> Scores {
    std::fs::read_to_string(folder.root().join(folder::SCORES_FILE))
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_default()
}
