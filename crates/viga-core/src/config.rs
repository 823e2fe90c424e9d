//! A run's settings. Written to `args.json` in the run folder, so `viga resume` continues with
//! exactly the settings the run started with.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use viga_protocol::event::ModelRole;
use viga_provider::{ProviderConfig, ProviderKind};

use crate::CoreError;

/// The longest a program may run before it is stopped, unless the run says otherwise.
pub const DEFAULT_PROGRAM_TIMEOUT: Duration = Duration::from_secs(60);
/// Model turns the generator may take per iteration when it has tools, unless the run says
/// otherwise.
pub const DEFAULT_GENERATOR_MAX_TURNS: u32 = 6;
/// Limits a run's program timeout is checked against: below a second nothing real runs,
/// and a day is long past anything a scene program needs.
const PROGRAM_TIMEOUT_RANGE: (Duration, Duration) =
    (Duration::from_secs(1), Duration::from_secs(86_400));

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunConfig {
    /// What the scene should be, in words.
    pub task: String,
    /// Short name used for the run folder.
    pub task_name: String,
    /// Folder level above the timestamp (`output/<mode>/<timestamp>/<task>/`).
    pub mode: String,
    /// Target pictures, each with the view of the result it shows; copied into the run
    /// folder (`targets/`, and the first also as `target.png`). Empty: the task alone.
    #[serde(default)]
    pub targets: Vec<TargetSpec>,
    /// The earlier turns of the conversation this run continues (empty: it starts one); the
    /// model is reminded of them beside the task. See [`crate::conversation`].
    #[serde(default)]
    pub conversation: Vec<crate::conversation::EarlierTurn>,
    /// Where a follow-up starts, which its model is told ([`crate::conversation::StartFrom`]);
    /// the result of the last turn in run folders written before it was recorded.
    #[serde(default)]
    pub starts_from: crate::conversation::StartFrom,
    pub max_iterations: u32,
    /// L: iterations the memory keeps.
    pub memory_window: usize,
    pub memory_budget_bytes: usize,
    /// Fast retries per iteration for E1/E2 (seed 002: 3).
    pub max_fast_retries: u32,
    /// Model turns the verifier may take before it must conclude.
    pub verifier_max_turns: u32,
    /// Ask for a plan before the code every iteration (seed 000 step 2).
    pub plan_each_iteration: bool,
    /// Whether the generator calls its tools (seed 001: `get_scene_info`,
    /// `get_better_assets`, `execute_code`, `make_plan`, `end_process`) instead of answering
    /// with one fenced program. Decided before the run from the provider
    /// ([`GeneratorTools::resolve`]); off in run folders written before it existed.
    #[serde(default)]
    pub generator_tools: bool,
    /// A generator with tools that calls `end_process` ends the run (seed 001), after its last
    /// program's renders and scores are recorded; `false`: the verifier is told of the request
    /// and decides. `false` in run folders written before the generator could end a run.
    #[serde(default)]
    pub generator_ends_run: bool,
    /// Model turns the generator may take per iteration when it has tools.
    #[serde(default = "default_generator_max_turns")]
    pub generator_max_turns: u32,
    /// How the provider's tool calling was found out when it was asked or remembered
    /// (an OpenAI-compatible server), in words for the report; `None` otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calling_found: Option<String>,
    /// Recorded for the run folder; the provider itself is passed in.
    pub provider: String,
    pub model: String,
    #[serde(default)]
    pub prompts_dir: Option<PathBuf>,
    /// Output-token cap of the generator's replies (programs and fast fixes), which hold
    /// whole scene programs. Called `max_tokens` in run folders written before the caps
    /// were per role.
    #[serde(alias = "max_tokens")]
    pub generator_max_tokens: u32,
    /// Output-token cap of the plan before each program.
    #[serde(default = "default_planner_max_tokens")]
    pub planner_max_tokens: u32,
    /// Output-token cap of each verifier turn: a few sentences and a tool call. A model that
    /// falls into repeating itself is cut off here instead of running on for thousands of
    /// tokens.
    #[serde(default = "default_verifier_max_tokens")]
    pub verifier_max_tokens: u32,
    /// How long one program may run before it is stopped (and its worker restarted); the
    /// model hears it as a failure it can fix. Seconds in `args.json`.
    #[serde(with = "seconds", default = "default_program_timeout")]
    pub program_timeout: Duration,
    /// How long the whole run may take, from its start (a resumed run's clock starts
    /// again); `None`: no limit, as in run folders written before the limit existed.
    /// Seconds in `args.json`.
    #[serde(with = "crate::time_limit::optional_seconds", default)]
    pub time_limit: Option<Duration>,
}

