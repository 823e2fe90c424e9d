//! The add-on agent (seed 004): a tool-calling loop on a live scene, over the tools of the
//! Blender add-ons that ship an `addon_ai.json`, plus tools to read and look at the scene.
//!
//! [`start`] asks Blender which add-ons it has, builds the system prompt from the registry's
//! prompt section (by priority: descriptions, parameters, usage, hints), and returns a
//! [`RunHandle`] like every other run: events out, cancel in, an [`AgentOutcome`] at the
//! end. Each step is one model call; its tool calls run in order. An add-on command's
//! arguments are checked against its manifest's schema before anything reaches Blender (a
//! refusal goes back to the model with the validation error); one that runs becomes one
//! undo step, and the bridge's reply (`{"result", "scene"}`, the scene after the command)
//! goes back to the model as JSON. The run stops when the model answers without a tool call
//! ([`StopReason::Accepted`]), after `max_steps` model calls ([`StopReason::MaxIterations`]),
//! on a cancel, or on a failure nothing the model does can fix.
//!
//! The scene is live: a person's open scene when `attached` (through the viga add-on), else
//! viga's own Blender, whose scene is saved as `final.blend` at the end. A cancel abandons a
//! model call at once; a command in flight finishes and gets its undo step first, so what a
//! cancelled run leaves is whole steps, each undoable.
//!
//! The run folder (`<output>/agent/<timestamp>/<task>/`, made by [`prepare`] before
//! Blender starts) holds `args.json` (this [`AgentConfig`]), `results/` (where add-on
//! commands write: their path parameters are confined to it, nested ones included, and a
//! contained Blender of viga's may write nowhere else), `events.jsonl` (the shared
//! `RunEvent`s, written as they happen),
//! `transcript.json` (every step's tool, arguments, result and scene after it, rewritten
//! after each call), `renders/<step>/`, and `report.html`, written by [`crate::report`].
//!
//! This module owns the settings, the run folder and the start; `run` owns the loop,
//! `tools` the tools offered to the model and `transcript` the record of the steps.

pub mod report;
mod run;
mod tools;
mod transcript;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use viga_blender::BlenderTransport;
use viga_memory::RunLog;
use viga_protocol::PROTOCOL_VERSION;
use viga_protocol::bridge::{RenderEngine, RenderSpec};
use viga_protocol::event::{RunEvent, StopReason, TimedEvent};
use viga_provider::Provider;
use viga_skills::addons::{AddonRegistry, ConfinedFolder, discover};
use viga_skills::context::InstructionTranslator;

use viga_core::conversation::EarlierTurn;
use viga_core::folder::{ARGS_FILE, EVENTS_FILE, RunFolder};
use viga_core::prompts::fill;
use viga_core::{CoreError, Prompts, ProviderTranslator, RunHandle, RunLink, slug};

use self::tools::ToolBelt;
pub use self::transcript::{
    AgentStep, CommandRecord, TRANSCRIPT_FILE, Transcript, read_transcript,
};

/// The `mode` of an agent run: its folder level and the mark in its `args.json`.
pub const AGENT_MODE: &str = "agent";
const SYSTEM_PROMPT: &str = include_str!("../prompts/agent.md");
/// Objects of the scene the model is shown before its first step; it can page on with
/// `get_scene_info`.
const OPENING_SCENE_OBJECTS: u32 = 40;
/// The longest summary a `ToolInvoked` event carries.
const SUMMARY_CHARS: usize = 200;

