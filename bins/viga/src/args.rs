use std::path::PathBuf;

use anyhow::{Context as _, Result, bail};
use clap::{Args, Parser, Subcommand};
use viga_core::RunConfig;
use viga_core::time_limit::TimeLimit;
use viga_domain_scene::{AssetGenerator, SceneSettings};
use viga_protocol::bridge::RenderEngine;
use viga_protocol::bridge::RenderSpec;
use viga_skills::reconstruct::{ReconstructionConfig, ReconstructionService};

#[derive(Debug, Parser)]
#[command(
    name = "viga",
    version,
    about = "Vision-as-inverse-graphics agent: a model writes Blender Python until the scene matches the target"
)]
pub struct Cli {
    /// Run model-written programs contained: no network, no socket of your session, reads
    /// only of Blender's install and the run's inputs, writes only in its own folders, no
    /// process outliving it (Linux: namespaces and Landlock). auto (the default) uses what
    /// the kernel offers and says what is missing; require refuses to start Blender unless
    /// all of it holds; off runs Blender uncontained. Default: $VIGA_CONTAINMENT, else auto.
    #[arg(long, global = true, value_name = "off|auto|require")]
    pub containment: Option<viga_blender::ContainmentPolicy>,
    #[command(flatten)]
    pub limits: LimitArgs,
    #[command(subcommand)]
    pub command: Command,
}

/// What each contained program may use. A size is bytes or a number with K, M, G or T
/// (binary units); `none` turns a limit off, which `--containment require` accepts (it
/// refuses a limit that is asked for and cannot hold).
#[derive(Debug, Default, Args)]
pub struct LimitArgs {
    /// Memory of a contained program (a cgroup's memory.max, else RLIMIT_DATA for each
    /// process). Default: $VIGA_MEMORY_LIMIT, else 4G.
    #[arg(long, global = true, value_name = "SIZE|none")]
    pub memory_limit: Option<String>,
    /// Processes and threads of a contained program (a cgroup's pids.max, else
    /// RLIMIT_NPROC, which the kernel does not apply to root). Default:
    /// $VIGA_PROCESS_LIMIT, else 256.
    #[arg(long, global = true, value_name = "N|none")]
    pub process_limit: Option<String>,
    /// Size of any one file a contained program writes (RLIMIT_FSIZE). Default:
    /// $VIGA_FILE_SIZE_LIMIT, else 1G.
    #[arg(long, global = true, value_name = "SIZE|none")]
    pub file_size_limit: Option<String>,
    /// How much a contained program may add to the folders it writes in (its scratch
    /// folder, a results folder), measured every 100 ms. Default: $VIGA_SCRATCH_LIMIT,
    /// else 2G.
    #[arg(long, global = true, value_name = "SIZE|none")]
    pub scratch_limit: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Start a run.
    Run(RunArgs),
    /// Continue a stopped or killed run at its next iteration.
    Resume {
        /// The run folder (output/<mode>/<timestamp>/<task>).
        run: PathBuf,
        #[command(flatten)]
        provider: ProviderArgs,
        /// Raise the iteration budget.
        #[arg(long)]
        max_iterations: Option<u32>,
        /// text for a person, jsonl for a program (the Blender add-on).
        #[arg(long, value_enum, default_value = "text")]
        events: crate::progress::EventsFormat,
    },
    /// Write the run's HTML report (report.html in the run folder unless --out is given).
    Report {
        run: PathBuf,
        #[arg(long)]
        out: Option<PathBuf>,
    },
    /// Apply a scene run's result to the scene open in Blender, as one undo step. The
    /// program runs again in viga's contained worker, on the run's copy of your scene, and
    /// what it left comes into your scene as data; no program runs in your Blender.
    Apply {
        /// The run folder.
        run: PathBuf,
        /// Apply the program of this iteration (codes/N.py) instead of the run's result
        /// (final.py).
        #[arg(long, value_name = "N")]
        iteration: Option<u32>,
        /// Run the program in your own Blender instead (trusted mode): model-written Python
        /// then runs as you, with your files, your network and the keys in Blender's
        /// environment. You are asked to confirm it for this apply.
        #[arg(long)]
        trusted: bool,
        /// With --trusted: the front end already asked the person and they agreed, for
        /// this apply.
        #[arg(long, requires = "trusted")]
        confirm_trusted: bool,
        #[command(flatten)]
        attach: crate::attach::AttachArgs,
        /// text for a person, jsonl for a program (the Blender add-on).
        #[arg(long, value_enum, default_value = "text")]
        events: crate::progress::EventsFormat,
    },
    /// Build the Blender extension, or run it in a headless Blender.
    Addon {
        #[command(subcommand)]
        command: crate::attach::AddonCommand,
    },
    /// Check that Blender and the provider keys are reachable.
    Doctor,
    /// Keep an API key once (in the keyring, or a file only you can read), for when the
    /// environment cannot hold it: `viga key set OPENAI_API_KEY`, then paste it.
    Key {
        #[command(subcommand)]
        command: crate::keys::KeyCommand,
    },
    /// BlenderGym evaluation: score a system, rewrite reports, merge shards, measure
    /// throughput (`cargo xtask eval …` forwards here).
    Eval {
        #[command(subcommand)]
        command: crate::eval::EvalCommand,
    },
    /// Ask the Geometry Nodes assistant to build or edit a node tree on an object.
    Gn(crate::gn::GnArgs),
    /// Ask the add-on agent to do something with the tools of Blender add-ons.
    Agent(crate::agent::AgentArgs),
    /// Serve add-on commands over WebSocket, one Blender per user, each user with a token of
    /// their own (--users FILE, VIGA_GATEWAY_USERS, or VIGA_GATEWAY_TOKEN for yourself).
    Gateway(GatewayArgs),
    /// Serve Blender's scene tools and add-on tools over MCP on stdin/stdout.
    Mcp {
        #[command(flatten)]
        attach: crate::attach::AttachArgs,
        /// With --attach: let the MCP client run programs and add-on commands in your own
        /// Blender (trusted mode), uncontained, as you, with your files, your network and the
        /// keys in Blender's environment. --attach needs it; without --attach they run in
        /// viga's contained Blender.
        #[arg(long)]
        trusted: bool,
        /// Programs edit the current scene further, each one undo step, instead of starting
        /// from a fresh scene each time (always so with --attach).
        #[arg(long)]
        live: bool,
        /// A folder of add-on packages with addon_ai.json manifests to load as well.
        #[arg(long)]
        addons: Option<PathBuf>,
        /// Verifier render size: N (square) or WxH.
        #[arg(long, default_value = "512")]
        resolution: String,
    },
}