/// A target picture and the view of the result it shows (see [`crate::domain::TargetView`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TargetSpec {
    pub path: PathBuf,
    /// A camera's name, a slide's number, a viewport; absent: the domain's default view.
    #[serde(default)]
    pub view: Option<String>,
    /// The animation frame the picture shows (4D scenes).
    #[serde(default)]
    pub frame: Option<i32>,
}

impl TargetSpec {
    /// A picture of the default view.
    pub fn picture(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            view: None,
            frame: None,
        }
    }
}

fn default_planner_max_tokens() -> u32 {
    1024
}

fn default_verifier_max_tokens() -> u32 {
    1024
}

fn default_program_timeout() -> Duration {
    DEFAULT_PROGRAM_TIMEOUT
}

fn default_generator_max_turns() -> u32 {
    DEFAULT_GENERATOR_MAX_TURNS
}

/// Whether the generator gets its tools (`--generator-tools`): `auto` when the provider can
/// call tools, `on` always (a provider that cannot is refused), `off` never (the generator
/// answers with one fenced program, seed 000).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GeneratorTools {
    #[default]
    Auto,
    On,
    Off,
}

impl std::str::FromStr for GeneratorTools {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.to_ascii_lowercase().as_str() {
            "auto" => Ok(Self::Auto),
            "on" => Ok(Self::On),
            "off" => Ok(Self::Off),
            other => Err(format!(
                "unknown generator tools setting {other:?}; use auto, on or off"
            )),
        }
    }
}

/// Tools only the generator has: a script that calls one was written for a generator with
/// tools (the verifier's scripted turns call `end_process` and `get_scene_info` too).
const GENERATOR_ONLY_TOOLS: [&str; 3] = ["execute_code", "make_plan", "get_better_assets"];

impl GeneratorTools {
    /// Whether a run with the provider `provider` describes offers the generator its tools.
    /// `auto` follows the provider config's `tool_calling` (else its kind's default); a
    /// scripted provider without the setting follows its script: tools when some turn
    /// calls one of the generator's own tools. `on` is the person's word for it, unless the
    /// provider's own config says the model cannot call tools (a configuration error): an
    /// OpenAI-compatible server's default (off) does not overrule it, since llama.cpp, vLLM
    /// and Ollama call tools.
    pub fn resolve(self, provider: &ProviderConfig) -> Result<bool, CoreError> {
        match (self, provider.tool_calling()) {
            (Self::Off, _) => Ok(false),
            (Self::On, Some(false)) if provider.tool_calling == Some(false) => {
                Err(CoreError::Config(format!(
                    "--generator-tools on needs a model that can call tools, and the {} provider \
                 config says it cannot; if the server does support tool calls, set \
                 \"tool_calling\": true in a --provider-config file, else use \
                 --generator-tools auto or off (the generator then answers with a fenced program)",
                    provider.kind.name()
                )))
            }
            (Self::On, _) => Ok(true),
            (Self::Auto, Some(known)) => Ok(known),
            (Self::Auto, None) => script_calls_generator_tools(provider),
        }
    }
}

/// Whether a scripted provider's script has a turn that calls one of the generator's own
/// tools.
fn script_calls_generator_tools(provider: &ProviderConfig) -> Result<bool, CoreError> {
    let Some(path) = provider
        .script
        .as_deref()
        .filter(|_| provider.kind == ProviderKind::Scripted)
    else {
        return Ok(false);
    };
    // A script that cannot be read is a setting to fix, as the scripted provider has it.
    let text = std::fs::read_to_string(path).map_err(|err| {
        CoreError::Config(format!("cannot read the script {}: {err}", path.display()))
    })?;
    let script: viga_provider::scripted::Script = serde_json::from_str(&text).map_err(|err| {
        CoreError::Config(format!("{} is not a valid script: {err}", path.display()))
    })?;
    Ok(script.turns.iter().any(|turn| {
        turn.response
            .tool_calls
            .iter()
            .any(|call| GENERATOR_ONLY_TOOLS.contains(&call.name.as_str()))
    }))
}

/// A duration as (possibly fractional) seconds.
mod seconds {
    use std::time::Duration;

    use serde::{Deserialize as _, Deserializer, Serializer, de::Error as _};

    pub fn serialize<S: Serializer>(duration: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_f64(duration.as_secs_f64())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
        let seconds = f64::deserialize(deserializer)?;
        Duration::try_from_secs_f64(seconds).map_err(D::Error::custom)
    }
}