/// An agent run's settings, saved as its `args.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentConfig {
    /// What the user asked for.
    pub task: String,
    /// Short name used for the run folder.
    pub task_name: String,
    /// Always [`AGENT_MODE`]: tells an agent's run folder from a loop run's.
    pub mode: String,
    /// Model calls the agent may make before it is stopped.
    pub max_steps: u32,
    /// A folder of add-on packages to load as well as the installed add-ons.
    #[serde(default)]
    pub addons_folder: Option<PathBuf>,
    /// The scene is a person's open scene (viga attached through the add-on).
    pub attached: bool,
    /// How looks are rendered.
    pub render: RenderSpec,
    /// Recorded for the run folder; the provider itself is passed in.
    pub provider: String,
    pub model: String,
    pub max_tokens: u32,
    /// The earlier turns of the conversation this run continues (empty: it starts one); the
    /// model is reminded of them before the request ([`turns_after`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conversation: Vec<EarlierTurn>,
    /// Where a follow-up starts, as its model is told: the earlier run's final scene, or a
    /// scene as it is now (attached, or one named with `--blend`).
    #[serde(default)]
    pub starts_from: viga_core::conversation::StartFrom,
    /// After each step whose add-on commands ran, render one look at the whole scene
    /// (`renders/<step>/`, announced as `RenderProduced`), so a front end can show it.
    #[serde(default)]
    pub look_after_commands: bool,
    /// Show that look to the model with the step's results (a model that reads images).
    #[serde(default)]
    pub model_sees: bool,
    /// Who confines the path arguments of add-on commands.
    #[serde(default)]
    pub paths: PathArguments,
    /// How long the whole run may take; `None`: no limit. Seconds in `args.json`.
    #[serde(with = "viga_core::time_limit::optional_seconds", default)]
    pub time_limit: Option<std::time::Duration>,
}

/// The default limit of an add-on agent's run.
pub const DEFAULT_AGENT_TIME_LIMIT: std::time::Duration = std::time::Duration::from_secs(30 * 60);

/// Who keeps add-on commands' path arguments in one folder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PathArguments {
    /// viga: resolved in the run's `results/` folder, refused when they lead out.
    #[default]
    Results,
    /// The Blender the commands run in: a person's Blender dialled in to a server, whose
    /// files are not on the server's machine, confines them to a folder its person chose.
    Blender,
}

impl AgentConfig {
    /// Settings for `task` with the defaults of `viga agent`.
    pub fn new(task: impl Into<String>) -> Self {
        let task = task.into();
        Self {
            task_name: slug(&task),
            task,
            mode: AGENT_MODE.to_owned(),
            max_steps: 12,
            addons_folder: None,
            attached: false,
            // Workbench at 512x512: about a second per view on a CPU.
            render: RenderSpec {
                engine: RenderEngine::Workbench,
                width: 512,
                height: 512,
                samples: None,
            },
            provider: String::new(),
            model: String::new(),
            max_tokens: 4096,
            conversation: Vec::new(),
            starts_from: viga_core::conversation::StartFrom::Result,
            look_after_commands: false,
            model_sees: false,
            paths: PathArguments::Results,
            time_limit: Some(DEFAULT_AGENT_TIME_LIMIT),
        }
    }

    /// What is wrong with the settings, in words a user can act on.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.task.trim().is_empty() {
            problems.push("the request is empty: say what to do with the add-on tools".to_owned());
        }
        if self.max_steps == 0 {
            problems.push("max_steps must be at least 1".to_owned());
        }
        let sides = [self.render.width, self.render.height];
        if sides.iter().any(|side| !(1..=8192).contains(side)) {
            problems.push("render width and height must be between 1 and 8192".to_owned());
        }
        if let Some(folder) = &self.addons_folder
            && !folder.is_dir()
        {
            problems.push(format!(
                "the add-on folder {} does not exist",
                folder.display()
            ));
        }
        problems
    }
}

/// How an agent run ended.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentOutcome {
    /// `Accepted` when the model answered, `MaxIterations` when the steps ran out.
    pub stop: StopReason,
    /// Model calls made.
    pub steps: u32,
    /// The model's final answer, when it gave one.
    pub answer: Option<String>,
    pub folder: PathBuf,
}

/// An agent run in progress.
pub type AgentHandle = RunHandle<AgentOutcome>;

/// Whether `run_folder` holds an agent run (its `args.json` says so).
pub fn is_agent_run(run_folder: &Path) -> bool {
    std::fs::read_to_string(run_folder.join(ARGS_FILE))
        .ok()
        .and_then(|text| serde_json::from_str::<Value>(&text).ok())
        .is_some_and(|args| args.get("mode").and_then(Value::as_str) == Some(AGENT_MODE))
}