/// `viga gateway`'s flags; the limits' defaults are `GatewayLimits::default()`'s.
#[derive(Debug, Args)]
pub struct GatewayArgs {
    /// Address to listen on. Anything but loopback needs --tls-cert and --tls-key (or
    /// --insecure-plain-on-public-address behind a TLS proxy).
    #[arg(long, default_value = "127.0.0.1:8765")]
    pub listen: std::net::SocketAddr,
    /// The server's certificate chain (PEM): serve wss:// and https://.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The certificate's private key (PEM), in a file only you may read (chmod 600).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Serve plain ws:// on an address other machines can reach (only behind a TLS proxy
    /// on this machine: tokens and scenes would otherwise cross the network readable).
    #[arg(long)]
    pub insecure_plain_on_public_address: bool,
    /// The model of the agent behind the chat page (`/chat`); without any of these flags
    /// the server runs no agent and the page only shows who is connected.
    #[command(flatten)]
    pub provider: ProviderArgs,
    /// Model calls one chat request may take.
    #[arg(long, default_value_t = 12)]
    pub max_steps: u32,
    /// Size of the looks at the scene (after each step, and the agent's own): N or WxH.
    /// They are rendered with Cycles at 16 samples, so materials show as they are.
    #[arg(long, default_value = "256")]
    pub resolution: String,
    /// Show the model a look at the scene after each step: yes, no, or auto (yes for
    /// OpenAI, Anthropic and Gemini, no for OpenAI-compatible servers and scripts).
    #[arg(long, value_enum, default_value = "auto")]
    pub model_sees: ModelSees,
    /// Earlier requests of a user's conversation the agent is told about.
    #[arg(long, value_name = "N", default_value_t = 6)]
    pub remembered_turns: usize,
    /// Refuse chat requests of users whose own Blender is not connected, instead of running
    /// a contained Blender of the server's for them.
    #[arg(long)]
    pub no_server_blenders: bool,
    /// Days a chat request's run folder is kept (under the files root); older ones are
    /// removed at start and every hour. 0 keeps them for ever.
    #[arg(long, value_name = "DAYS", default_value_t = 30)]
    pub keep_requests_days: u64,
    /// How long a request waits for a user's Blender that lost its connection to dial back.
    #[arg(long, value_name = "SECONDS", default_value_t = viga_serve::ws::DialLimits::default().reconnect_grace.as_secs())]
    pub reconnect_grace: u64,
    /// A folder of add-on packages with addon_ai.json manifests.
    #[arg(long)]
    pub addons: Option<PathBuf>,
    /// A Blender Python file run when each user's Blender starts.
    #[arg(long)]
    pub setup: Option<PathBuf>,
    /// The users and their tokens: `user: token` lines or a JSON object, in a file only you
    /// may read (chmod 600).
    #[arg(long, value_name = "FILE")]
    pub users: Option<PathBuf>,
    /// Users served at once, each with a Blender of their own; more are asked to try later.
    #[arg(long, value_name = "N", default_value_t = viga_serve::ws::GatewayLimits::default().max_sessions)]
    pub max_sessions: usize,
    /// A user's Blender is stopped once they have had no connection open for this long.
    #[arg(long, value_name = "SECONDS", default_value_t = viga_serve::ws::GatewayLimits::default().session_idle.as_secs())]
    pub session_idle: u64,
    /// Connections of people whose hello (with a token) was accepted, open at once; a hello
    /// beyond it is told to try again later.
    #[arg(long, value_name = "N", default_value_t = viga_serve::ws::GatewayLimits::default().max_connections)]
    pub max_connections: usize,
    /// Connections that have not said hello yet, open at once (a budget of their own, so they
    /// never take a user's place); when it is spent, the oldest of them is closed.
    #[arg(long, value_name = "N", default_value_t = viga_serve::ws::GatewayLimits::default().max_waiting)]
    pub max_waiting_connections: usize,
    /// Of the connections that have not said hello, how many one address may hold.
    #[arg(long, value_name = "N", default_value_t = viga_serve::ws::GatewayLimits::default().waiting_per_address)]
    pub waiting_per_address: usize,
    /// A connection that sends no message for this long is closed.
    #[arg(long, value_name = "SECONDS", default_value_t = viga_serve::ws::GatewayLimits::default().connection_idle.as_secs())]
    pub connection_idle: u64,
    /// Each user's files go to DIR/<user>/: file-path parameters of add-on commands are
    /// resolved there, and refused when they lead out.
    #[arg(long, value_name = "DIR", default_value = viga_serve::ws::DEFAULT_FILES_ROOT)]
    pub files_root: PathBuf,
}