impl RunConfig {
    /// Settings for `task` with the defaults of `viga run`.
    pub fn new(task: impl Into<String>) -> Self {
        let task = task.into();
        Self {
            task_name: slug(&task),
            task,
            mode: "scene".to_owned(),
            targets: Vec::new(),
            conversation: Vec::new(),
            starts_from: crate::conversation::StartFrom::Result,
            max_iterations: 10,
            memory_window: 3,
            memory_budget_bytes: 12_000,
            max_fast_retries: 3,
            verifier_max_turns: 6,
            plan_each_iteration: true,
            generator_tools: false,
            generator_ends_run: true,
            generator_max_turns: DEFAULT_GENERATOR_MAX_TURNS,
            tool_calling_found: None,
            provider: String::new(),
            model: String::new(),
            prompts_dir: None,
            generator_max_tokens: 4096,
            planner_max_tokens: default_planner_max_tokens(),
            verifier_max_tokens: default_verifier_max_tokens(),
            program_timeout: DEFAULT_PROGRAM_TIMEOUT,
            time_limit: Some(crate::time_limit::DEFAULT_RUN_TIME_LIMIT),
        }
    }

    /// The output-token cap of a reply in `role`.
    pub fn max_output_tokens(&self, role: ModelRole) -> u32 {
        match role {
            ModelRole::Planner => self.planner_max_tokens,
            ModelRole::Verifier => self.verifier_max_tokens,
            _ => self.generator_max_tokens,
        }
    }

    /// What is wrong with the settings, in words a user can act on.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.task.trim().is_empty() {
            problems.push("the task is empty: describe the scene to build (--task)".to_owned());
        }
        if self.max_iterations == 0 {
            problems.push("max_iterations must be at least 1".to_owned());
        }
        if self.memory_window == 0 {
            problems.push("the memory window (--memory) must be at least 1 iteration".to_owned());
        }
        let (shortest, longest) = PROGRAM_TIMEOUT_RANGE;
        if !(shortest..=longest).contains(&self.program_timeout) {
            problems.push(format!(
                "the program timeout (--program-timeout) must be between {} s and {} s",
                shortest.as_secs(),
                longest.as_secs()
            ));
        }
        if [
            self.generator_max_tokens,
            self.planner_max_tokens,
            self.verifier_max_tokens,
        ]
        .contains(&0)
        {
            problems.push("every output-token cap must be at least 1".to_owned());
        }
        if self.verifier_max_turns == 0 {
            problems.push("verifier_max_turns must be at least 1".to_owned());
        }
        if self.generator_max_turns == 0 {
            problems.push(
                "the generator's turns per iteration (--generator-max-turns) must be at least 1"
                    .to_owned(),
            );
        }
        problems.extend(crate::targets::target_problems(&self.targets));
        for target in &self.targets {
            if !target.path.is_file() {
                problems.push(format!(
                    "target image {} does not exist",
                    target.path.display()
                ));
            } else if let Some(problem) = unreadable_picture(&target.path) {
                problems.push(problem);
            }
        }
        problems
    }
}

/// Why the picture at `path` cannot be a target (it cannot be read, or is not a whole PNG
/// or JPEG), in words; `None` when it can.
fn unreadable_picture(path: &std::path::Path) -> Option<String> {
    let checked = std::fs::read(path)
        .map_err(|err| err.to_string())
        .and_then(|bytes| {
            viga_skills::metrics::decoded_size(&bytes).map_err(|err| err.to_string())
        });
    checked.err().map(|why| {
        format!(
            "target image {} cannot be read as a picture ({why}); give a whole PNG or JPEG file",
            path.display()
        )
    })
}