/// The turns a follow-up of the agent run in `previous` carries: the ones that run carried,
/// then itself (its request, its answer and the commands it ran), the newest
/// [`TURNS_KEPT`](viga_core::conversation::TURNS_KEPT).
pub fn turns_after(previous: &Path) -> Result<Vec<EarlierTurn>, CoreError> {
    if !is_agent_run(previous) {
        return Err(CoreError::Config(format!(
            "{} is not an add-on agent run; a follow-up continues a run of its own kind (scene runs: viga run --continue, Geometry Nodes runs: viga gn --continue)",
            previous.display()
        )));
    }
    let config = read_config(previous)?;
    let mut turns = config.conversation.clone();
    turns.push(remembered_turn(previous, &config)?);
    Ok(viga_core::conversation::newest(turns))
}

/// The scene a follow-up of the agent run in `previous` works on in viga's own Blender: the
/// scene that run left (`final.blend`); a run that saved none is refused with what to do.
pub fn continued_scene(previous: &Path) -> Result<PathBuf, CoreError> {
    let scene = previous.join(viga_core::folder::FINAL_BLEND);
    if scene.is_file() {
        return Ok(scene);
    }
    Err(CoreError::Config(format!(
        "{} left no scene to continue from (no {}); name the scene to work on with --blend",
        previous.display(),
        viga_core::folder::FINAL_BLEND
    )))
}

/// How the finished agent run in `folder` (whose settings are `config`) is remembered by the
/// next request of its conversation: its request, its answer and the commands it ran.
pub fn remembered_turn(folder: &Path, config: &AgentConfig) -> Result<EarlierTurn, CoreError> {
    let previous = folder;
    let transcript = read_transcript(previous)?.unwrap_or_default();
    let log = viga_memory::read_run_log(&previous.join(EVENTS_FILE))?;
    let ended = viga_core::conversation::ended_word(&log.events);
    let commands: Vec<String> = transcript
        .steps
        .iter()
        .flat_map(|step| &step.calls)
        .filter(|call| !tools::reads_or_looks(&call.tool))
        .map(|call| {
            let outcome = if call.ok { "done" } else { "refused" };
            format!("{}({}) {outcome}", call.tool, call.arguments)
        })
        .collect();
    let mut result = match &transcript.answer {
        Some(answer) => format!("answered: {answer}"),
        None => "no answer".to_owned(),
    };
    if !commands.is_empty() {
        result.push_str(&format!("; commands: {}", commands.join(", ")));
    }
    Ok(EarlierTurn {
        request: config.task.clone(),
        plan: None,
        result: Some(result),
        accepted: ended == "accepted",
        verdict: Vec::new(),
        ended: ended.to_owned(),
        run: previous.to_path_buf(),
    })
}

/// An agent run's settings, from its folder.
pub fn read_config(run_folder: &Path) -> Result<AgentConfig, CoreError> {
    let path = run_folder.join(ARGS_FILE);
    let text = std::fs::read_to_string(&path).map_err(|err| CoreError::io(&path, err))?;
    serde_json::from_str(&text)
        .map_err(|err| CoreError::Config(format!("{} is not valid: {err}", path.display())))
}

/// Where an agent run's add-on commands may write: this folder of its run folder. Their
/// path parameters are resolved in it, and viga's own Blender may write nowhere else.
pub const RESULTS_DIR: &str = "results";

/// A new agent run's folder, made before its Blender starts: `args.json`, an empty event
/// log and the results folder ([`RESULTS_DIR`]), which is the only place a contained
/// Blender of viga's may then be allowed to write.
#[derive(Debug)]
pub struct AgentFolder {
    config: AgentConfig,
    output_root: PathBuf,
    folder: RunFolder,
    log: RunLog,
    results: PathBuf,
}

impl AgentFolder {
    /// The run's settings.
    pub fn config(&self) -> &AgentConfig {
        &self.config
    }

    /// The run folder.
    pub fn root(&self) -> &Path {
        self.folder.root()
    }

    /// Where add-on commands write their results (absolute).
    pub fn results(&self) -> &Path {
        &self.results
    }
}

/// Checks the settings and makes the run's folder under `output_root`. Fails before any
/// folder is made when the settings are wrong.
pub fn prepare(mut config: AgentConfig, output_root: &Path) -> Result<AgentFolder, CoreError> {
    check_settings(&config)?;
    // Blender resolves paths from its own working directory, which may not be ours.
    if let Some(folder) = &config.addons_folder {
        config.addons_folder = Some(absolute(folder)?);
    }
    let (folder, log) = create_folder(output_root, &config)?;
    let results = absolute(&folder.root().join(RESULTS_DIR))?;
    std::fs::create_dir_all(&results).map_err(|err| CoreError::io(&results, err))?;
    Ok(AgentFolder {
        config,
        output_root: output_root.to_path_buf(),
        folder,
        log,
        results,
    })
}