impl Command {
    /// How the command reports progress (errors follow the same format).
    pub fn events(&self) -> crate::progress::EventsFormat {
        match self {
            Self::Run(args) => args.events,
            Self::Resume { events, .. } => *events,
            Self::Gn(args) => args.events,
            Self::Agent(args) => args.events,
            Self::Apply { events, .. } => *events,
            _ => crate::progress::EventsFormat::Text,
        }
    }
}

#[derive(Debug, Clone, Args)]
pub struct ProviderArgs {
    /// openai, anthropic, gemini, openai_compatible or scripted (default: openai; resume:
    /// the run's own).
    #[arg(long)]
    pub provider: Option<String>,
    #[arg(long)]
    pub model: Option<String>,
    /// API base URL, for openai_compatible (Ollama: http://localhost:11434/v1).
    #[arg(long)]
    pub base_url: Option<String>,
    /// The environment variable holding the API key (keys are never passed as flags).
    #[arg(long)]
    pub api_key_env: Option<String>,
    /// A provider config file (JSON); overrides the flags above.
    #[arg(long)]
    pub provider_config: Option<PathBuf>,
    /// The script file of the scripted provider.
    #[arg(long)]
    pub script: Option<PathBuf>,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// What the run builds: a Blender scene (Python programs in Blender), slides (python-pptx
    /// programs, slides rendered by LibreOffice) or a page (one HTML document in Chromium).
    #[arg(long, value_enum, default_value = "scene")]
    pub mode: Mode,
    /// What the scene (the deck, the page) should be.
    #[arg(long)]
    pub task: String,
    /// A picture of the wanted result (PNG or JPEG); optional, the task alone works. A scene:
    /// PICTURE (seen from --camera, else the scene's active camera), CAMERA=PICTURE, or a
    /// folder of <Camera>.png pictures. Slides: PICTURE (slide 1) or N=PICTURE (slide N).
    /// A page: PICTURE (the page in its --viewport window) or WxH=PICTURE (in a window of
    /// that size). Repeat it for several views.
    #[arg(long, value_name = "[VIEW=]PICTURE|FOLDER")]
    pub target: Vec<String>,
    /// Page mode: the browser window the page is shown in, WIDTHxHEIGHT (default: the size
    /// of the first target picture of the default view, else 1280x800).
    #[arg(long, value_name = "WxH")]
    pub viewport: Option<String>,
    /// The .blend every program starts from (default: an empty scene).
    #[arg(long = "base")]
    pub base: Option<PathBuf>,
    #[command(flatten)]
    pub provider: ProviderArgs,
    #[arg(long, default_value_t = 10)]
    pub max_iterations: u32,
    /// L: how many recent iterations the memory keeps.
    #[arg(long, default_value_t = 3)]
    pub memory: usize,
    /// The engine of the verifier's renders and the scoring render: workbench, cycles or
    /// eevee (default: cycles with --target, since workbench shows neither lights nor
    /// materials; workbench without one).
    #[arg(long, visible_alias = "engine", value_name = "ENGINE")]
    pub verifier_engine: Option<RenderEngine>,
    /// Render size: N (square) or WxH (default 512). Slides: the width of the slide
    /// pictures the verifier is shown (default 960).
    #[arg(long)]
    pub resolution: Option<String>,
    /// Size of each of the four canonical views the verifier is shown as one montage: N
    /// (square) or WxH (default: half of --resolution each side).
    #[arg(long, value_name = "N|WxH")]
    pub overview_resolution: Option<String>,
    /// Longer side of the scoring render, the scene from each target's view in the target's
    /// shape (default: the canonical views' longer side, half of --resolution).
    #[arg(long, value_name = "N")]
    pub score_resolution: Option<u32>,
    /// Samples of those renders with cycles or eevee (default: 16 for cycles, denoised).
    #[arg(long, visible_alias = "samples", value_name = "N")]
    pub verifier_samples: Option<u32>,
    /// Whether the generator calls its tools (get_scene_info, get_better_assets,
    /// execute_code, make_plan, end_process) or answers with one fenced program: auto
    /// follows the provider (its config's tool_calling, else its kind).
    #[arg(long, default_value = "auto", value_name = "auto|on|off")]
    pub generator_tools: viga_core::GeneratorTools,
    /// Model turns the generator may take per iteration when it has tools.
    #[arg(long, value_name = "N", default_value_t = viga_core::DEFAULT_GENERATOR_MAX_TURNS)]
    pub generator_max_turns: u32,
    /// With generator tools, the generator's end_process only asks to stop and the verifier
    /// decides; by default it ends the run (seed 001), after its program's views are scored.
    #[arg(long)]
    pub verifier_decides_end: bool,
    /// A folder of assets (.blend, .glb, .gltf, .fbx, .obj with .txt descriptions) the
    /// generator's get_better_assets searches. Slides: a folder of pictures the programs may
    /// put on slides (read-only).
    #[arg(long, value_name = "DIR")]
    pub assets: Option<PathBuf>,
    /// get_better_assets also searches Poly Haven's free models (downloaded on first use into
    /// a cache folder).
    #[arg(long)]
    pub polyhaven: bool,
    /// get_better_assets may also generate assets with this service (meshy: text- and
    /// image-to-3D, rigging, animation; the key from MESHY_API_KEY). Generated models are
    /// kept in the run folder's assets/ with what they cost.
    #[arg(long, value_enum, value_name = "SERVICE")]
    pub assets_generate: Option<AssetGeneratorArg>,
    /// Before round 1, send the target pictures to this reconstruction service and start
    /// from the objects it sends back (docs/init-service.md); the scene is kept as init/init.blend
    /// in the run folder.
    #[arg(long, value_name = "URL")]
    pub init: Option<String>,
    /// How long the reconstruction service may take, mesh downloads included.
    #[arg(long, value_name = "SECONDS", default_value_t = 900.0)]
    pub init_timeout: f64,
    /// Where run folders go.
    #[arg(long, default_value = "output")]
    pub output: PathBuf,
    /// A folder of prompt files replacing the defaults by name.
    #[arg(long)]
    pub prompts: Option<PathBuf>,
    /// Skip the separate plan call each iteration.
    #[arg(long)]
    pub no_plan: bool,
    /// How long one program may run in Blender before it is stopped (Blender is restarted)
    /// and the model is asked for a fix.
    #[arg(long, value_name = "SECONDS", default_value_t = viga_core::DEFAULT_PROGRAM_TIMEOUT.as_secs_f64())]
    pub program_timeout: f64,
    /// How long the whole run may take (90s, 30m, 2h; none for no limit). At the limit the
    /// run stops, keeps what it made, and its folder says it ended at its time limit.
    #[arg(long, value_name = "DURATION", default_value = "2h")]
    pub time_limit: TimeLimit,
    /// The camera whose view a target given as a bare PICTURE shows (default: the scene's
    /// active camera).
    #[arg(long)]
    pub camera: Option<String>,
    /// The animation frames to compare, as scene frames (frame 1 is a target video's first):
    /// e.g. 1,24,48. Default: a video's first, middle and last frame; every frame of a folder
    /// of frames.
    #[arg(long, value_name = "N,N,...", value_delimiter = ',')]
    pub frames: Vec<i32>,
    /// `model` (the VIGA loop) or `search` (no model: search the numeric literals of --start
    /// with renders in the loop against --target).
    #[arg(long, value_enum, default_value = "model")]
    pub generator: Generator,
    /// The program the search starts from (with --generator search).
    #[arg(long)]
    pub start: Option<PathBuf>,
    /// Programs the search may render and score (with --generator search).
    #[arg(long, default_value_t = 80)]
    pub search_budget: u32,
    /// Continue the conversation of an earlier run (a follow-up request): the model sees its
    /// requests, plans and verdicts; the scene starts from its result (see --from); its
    /// targets are used unless you give new ones.
    #[arg(long = "continue", value_name = "RUN_FOLDER")]
    pub continue_run: Option<PathBuf>,
    /// With --continue: start from the earlier run's result, or from the scene it started
    /// from (its result not applied). Attached (--attach), the scene is always yours as it is.
    #[arg(long, value_enum, default_value = "result")]
    pub from: StartFromArg,
    /// Start from the scene open in your Blender (snapshotted; your scene is untouched
    /// while the run works) and offer the result back to it as one undo step.
    #[command(flatten)]
    pub attach: crate::attach::AttachArgs,
    /// With --attach: apply the result to your scene (always), leave it (never), or ask.
    #[arg(long, value_enum, default_value = "ask")]
    pub apply: ApplyChoice,
    /// Work in your own Blender through a Blender MCP server you already run: the command
    /// your MCP client starts it with, for example "uvx mcp-for-blender". Uncontained
    /// (programs run as you), confirmed for each run; each program starts from your scene as
    /// it is now, and the result stays in it.
    #[arg(long, value_name = "COMMAND")]
    pub through_mcp: Option<String>,
    /// With --through-mcp: the server's tool that runs Python (default: mcp-for-blender's
    /// execute_blender_code).
    #[arg(long, value_name = "TOOL", requires = "through_mcp")]
    pub mcp_code_tool: Option<String>,
    /// With --through-mcp: the front end already asked the person and they agreed to trusted
    /// mode, for this run.
    #[arg(long, requires = "through_mcp")]
    pub confirm_trusted: bool,
    /// text for a person, jsonl for a program (the Blender add-on).
    #[arg(long, value_enum, default_value = "text")]
    pub events: crate::progress::EventsFormat,
}