/// A file-name-safe short form of a task: lowercase words joined by `-`, at most 40 bytes.
pub fn slug(text: &str) -> String {
    let mut slug = String::new();
    for word in text
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        if slug.len() + word.len() + 1 > 40 {
            break;
        }
        if !slug.is_empty() {
            slug.push('-');
        }
        slug.push_str(&word.to_ascii_lowercase());
    }
    if slug.is_empty() {
        "task".to_owned()
    } else {
        slug
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_folders_written_before_per_role_caps_still_resume() {
        let mut old = serde_json::to_value(RunConfig::new("a crate")).unwrap();
        let settings = old.as_object_mut().unwrap();
        for newer in [
            "generator_max_tokens",
            "planner_max_tokens",
            "verifier_max_tokens",
            "program_timeout",
            "generator_tools",
            "generator_max_turns",
        ] {
            settings.remove(newer);
        }
        settings.insert("max_tokens".into(), 2048.into());
        let read: RunConfig = serde_json::from_value(old).unwrap();
        assert_eq!(
            (
                read.max_output_tokens(ModelRole::Generator),
                read.max_output_tokens(ModelRole::FastFix),
                read.max_output_tokens(ModelRole::Planner),
                read.max_output_tokens(ModelRole::Verifier),
                read.program_timeout,
            ),
            (2048, 2048, 1024, 1024, DEFAULT_PROGRAM_TIMEOUT)
        );
        assert_eq!(
            (read.generator_tools, read.generator_max_turns),
            (false, DEFAULT_GENERATOR_MAX_TURNS),
            "older runs keep the fenced program"
        );
    }

    fn provider(json: serde_json::Value) -> ProviderConfig {
        serde_json::from_value(json).unwrap()
    }

    #[test]
    fn auto_gives_the_generator_tools_only_when_the_provider_can_call_them() {
        let openai = provider(serde_json::json!({"kind": "openai", "model": "m"}));
        let local = provider(serde_json::json!({
            "kind": "openai_compatible", "model": "m", "base_url": "http://localhost:11434/v1"
        }));
        assert!(GeneratorTools::Auto.resolve(&openai).unwrap());
        assert!(
            !GeneratorTools::Auto.resolve(&local).unwrap(),
            "a local server without tool_calling keeps the fenced program"
        );
        assert!(!GeneratorTools::Off.resolve(&openai).unwrap());
        assert!(
            GeneratorTools::On.resolve(&local).unwrap(),
            "asked for, a local server's default does not overrule it"
        );
        let incapable = ProviderConfig {
            tool_calling: Some(false),
            ..local.clone()
        };
        let refused = GeneratorTools::On.resolve(&incapable).unwrap_err();
        assert_eq!(refused.kind(), viga_protocol::event::FailureKind::Config);
        let message = refused.to_string();
        assert!(
            message.contains("openai_compatible") && message.contains("\"tool_calling\": true"),
            "{message}"
        );
        let capable = ProviderConfig {
            tool_calling: Some(true),
            ..local
        };
        assert!(GeneratorTools::On.resolve(&capable).unwrap());
        assert!(GeneratorTools::Auto.resolve(&capable).unwrap());
        assert_eq!("ON".parse::<GeneratorTools>(), Ok(GeneratorTools::On));
        assert!("sometimes".parse::<GeneratorTools>().is_err());
    }

    #[test]
    fn a_scripted_provider_follows_its_script() {
        let dir = tempfile::tempdir().unwrap();
        let script = |name: &str, tool: &str| {
            let path = dir.path().join(name);
            let turns = serde_json::json!({"turns": [
                {"response": {"text": "```python\nimport bpy\n```", "finish_reason": "stop"}},
                {"response": {"text": "", "finish_reason": "tool_calls",
                    "tool_calls": [{"id": "1", "name": tool, "arguments": {}}]}}
            ]});
            std::fs::write(&path, turns.to_string()).unwrap();
            provider(serde_json::json!({"kind": "scripted", "script": path}))
        };
        // The verifier's calls (end_process) say nothing about the generator.
        assert!(
            !GeneratorTools::Auto
                .resolve(&script("fenced.json", "end_process"))
                .unwrap()
        );
        assert!(
            GeneratorTools::Auto
                .resolve(&script("tools.json", "execute_code"))
                .unwrap()
        );
        assert!(
            GeneratorTools::On
                .resolve(&script("fenced.json", "end_process"))
                .unwrap()
        );
        let missing = provider(
            serde_json::json!({"kind": "scripted", "script": dir.path().join("none.json")}),
        );
        assert_eq!(
            GeneratorTools::Auto.resolve(&missing).unwrap_err().kind(),
            viga_protocol::event::FailureKind::Config
        );
    }

    #[test]
    fn the_program_timeout_is_seconds_in_args_json_and_checked() {
        let mut config = RunConfig::new("a crate");
        config.program_timeout = Duration::from_millis(2500);
        let json = serde_json::to_value(&config).unwrap();
        assert_eq!(json["program_timeout"], 2.5);
        assert_eq!(serde_json::from_value::<RunConfig>(json).unwrap(), config);
        config.program_timeout = Duration::from_millis(100);
        config.verifier_max_tokens = 0;
        let problems = config.problems().join("\n");
        assert!(problems.contains("--program-timeout") && problems.contains("output-token cap"));
    }
}