/// Finds the add-ons `blender` has (installed ones with a manifest, and those in the
/// config's folder), then starts the agent in its prepared folder, recording there first
/// the settings `provider` was built from and the containment `blender` runs under
/// ([`viga_core::folder::write_setup`]). When no add-on offers a tool nothing starts and the
/// folder is removed again.
pub async fn start(
    prepared: AgentFolder,
    provider: Arc<dyn Provider>,
    blender: Arc<dyn BlenderTransport>,
) -> Result<AgentHandle, CoreError> {
    let AgentFolder {
        config,
        output_root,
        folder,
        mut log,
        results,
    } = prepared;
    let addons_folder = config.addons_folder.as_deref();
    let found = find_addons_and_record(folder.root(), addons_folder, &*provider, &*blender).await;
    let (addons, problems) = match found {
        Ok(found) => found,
        Err(err) => {
            remove_unstarted(folder.root(), &output_root);
            return Err(err);
        }
    };
    let results = match config.paths {
        PathArguments::Results => Some(
            ConfinedFolder::new(&results, "the run's results folder")
                .map_err(|err| CoreError::io(&results, err))?,
        ),
        PathArguments::Blender => None,
    };
    let translating =
        ProviderTranslator::new(Arc::clone(&provider), Prompts::default().investigate);
    let translations = translating.calls();
    let translator: Arc<dyn InstructionTranslator> = Arc::new(translating);
    let belt = ToolBelt::new(
        &addons,
        Arc::clone(&blender),
        config.render,
        Arc::clone(&translator),
        results,
    )
    .map_err(CoreError::Config)?;
    let system = fill(SYSTEM_PROMPT, &[("addons", addons.prompt_section())]);
    // Logged before anything is spawned, so a run folder that cannot be written is refused
    // here rather than reported by a run that already started.
    let early: Vec<TimedEvent> = opening_events(folder.root(), &config.task, problems)
        .into_iter()
        .map(|event| log.append(event))
        .collect::<Result<_, _>>()?;
    let transcript = Transcript {
        request: config.task.clone(),
        addons: addons.ids().into_iter().map(str::to_owned).collect(),
        tools: belt.names(),
        ..Transcript::default()
    };
    let root = folder.root().to_path_buf();
    let time_limit = config.time_limit;
    Ok(RunHandle::spawn(root, |link| {
        for event in early {
            link.send(event);
        }
        AgentRun {
            config,
            provider,
            blender,
            addons,
            translator,
            translations,
            belt,
            system,
            folder,
            log,
            link,
            transcript,
            steps_taken: 0,
            renders_saved: 0,
        }
        .run()
    })
    .with_time_limit(time_limit))
}

/// The add-ons `blender` has ([`find_addons`]), once the run's `folder` records how the run
/// is set up ([`viga_core::folder::write_setup`]): before its first event, so a run that ends at
/// once still says it.
async fn find_addons_and_record(
    folder: &Path,
    addons_folder: Option<&Path>,
    provider: &dyn Provider,
    blender: &dyn BlenderTransport,
) -> Result<(AddonRegistry, Vec<String>), CoreError> {
    let found = find_addons(blender, addons_folder).await?;
    viga_core::folder::write_setup(folder, provider.config(), blender.containment().as_ref())?;
    Ok(found)
}

/// What a run in `folder` for `task` says first: that it started, and each add-on skipped
/// (`problems`).
fn opening_events(folder: &Path, task: &str, problems: Vec<String>) -> Vec<RunEvent> {
    let started = RunEvent::RunStarted {
        run_id: folder.display().to_string(),
        task: task.to_owned(),
        protocol_version: PROTOCOL_VERSION,
        resumed_from_iteration: None,
    };
    let skipped = problems.into_iter().map(|problem| RunEvent::Warning {
        message: format!("add-on skipped: {problem}"),
    });
    std::iter::once(started).chain(skipped).collect()
}