/// What a run builds (`--mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    Scene,
    Slides,
    Page,
}

/// `viga gateway --model-sees`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ModelSees {
    Auto,
    Yes,
    No,
}

impl GatewayArgs {
    /// Whether any provider flag was given: the server then runs the agent.
    pub fn wants_agent(&self) -> bool {
        let provider = &self.provider;
        provider.provider.is_some()
            || provider.model.is_some()
            || provider.provider_config.is_some()
            || provider.script.is_some()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ApplyChoice {
    Ask,
    Always,
    Never,
}

/// `--assets-generate`'s services.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum AssetGeneratorArg {
    Meshy,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum StartFromArg {
    Result,
    Base,
}

impl From<StartFromArg> for viga_core::conversation::StartFrom {
    fn from(from: StartFromArg) -> Self {
        match from {
            StartFromArg::Result => Self::Result,
            StartFromArg::Base => Self::Base,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Generator {
    Model,
    Search,
}

/// What a run starts from, as its flags say: ready to start, or a scene run on the scene a
/// person has open (their Blender is reached once the model is known).
pub enum RunStart {
    Ready(Box<viga_app::runs::Start>),
    Attached(SceneSettings),
    /// A scene run in the person's Blender, reached through their MCP server once the
    /// model is known and they confirmed trusted mode.
    ThroughMcp(SceneSettings, viga_app::through_mcp::McpServerCommand),
}

impl ProviderArgs {
    /// The choice these flags make, for the provider factory.
    pub fn choice(&self) -> viga_app::provider::ProviderChoice {
        viga_app::provider::ProviderChoice {
            config_file: self.provider_config.clone(),
            kind: self.provider.clone(),
            model: self.model.clone(),
            base_url: self.base_url.clone(),
            api_key_env: self.api_key_env.clone(),
            script: self.script.clone(),
        }
    }
}

impl RunArgs {
    /// The loop's settings and what the run builds, for every mode; the frames of a target
    /// video are decoded into `decode_into`, which must outlive the start of the run.
    pub fn start(&self, decode_into: &std::path::Path) -> Result<(RunConfig, RunStart)> {
        use viga_app::runs::Start;
        if self.mode != Mode::Scene {
            let flags = self.scene_only_flags();
            if !flags.is_empty() {
                let mode = if self.mode == Mode::Slides {
                    "slides"
                } else {
                    "page"
                };
                bail!(
                    "{} belong(s) to Blender scene runs, not to --mode {mode}; leave them out",
                    flags.join(", ")
                );
            }
        }
        match self.mode {
            Mode::Slides => {
                let config = self.flat_run_config(viga_domain_slides::SLIDES_DOMAIN)?;
                let mut settings = viga_domain_slides::SlidesSettings {
                    assets: self.assets.as_deref().map(whole),
                    ..viga_domain_slides::SlidesSettings::default()
                };
                if let Some(resolution) = &self.resolution {
                    settings.view_width = parse_resolution(resolution)?.0;
                }
                Ok((config, RunStart::Ready(Box::new(Start::Slides(settings)))))
            }
            Mode::Page => {
                let config = self.flat_run_config(viga_domain_page::PAGE_DOMAIN)?;
                let settings = viga_domain_page::PageSettings::for_targets(
                    self.viewport.as_deref(),
                    &config.targets,
                )
                .context("--viewport")?;
                Ok((config, RunStart::Ready(Box::new(Start::Page(settings)))))
            }
            Mode::Scene => self.scene_start(decode_into),
        }
    }

    /// A scene run's start: on the person's open scene (`--attach`), or in a Blender of
    /// viga's own, reconstructed first with `--init`.
    fn scene_start(&self, decode_into: &std::path::Path) -> Result<(RunConfig, RunStart)> {
        let (config, scene) = self.run_config(decode_into)?;
        let init = self.init_service()?;
        if let Some(line) = &self.through_mcp {
            let refused = [
                ("--attach", self.attach.wanted()),
                ("--init", init.is_some()),
                ("--base", self.base.is_some()),
            ];
            if let Some((flag, _)) = refused.iter().find(|(_, given)| *given) {
                bail!(
                    "{flag} does not go with --through-mcp, which works on the scene open in your Blender as it is (open the scene you want there first)"
                );
            }
            let command = viga_app::through_mcp::McpServerCommand::parse(
                line,
                self.mcp_code_tool.as_deref(),
            )?;
            return Ok((config, RunStart::ThroughMcp(scene, command)));
        }
        if !self.attach.wanted() {
            let start = viga_app::runs::Start::Scene { scene, init };
            return Ok((config, RunStart::Ready(Box::new(start))));
        }
        if init.is_some() {
            bail!(
                "--init starts from the objects the service reconstructs; it does not go with --attach, which starts from your open scene"
            );
        }
        Ok((config, RunStart::Attached(scene)))
    }

    /// The loop's settings and the scene's; the frames of a target video are decoded into
    /// `decode_into`, which must outlive the start of the run (it copies its targets).
    pub fn run_config(&self, decode_into: &std::path::Path) -> Result<(RunConfig, SceneSettings)> {
        let choice = viga_core::targets::FrameChoice {
            frames: self.frames.clone(),
            decode_into: Some(decode_into.to_path_buf()),
        };
        let mut config = self.loop_config(&choice)?;
        for target in config.targets.iter_mut().filter(|t| t.view.is_none()) {
            target.view.clone_from(&self.camera);
        }
        let (width, height) = parse_resolution(self.resolution.as_deref().unwrap_or("512"))?;
        let defaults = SceneSettings::default();
        let scene = SceneSettings {
            base_blend: self.base.as_deref().map(whole),
            render: RenderSpec {
                width,
                height,
                ..defaults.render
            },
            verifier_engine: self.verifier_engine,
            verifier_samples: self.verifier_samples,
            overview_size: self
                .overview_resolution
                .as_deref()
                .map(|text| {
                    parse_resolution(text)
                        .map_err(|err| anyhow::anyhow!("--overview-resolution: {err}"))
                })
                .transpose()?,
            score_size: self.score_resolution,
            assets: self.assets.as_deref().map(whole),
            polyhaven: self.polyhaven,
            assets_generate: self.assets_generate.map(|service| match service {
                AssetGeneratorArg::Meshy => AssetGenerator::Meshy,
            }),
            initialised: Vec::new(),
        };
        let mut scene = scene;
        if let Some(previous) = &self.continue_run {
            scene_run_to_continue(previous)?;
            // Attached, the person's scene as it is now is the start (their choice to apply
            // the earlier result or not); a base given here wins over the earlier run's.
            let from = if self.attach.wanted() || scene.base_blend.is_some() {
                viga_core::conversation::StartFrom::Current
            } else {
                self.from.into()
            };
            let start = viga_core::conversation::follow_up(&whole(previous), &mut config, from)?;
            if scene.base_blend.is_none() {
                scene.base_blend = start;
            }
        }
        Ok((config, scene))
    }

    /// The flags given that only a Blender scene run takes, by name (for a slides or page
    /// run, which refuses them).
    pub fn scene_only_flags(&self) -> Vec<&'static str> {
        let given = [
            ("--base", self.base.is_some()),
            ("--verifier-engine", self.verifier_engine.is_some()),
            ("--verifier-samples", self.verifier_samples.is_some()),
            ("--polyhaven", self.polyhaven),
            ("--assets-generate", self.assets_generate.is_some()),
            ("--init", self.init.is_some()),
            ("--camera", self.camera.is_some()),
            ("--overview-resolution", self.overview_resolution.is_some()),
            ("--score-resolution", self.score_resolution.is_some()),
            ("--frames", !self.frames.is_empty()),
            ("--generator search", self.generator == Generator::Search),
            ("--start", self.start.is_some()),
            ("--continue", self.continue_run.is_some()),
            ("--attach", self.attach.wanted()),
            ("--through-mcp", self.through_mcp.is_some()),
            (
                "--assets",
                self.assets.is_some() && self.mode != Mode::Slides,
            ),
            (
                "--resolution",
                self.resolution.is_some() && self.mode == Mode::Page,
            ),
        ];
        given
            .into_iter()
            .filter_map(|(flag, set)| set.then_some(flag))
            .collect()
    }

    /// `--viewport` is a page's window: refused, by name, for a scene or a deck.
    pub fn check_viewport_flag(&self) -> Result<()> {
        if self.viewport.is_some() && self.mode != Mode::Page {
            bail!("--viewport is the window of --mode page; leave it out here");
        }
        Ok(())
    }

    /// The loop's settings of a slides or page run: the task, its targets (`VIEW=PICTURE`
    /// names a slide or a window; no video), the budgets.
    pub fn flat_run_config(&self, mode: &str) -> Result<RunConfig> {
        let mut config = self.loop_config(&viga_core::targets::FrameChoice::default())?;
        config.mode = mode.to_owned();
        Ok(config)
    }

    /// The loop's settings every mode takes: the task, the targets read as `choice` says,
    /// the budgets and the prompts.
    fn loop_config(&self, choice: &viga_core::targets::FrameChoice) -> Result<RunConfig> {
        let mut config = RunConfig::new(self.task.clone());
        for argument in &self.target {
            config.targets.extend(
                viga_core::targets::parse_target_argument(argument, choice)?
                    .into_iter()
                    .map(|target| viga_core::TargetSpec {
                        path: whole(&target.path),
                        ..target
                    }),
            );
        }
        config.max_iterations = self.max_iterations;
        config.memory_window = self.memory;
        config.prompts_dir = self.prompts.as_deref().map(whole);
        config.plan_each_iteration = !self.no_plan;
        config.program_timeout = std::time::Duration::try_from_secs_f64(self.program_timeout)
            .map_err(|_| {
                anyhow::anyhow!(
                    "--program-timeout {} is not a number of seconds",
                    self.program_timeout
                )
            })?;
        config.generator_max_turns = self.generator_max_turns;
        config.generator_ends_run = !self.verifier_decides_end;
        config.time_limit = self.time_limit.0;
        Ok(config)
    }

    /// The reconstruction service `--init` names, with `--init-timeout`.
    pub fn init_service(&self) -> Result<Option<ReconstructionService>> {
        let Some(url) = &self.init else {
            return Ok(None);
        };
        let deadline = std::time::Duration::try_from_secs_f64(self.init_timeout)
            .ok()
            .filter(|deadline| !deadline.is_zero())
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "--init-timeout {} is not a number of seconds above 0",
                    self.init_timeout
                )
            })?;
        let service = ReconstructionService::new(ReconstructionConfig {
            deadline,
            ..ReconstructionConfig::new(url.clone())
        })
        .map_err(|why| anyhow::anyhow!("--init: {why}"))?;
        Ok(Some(service))
    }
}

pub fn parse_resolution(text: &str) -> Result<(u32, u32)> {
    let parse = |part: &str| {
        part.trim()
            .parse::<u32>()
            .ok()
            .filter(|v| (1..=8192).contains(v))
    };
    let parsed = match text.split_once(['x', 'X']) {
        Some((w, h)) => parse(w).zip(parse(h)),
        None => parse(text).map(|side| (side, side)),
    };
    match parsed {
        Some(size) => Ok(size),
        None => bail!("resolution {text:?} is not N or WxH with sides from 1 to 8192"),
    }
}

/// `path` made whole (absolute, as it is, `..` and links kept): a run folder records the
/// paths it was given, and a follow-up or `viga resume` from another folder must find them.
pub fn whole(path: &std::path::Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

/// Refuses a follow-up of a run that is not a Blender scene run, saying what to do instead:
/// slides and pages start anew from their task.
fn scene_run_to_continue(previous: &std::path::Path) -> Result<()> {
    let (_, recorded) = viga_core::resumable_config(previous)?;
    if recorded.name == viga_domain_scene::SCENE_DOMAIN {
        return Ok(());
    }
    bail!(
        "{} is a {} run, and follow-ups (--continue) are for Blender scene runs only; start a new run with --mode {} and say in --task what to keep (its final program is {})",
        previous.display(),
        recorded.name,
        recorded.name,
        previous
            .join(match recorded.name.as_str() {
                "page" => "final.html",
                _ => "final.py",
            })
            .display()
    )
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::{Cli, Command, parse_resolution};

    fn scene_of(arguments: &[&str]) -> anyhow::Result<viga_domain_scene::SceneSettings> {
        let cli = Cli::try_parse_from(["viga", "run", "--task", "a cube"].iter().chain(arguments))?;
        let Command::Run(run) = cli.command else {
            panic!("parsed as another command");
        };
        let frames = tempfile::tempdir()?;
        Ok(run.run_config(frames.path())?.1)
    }

    #[test]
    fn the_canonical_views_take_their_own_resolution() {
        assert_eq!(scene_of(&[]).unwrap().overview_size(), (256, 256));
        assert_eq!(
            scene_of(&["--resolution", "300"]).unwrap().overview_size(),
            (150, 150)
        );
        let set = scene_of(&["--overview-resolution", "320x200"]).unwrap();
        assert_eq!(
            (set.overview_size, set.render.width),
            (Some((320, 200)), 512)
        );
        let err = scene_of(&["--overview-resolution", "0"]).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("--overview-resolution: resolution \"0\""),
            "{err}"
        );
    }

    #[test]
    fn resolutions() {
        assert_eq!(parse_resolution("256").unwrap(), (256, 256));
        assert_eq!(parse_resolution("320x240").unwrap(), (320, 240));
        for bad in ["0", "abc", "10x", "9000", "-5"] {
            assert!(parse_resolution(bad).is_err(), "{bad}");
        }
    }
}