/// Removes the folder of a run that did not start (only what [`prepare`] made is in it:
/// its settings, an empty log and an empty results folder), and the folders above it up
/// to `output_root` that are left empty.
fn remove_unstarted(root: &Path, output_root: &Path) {
    let _ = std::fs::remove_dir_all(root);
    for parent in root.ancestors().skip(1) {
        if parent == output_root || std::fs::remove_dir(parent).is_err() {
            break;
        }
    }
}

fn check_settings(config: &AgentConfig) -> Result<(), CoreError> {
    let problems = config.problems();
    if problems.is_empty() {
        return Ok(());
    }
    Err(CoreError::Config(format!(
        "the agent's settings are invalid:\n  - {}",
        problems.join("\n  - ")
    )))
}

fn absolute(path: &Path) -> Result<PathBuf, CoreError> {
    std::path::absolute(path).map_err(|err| CoreError::io(path, err))
}

/// The registry of the add-ons Blender has, and the problems of those it skipped. No add-on
/// tool at all is an error: the agent could only look.
async fn find_addons(
    blender: &dyn BlenderTransport,
    folder: Option<&Path>,
) -> Result<(AddonRegistry, Vec<String>), CoreError> {
    let mut addons = AddonRegistry::new();
    let scene = tools::scene_tools().map_err(CoreError::Config)?;
    addons.reserve_tool_names(scene.names());
    let problems = discover(blender, folder, &mut addons)
        .await
        .map_err(|err| CoreError::Config(format!("Blender could not list its add-ons: {err}")))?;
    // An add-on whose tools cannot be offered is reported by the tool belt, not here.
    if addons.tools().is_ok_and(|tools| tools.is_empty()) {
        let skipped = if problems.is_empty() {
            String::new()
        } else {
            format!("; skipped:\n  - {}", problems.join("\n  - "))
        };
        return Err(CoreError::Config(format!(
            "no add-on offers tools to the agent: pass --addons DIR (a folder of add-on packages, each with an addon_ai.json and VIGA_COMMANDS) or install an add-on that ships one{skipped}"
        )));
    }
    Ok((addons, problems))
}

/// `<output>/agent/<timestamp>/<task>/` with its `args.json` and an empty event log.
fn create_folder(
    output_root: &Path,
    config: &AgentConfig,
) -> Result<(RunFolder, RunLog), CoreError> {
    let root = viga_core::folder::new_run_root(output_root, AGENT_MODE, &config.task_name)?;
    let io_error = |path: &Path, err: std::io::Error| CoreError::io(path, err);
    std::fs::create_dir_all(&root).map_err(|err| io_error(&root, err))?;
    let args =
        serde_json::to_string_pretty(config).map_err(|err| CoreError::Config(err.to_string()))?;
    let args_path = root.join(ARGS_FILE);
    viga_io::files::write_atomic(&args_path, args.as_bytes())
        .map_err(|err| io_error(&args_path, err))?;
    let log = RunLog::create(&root.join(EVENTS_FILE))?;
    Ok((RunFolder::open(&root)?, log))
}

struct AgentRun {
    config: AgentConfig,
    provider: Arc<dyn Provider>,
    blender: Arc<dyn BlenderTransport>,
    /// The add-ons as last discovered: asked again before every model turn.
    addons: AddonRegistry,
    translator: Arc<dyn InstructionTranslator>,
    /// The model calls its translator made (a look's free-form camera instruction), recorded
    /// as the run's own.
    translations: Arc<viga_core::ModelCalls>,
    belt: ToolBelt,
    system: String,
    folder: RunFolder,
    log: RunLog,
    link: RunLink,
    transcript: Transcript,
    steps_taken: u32,
    /// Numbers the renders written here (when Blender could not write them itself).
    renders_saved: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_problems_are_said_in_words() {
        assert!(AgentConfig::new("move the lamp").problems().is_empty());
        let mut config = AgentConfig::new(" ");
        config.max_steps = 0;
        config.addons_folder = Some(PathBuf::from("/no/such/folder"));
        let problems = config.problems().join("\n");
        for fragment in [
            "request is empty",
            "max_steps",
            "/no/such/folder does not exist",
        ] {
            assert!(problems.contains(fragment), "{problems}");
        }
        assert_eq!(
            AgentConfig::new("put the lamp left").task_name,
            "put-the-lamp-left"
        );
    }
}
