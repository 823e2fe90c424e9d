//! `viga`: the command line. Thin: it parses arguments, builds the configuration, and hands
//! everything else to the library crates.

/// Prints a line that holds outside text (names from a scene, a model's words, a program's
/// output) with its control characters shown as codes, so none of it steers the terminal.
macro_rules! say {
    ($($arg:tt)*) => {
        println!("{}", viga_io::terminal::terminal_safe(&format!($($arg)*)))
    };
}

mod agent;
mod args;
mod attach;
mod contain;
mod ending;
mod eval;
mod flat;
mod gn;
mod keys;
mod mcp;
mod progress;
mod search;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context as _, Result, bail};
use clap::Parser as _;
use std::io::IsTerminal as _;
use viga_blender::{
    Access, BlenderCommands as _, BlenderTransport, ContainedWorkers, Worker, WorkerConfig,
    WorkerRequest, locate,
};
use viga_core::RunHandle;
use viga_core::folder::SavedProvider;
use viga_core::scene::SceneDomain;
use viga_protocol::event::StopReason;
use viga_provider::{ProviderConfig, ProviderKind};

use crate::keys::build_provider;

use crate::args::{ApplyChoice, Cli, Command, ProviderArgs, RunArgs};
use crate::progress::Output;

/// The first argument that makes this process the launcher of a contained Blender (see
/// `contain`); not a subcommand of the CLI, whose parser would take its `--` apart.
pub(crate) const CONTAIN_LAUNCHER: &str = "contain";

fn main() -> std::process::ExitCode {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args.get(1).is_some_and(|arg| arg == CONTAIN_LAUNCHER) {
        // Before any runtime starts: a process with threads cannot enter a namespace.
        return contain::run_launcher(&args[2..]);
    }
    let cli = Cli::parse_from(args);
    let contained = match contain::limits(&cli.limits)
        .and_then(|limits| contain::chosen(cli.containment, limits))
    {
        Ok(contained) => contained,
        Err(err) => {
            eprintln!("error: {}", describe(&err));
            return std::process::ExitCode::from(2);
        }
    };
    match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime.block_on(run_cli(cli, contained)),
        Err(err) => {
            eprintln!("error: cannot start the async runtime: {err}");
            std::process::ExitCode::from(8)
        }
    }
}

async fn run_cli(cli: Cli, contained: ContainedWorkers) -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("VIGA_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let jsonl = cli.command.events() == progress::EventsFormat::Jsonl;
    match dispatch(cli.command, &contained).await {
        Ok(code) => code,
        Err(err) => {
            let kind = ending::failure_kind_of(&err);
            let mut message = describe(&err);
            if let Some(advice) = kind.and_then(|kind| ending::advice(kind, None)) {
                message.push_str(&format!("\nwhat to do: {advice}"));
            }
            if jsonl {
                progress::error_line(&message);
            }
            eprintln!("error: {message}");
            // An error nothing typed is a usage error: arguments or files that cannot work.
            std::process::ExitCode::from(
                kind.map_or(2, viga_protocol::event::FailureKind::exit_code),
            )
        }
    }
}

/// The error and its causes on one line, each said once: typed errors carry their source's
/// message in their own, and repeating it would double every line.
fn describe(err: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in err.chain() {
        let said = cause.to_string();
        if text.contains(&said) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&said);
    }
    text
}

async fn dispatch(
    command: Command,
    contained: &ContainedWorkers,
) -> Result<std::process::ExitCode> {
    match command {
        Command::Run(args) if args.mode != args::Mode::Scene => flat::run(args, contained).await,
        Command::Run(args) if args.generator == args::Generator::Search => {
            if args.attach.wanted() {
                bail!(
                    "--attach works with the model generator; the search runs on --base or an empty scene"
                );
            }
            if args.init.is_some() {
                bail!(
                    "--init works with the model generator; the search runs on --base or an empty scene"
                );
            }
            search::run(args, contained).await
        }
        Command::Run(args) => run(args, contained).await,
        Command::Eval { command } => eval::run(command, contained).await,
        Command::Resume {
            run,
            provider,
            max_iterations,
            events,
        } => resume(&run, provider, max_iterations, events, contained).await,
        Command::Apply {
            run,
            iteration,
            trusted,
            confirm_trusted,
            attach,
            events,
        } => {
            let choice = viga_core::attached::ResultChoice::from_iteration(iteration);
            let trust = ApplyTrust {
                trusted,
                confirmed: confirm_trusted,
            };
            apply(&run, choice, trust, &attach, events, contained).await
        }
        Command::Addon { command } => attach::addon(command).await,
        Command::Report { run, out } => {
            let path = viga_core::report::write_html(&run, out.as_deref())?;
            println!("report: {}", path.display());
            Ok(std::process::ExitCode::SUCCESS)
        }
        Command::Doctor => doctor(contained).await,
        Command::Gn(args) => gn::run(args, contained).await,
        Command::Agent(args) => agent::run(args, contained).await,
        Command::Mcp {
            attach,
            trusted,
            live,
            addons,
            resolution,
        } => {
            mcp::serve(
                &attach,
                trusted,
                live,
                addons.as_deref(),
                &resolution,
                contained,
            )
            .await
        }
        Command::Gateway(args) => mcp::gateway(args, contained).await,
        Command::Key { command } => keys::run(&command),
    }
}

fn provider_config(args: &ProviderArgs, saved: Option<ProviderConfig>) -> Result<ProviderConfig> {
    if let Some(path) = &args.provider_config {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        return serde_json::from_str(&text)
            .with_context(|| format!("{} is not a valid provider config", path.display()));
    }
    let mut config = match (&args.provider, saved) {
        (None, Some(saved)) => saved,
        (kind, _) => {
            let kind = kind.as_deref().unwrap_or("openai");
            let kind = ProviderKind::ALL
                .into_iter()
                .find(|known| known.name() == kind)
                .ok_or_else(|| {
                    let known: Vec<&str> = ProviderKind::ALL.iter().map(|k| k.name()).collect();
                    anyhow::anyhow!("unknown provider {kind:?}; use one of {}", known.join(", "))
                })?;
            ProviderConfig::new(kind, args.model.clone().unwrap_or_default())
        }
    };
    if let Some(model) = &args.model {
        config.model.clone_from(model);
    }
    if let Some(url) = &args.base_url {
        config.base_url = Some(url.clone());
    }
    if let Some(var) = &args.api_key_env {
        config.api_key_env = Some(var.clone());
    }
    if let Some(script) = &args.script {
        config.script = Some(script.clone());
    }
    Ok(config)
}

/// A Blender of viga's own for model-written programs, contained under `--containment`:
/// besides its own scratch folder and install it may read and write only what `access`
/// names (viga itself writes the run folders, so the loop, the GN assistant and eval let it
/// write nothing else; it reads their inputs: base scenes, asset folders), and its programs
/// find the run's `assets` in `VIGA_ASSETS_DIR`. It is the Blender set up for viga, or else
/// the binary of the `attached` Blender.
async fn start_blender(
    contained: &ContainedWorkers,
    attached: Option<&viga_blender::attach::Connection>,
    access: Access,
    assets: Option<&Path>,
) -> Result<Arc<Worker>> {
    let request = WorkerRequest::new(attach::blender_for(attached)?, access).with_assets(assets);
    let worker = contained.start(&request).await?;
    say_containment(&worker.containment());
    Ok(Arc::new(worker))
}

/// Warns on stderr when model-written programs will run with less containment than asked
/// for; the run folder records the full status either way.
fn say_containment(status: &viga_blender::ContainmentStatus) {
    if status.policy != viga_blender::ContainmentPolicy::Off && !status.is_complete() {
        eprintln!(
            "warning: model-written programs run with {}",
            status.summary()
        );
    }
}

async fn run(args: RunArgs, contained: &ContainedWorkers) -> Result<std::process::ExitCode> {
    args.check_viewport_flag()?;
    let mut out = Output::new(args.events, args.max_iterations);
    // Decoded video frames live here until the run has copied its targets in.
    let frames = tempfile::tempdir().context("no temporary folder for the target's frames")?;
    let (mut config, scene) = args.run_config(frames.path())?;
    let provider = run_model(&args, &mut config, &out)?;
    let init_service = args.init_service()?;
    if init_service.is_some() && args.attach.wanted() {
        bail!(
            "--init starts from the objects the service reconstructs; it does not go with --attach, which starts from your open scene"
        );
    }
    let handle = if args.attach.wanted() {
        // The person's Blender is asked for a copy of the open scene and let go: it is not
        // held (nor touched) while the run works in a Blender of viga's own, which reads
        // the copy.
        let user = attach::attach(&args.attach).await?;
        let snapshot = viga_core::attached::snapshot_user_scene(
            config,
            scene,
            user.transport.as_ref(),
            &args.output,
        )
        .await?;
        let root = snapshot.folder().to_path_buf();
        unless_started(
            &root,
            start_on_snapshot(snapshot, &user, provider, contained).await,
        )?
    } else {
        // The run folder first: its Blender may read the folder's inputs (generated assets,
        // a reconstruction) and nothing else of it.
        let folder = viga_core::RunFolder::create(&args.output, &config)?;
        let root = folder.root().to_path_buf();
        let own = OwnRun {
            config,
            scene,
            init: init_service,
            provider,
        };
        unless_started(&root, start_own(folder, own, contained, &out).await)?
    };
    progress::stream_model_text(&handle, &out);
    let followed = follow(handle, &mut out).await?;
    if args.attach.wanted() {
        offer_result(&followed, &args, &out, contained).await?;
    }
    Ok(finish(&followed, &out))
}

/// The model a run asks, from its flags, recorded in `config` (its kind, the model's own
/// name, whether the generator gets its tools); a scripted one is said so.
fn run_model(
    args: &RunArgs,
    config: &mut viga_core::RunConfig,
    out: &Output,
) -> Result<Arc<dyn viga_provider::Provider>> {
    let provider_settings = provider_config(&args.provider, None)?;
    config.provider = provider_settings.kind.name().to_owned();
    let provider = build_provider(&provider_settings)?;
    config.generator_tools = args.generator_tools.resolve(&provider_settings)?;
    // The provider's own name for its model: for a scripted run, the script's label.
    config.model = provider.model().to_owned();
    if provider_settings.kind == ProviderKind::Scripted {
        out.say(&format!(
            "[scripted provider] every model answer is replayed from {}",
            display_opt(&provider_settings.script)
        ));
    }
    Ok(provider)
}

/// `started`, or else the run folder at `root` made for it removed again: a start that fails
/// leaves no folder behind.
fn unless_started<T>(root: &Path, started: Result<T>) -> Result<T> {
    if started.is_err() {
        viga_core::folder::discard_unstarted(root);
    }
    started
}

/// A run in a Blender of viga's own, and what it starts from.
struct OwnRun {
    config: viga_core::RunConfig,
    scene: viga_core::scene::SceneSettings,
    init: Option<viga_skills::reconstruct::ReconstructionService>,
    provider: Arc<dyn viga_provider::Provider>,
}

/// Starts `run` in `folder` on a contained Blender that may read the scene's inputs and the
/// folder's (generated assets, a reconstruction) and nothing else of it.
async fn start_own(
    folder: viga_core::RunFolder,
    run: OwnRun,
    contained: &ContainedWorkers,
    out: &Output,
) -> Result<RunHandle> {
    let OwnRun {
        config,
        scene,
        init,
        provider,
    } = run;
    let mut reads = scene.prepare_blender_reads()?;
    let inputs = folder.worker_inputs()?;
    reads.extend(inputs.paths());
    let worker = start_blender(
        contained,
        None,
        Access::reading(reads),
        Some(&inputs.assets),
    )
    .await?;
    let handle = match init {
        Some(service) => {
            out.say(&format!(
                "initialising the scene from the target pictures with the reconstruction service at {}...",
                service.url()
            ));
            viga_core::scene::init::start_initialised(
                folder, config, scene, &service, provider, worker,
            )
            .await?
        }
        None => {
            let has_target = !config.targets.is_empty();
            let domain = SceneDomain::new(scene, worker, has_target)?
                .with_model(Arc::clone(&provider), config.prompts_dir.as_deref())?;
            viga_core::start_in_folder(folder, config, provider, Arc::new(domain))?
        }
    };
    Ok(handle)
}

/// Starts the attached run of `snapshot` on a contained Blender that may read the copy of
/// the person's scene and the run folder's inputs.
async fn start_on_snapshot(
    snapshot: viga_core::attached::UserSceneSnapshot,
    user: &attach::UserBlender,
    provider: Arc<dyn viga_provider::Provider>,
    contained: &ContainedWorkers,
) -> Result<RunHandle> {
    let worker = start_attached_worker(
        user,
        contained,
        snapshot.scene(),
        &snapshot.worker_inputs()?,
    )
    .await?;
    Ok(viga_core::attached::start_on_snapshot(
        snapshot, provider, worker,
    )?)
}

/// A contained Blender of viga's own for work on the scene of `user` (a person's Blender)
/// that may read `scene`'s inputs and the run folder's `inputs`.
async fn start_attached_worker(
    user: &attach::UserBlender,
    contained: &ContainedWorkers,
    scene: &viga_core::scene::SceneSettings,
    inputs: &viga_core::folder::WorkerInputs,
) -> Result<Arc<Worker>> {
    let mut reads = scene.prepare_blender_reads()?;
    reads.extend(inputs.paths());
    start_blender(
        contained,
        Some(&user.connection),
        Access::reading(reads),
        Some(&inputs.assets),
    )
    .await
}

async fn resume(
    folder: &Path,
    args: ProviderArgs,
    max_iterations: Option<u32>,
    events: progress::EventsFormat,
    contained: &ContainedWorkers,
) -> Result<std::process::ExitCode> {
    // Checked first, so a wrong path is reported as such, not as a provider problem.
    let run_folder = viga_core::RunFolder::open(folder)?;
    let mut out = Output::new(events, max_iterations.unwrap_or(0));
    // With --provider or --provider-config the saved settings are not used at all.
    let saved = run_folder
        .read_provider()
        .filter(|_| args.provider.is_none() && args.provider_config.is_none());
    if let Some(saved) = &saved {
        say_untrusted(saved, &args, &out);
    }
    let provider_settings = provider_config(&args, saved.map(|saved| saved.settings))?;
    let provider = build_provider(&provider_settings)?;
    if let Some(settings) = flat::FlatSettings::recorded(folder)? {
        let (config, _) = run_folder.read_args()?;
        let domain = flat::start_domain(settings, contained, config.program_timeout).await?;
        let handle = viga_core::resume(folder, provider, domain, max_iterations)?;
        let followed = follow(handle, &mut out).await?;
        return Ok(finish(&followed, &out));
    }
    let (_, scene) = viga_core::scene::resumable_scene(folder)?;
    let mut reads = scene.prepare_blender_reads()?;
    let inputs = viga_core::RunFolder::open(folder)?.worker_inputs()?;
    reads.extend(inputs.paths());
    let access = Access::reading(reads);
    let blender = start_blender(contained, None, access, Some(&inputs.assets)).await?;
    let domain = SceneDomain::for_resume(folder, blender, Arc::clone(&provider))?;
    let handle = viga_core::resume(folder, provider, Arc::new(domain), max_iterations)?;
    progress::stream_model_text(&handle, &out);
    let followed = follow(handle, &mut out).await?;
    Ok(finish(&followed, &out))
}

/// Says which provider settings the run folder names that resume does not use (only the
/// provider's own are trusted: `SavedProvider`), unless a flag gives them anew.
fn say_untrusted(saved: &SavedProvider, args: &ProviderArgs, out: &Output) {
    // Debug-quoted: the text is the folder's, and may hold terminal escapes.
    if let (Some(url), None) = (&saved.untrusted_base_url, &args.base_url) {
        out.say(&format!(
            "not using the base URL {url:?} saved in the run folder; give it with --base-url to use it"
        ));
    }
    if let (Some(variable), None) = (&saved.untrusted_key_env, &args.api_key_env) {
        out.say(&format!(
            "not reading the key variable {variable:?} the run folder names; give it with --api-key-env to use it"
        ));
    }
}

/// How long a cancelled run may take to wind down before viga leaves it: its folder is
/// consistent at every moment, and `viga resume` continues it.
const CANCEL_GRACE: std::time::Duration = std::time::Duration::from_millis(800);

/// How a followed run ended.
struct Followed {
    folder: PathBuf,
    /// None when the run was left to wind down after a cancel.
    outcome: Option<viga_core::RunOutcome>,
}

/// Shows the run's progress until it ends. Ctrl-C (or SIGINT from the Blender panel)
/// cancels it; a run still busy (a model call) after [`CANCEL_GRACE`] is left as it is.
async fn follow(mut handle: RunHandle, out: &mut Output) -> Result<Followed> {
    let folder = handle.folder().to_path_buf();
    out.run_folder(&folder);
    let show = |event: &viga_protocol::event::TimedEvent, _jsonl: bool| out.event(event);
    let ended =
        progress::follow_events(&mut handle, out, "the run", show, Some(CANCEL_GRACE)).await;
    if !ended {
        return Ok(Followed {
            folder,
            outcome: None,
        });
    }
    let outcome = handle.wait().await?;
    let report = viga_core::report::write_html(&outcome.folder, None)?;
    out.report(&report);
    Ok(Followed {
        folder,
        outcome: Some(outcome),
    })
}

/// The exit code for a run (and the JSON-lines `finished` line); a failed run says what to
/// do about it.
fn finish(followed: &Followed, out: &Output) -> std::process::ExitCode {
    let final_program = followed
        .outcome
        .as_ref()
        .and_then(|outcome| outcome.final_program.as_deref());
    ending::finish(
        out,
        ending::RunEnd {
            stop: followed.outcome.as_ref().map(|o| &o.stop),
            message: String::new(),
            final_program,
            folder: Some(&followed.folder),
        },
    )
}

/// After an attached run: applies its result to the person's scene as one undo step, when
/// they want it.
async fn offer_result(
    followed: &Followed,
    args: &RunArgs,
    out: &Output,
    contained: &ContainedWorkers,
) -> Result<()> {
    if !followed
        .outcome
        .as_ref()
        .is_some_and(viga_core::RunOutcome::has_result)
    {
        return Ok(());
    }
    let later = format!(
        "apply it later with: viga apply {} --attach",
        followed.folder.display()
    );
    let wanted = match args.apply {
        ApplyChoice::Always => true,
        ApplyChoice::Never => false,
        ApplyChoice::Ask if out.is_jsonl() || !std::io::stdin().is_terminal() => {
            out.say(&format!(
                "the result was not applied (nobody to ask); {later}"
            ));
            false
        }
        ApplyChoice::Ask => {
            ask_yes("Apply the result to your scene in Blender (one undo step)? [y/N] ")?
        }
    };
    if !wanted {
        return Ok(());
    }
    let result = viga_core::attached::ChosenResult::open(
        &followed.folder,
        viga_core::attached::ResultChoice::Final,
    )?;
    let user = attach::attach(&args.attach).await?;
    apply_as_data(&result, &user, out, contained).await?;
    Ok(())
}

fn ask_yes(question: &str) -> Result<bool> {
    use std::io::Write as _;
    print!("{question}");
    std::io::stdout().flush()?;
    let mut answer = String::new();
    std::io::stdin().read_line(&mut answer)?;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes"))
}

/// Whether `viga apply` runs the program in the person's Blender, and whether they said so
/// for this apply.
#[derive(Debug, Clone, Copy)]
struct ApplyTrust {
    trusted: bool,
    confirmed: bool,
}

async fn apply(
    folder: &Path,
    choice: viga_core::attached::ResultChoice,
    trust: ApplyTrust,
    args: &attach::AttachArgs,
    events: progress::EventsFormat,
    contained: &ContainedWorkers,
) -> Result<std::process::ExitCode> {
    let out = Output::new(events, 0);
    // Checked first, so a wrong folder or iteration is reported as such.
    let result = viga_core::attached::ChosenResult::open(folder, choice)?;
    if trust.trusted && !trust.confirmed && !confirm_trusted_apply(&out)? {
        bail!(
            "trusted mode was not confirmed for this apply; run without --trusted to apply the result as data, with no program running in your Blender"
        );
    }
    let user = attach::attach(args).await?;
    let said = if trust.trusted {
        let applied = result.run_in(user.transport.as_ref()).await?;
        report_program_applied(&applied, &out)?;
        "applied to your scene by running its program (Ctrl-Z takes it back)".to_owned()
    } else {
        apply_as_data(&result, &user, &out, contained).await?
    };
    // The panel follows `viga apply --events jsonl` as any other command: its last line.
    out.finished(&StopReason::Accepted, &said, None, 0);
    Ok(std::process::ExitCode::SUCCESS)
}

/// Asks on the terminal whether the program may run in the person's Blender; only `yes`
/// agrees, and nobody at a terminal is a no.
fn confirm_trusted_apply(out: &Output) -> Result<bool> {
    if out.is_jsonl() || !std::io::stdin().is_terminal() {
        return Ok(false);
    }
    eprintln!(
        "--trusted runs the run's program in your own Blender: model-written Python runs as you, with your files, your network and the API keys in Blender's environment."
    );
    eprint!("Type 'yes' to allow it for this apply: ");
    let mut answer = String::new();
    std::io::stdin()
        .read_line(&mut answer)
        .context("cannot read the confirmation")?;
    Ok(answer.trim() == "yes")
}

/// Makes `result` in a contained worker of viga's own and brings what it left into the
/// person's scene as one undo step: no program runs in their Blender.
async fn apply_as_data(
    result: &viga_core::attached::ChosenResult,
    user: &attach::UserBlender,
    out: &Output,
    contained: &ContainedWorkers,
) -> Result<String> {
    let worker =
        start_attached_worker(user, contained, result.scene(), &result.worker_inputs()?).await?;
    let imported =
        viga_core::attached::apply_to_user_scene(result, worker.as_ref(), user.transport.as_ref())
            .await;
    if let Ok(worker) = Arc::try_unwrap(worker) {
        worker.shutdown().await;
    }
    let summary = imported_summary(&imported?);
    out.say(&summary);
    Ok(summary)
}

/// One line on what a result changed in the person's scene.
fn imported_summary(imported: &viga_protocol::bridge::SceneResultImported) -> String {
    let mut parts = Vec::new();
    for (what, names) in [
        ("added", &imported.added),
        ("replaced", &imported.replaced),
        ("removed", &imported.removed),
    ] {
        if !names.is_empty() {
            parts.push(format!("{what} {}", names.join(", ")));
        }
    }
    if !imported.data_replaced.is_empty() {
        parts.push(format!("changed {}", imported.data_replaced.join(", ")));
    }
    if !imported.renamed.is_empty() {
        let renamed: Vec<String> = imported
            .renamed
            .iter()
            .map(|(from, to)| format!("{from} as {to}"))
            .collect();
        parts.push(format!(
            "names you have, so numbered: {}",
            renamed.join(", ")
        ));
    }
    parts.extend(imported.notes.iter().cloned());
    if parts.is_empty() {
        parts.push("nothing to change: the result is your scene as it is".to_owned());
    }
    format!(
        "applied to your scene in Blender as one undo step (Ctrl-Z takes it back): {}",
        parts.join("; ")
    )
}

fn report_program_applied(
    applied: &viga_protocol::bridge::AppliedProgram,
    out: &Output,
) -> Result<()> {
    match &applied.execution.error {
        None => {
            out.say("ran the program in your Blender as one undo step (Ctrl-Z takes it back)");
            Ok(())
        }
        Some(error) => bail!(
            "the program failed on your current scene and was undone ({error}); your scene is as it was"
        ),
    }
}

async fn doctor(contained: &ContainedWorkers) -> Result<std::process::ExitCode> {
    let launcher = match locate() {
        Ok(launcher) => launcher,
        Err(err) => bail!("{err}"),
    };
    println!("blender: {}", launcher.describe());
    let worker = Worker::start(WorkerConfig::new(launcher)).await?;
    let hello = worker.hello().clone();
    println!(
        "bridge: Blender {} ({} mode), capabilities: {}",
        hello.blender_version,
        hello.mode,
        hello.capabilities.join(", ")
    );
    let started = std::time::Instant::now();
    worker.ping().await?;
    println!(
        "round trip: {:.2} ms",
        started.elapsed().as_secs_f64() * 1000.0
    );
    let providers = viga_provider::ProviderKind::ALL
        .into_iter()
        .filter_map(|kind| Some((kind.name(), kind.default_key_env()?)));
    let services = [(
        "meshy (--assets-generate)",
        viga_skills::meshy::MESHY_KEY_ENV,
    )];
    for (kind, variable) in providers.chain(services) {
        let present = std::env::var_os(variable).is_some_and(|v| !v.is_empty());
        let kept = viga_keys::KeyStore::from_environment()
            .and_then(|store| store.get(variable))
            .map(|found| found.map(|(_, place)| place));
        let state = match (present, kept) {
            (true, _) => "is set".to_owned(),
            (false, Ok(Some(place))) => format!("is not set; kept in {place}"),
            (false, Ok(None)) => "is not set".to_owned(),
            (false, Err(err)) => format!("is not set; the key store cannot be read: {err}"),
        };
        println!("{kind}: {variable} {state}");
    }
    worker.shutdown().await;
    match contained.probe().await {
        Ok(status) => {
            let halves = if status.missing().is_empty() {
                "every half holds"
            } else {
                "NOT every half holds"
            };
            let limits = if status.missing_limits().is_empty() {
                "every limit holds"
            } else {
                "NOT every limit holds"
            };
            println!("containment ({}): {halves}; {limits}", status.policy);
            for (half, guard) in status.halves() {
                let held = if guard.active {
                    "contained"
                } else {
                    "NOT contained"
                };
                println!("  {half}: {held} ({})", guard.detail);
            }
            for (limit, guard) in status.limits.limits() {
                let shown = viga_sandbox::describe_limit(limit, guard);
                println!("  {}: {shown}", limit.noun());
            }
        }
        Err(err) => println!("containment: unavailable: {err}"),
    }
    report_renderers();
    report_attachable().await;
    Ok(std::process::ExitCode::SUCCESS)
}

/// Says whether what `--mode slides` and `--mode page` need is there: they start through
/// the containment launcher above, under the same policy.
fn report_renderers() {
    match viga_slides::SlideTools::locate() {
        Ok(tools) => println!(
            "slides: python-pptx in {}, LibreOffice in {} (contained as above)",
            tools.python.display(),
            tools.office_program_dir.display()
        ),
        Err(err) => println!("slides: unavailable: {err}"),
    }
    match viga_web::locate::find_chromium() {
        Ok(chromium) => println!(
            "pages: Chromium {} (contained as above)",
            chromium.display()
        ),
        Err(err) => println!("pages: unavailable: {err}"),
    }
}

/// Says which running Blenders `--attach` would find, and whether they answer.
async fn report_attachable() {
    let (found, problems) = viga_blender::attach::discover();
    let dir = viga_blender::attach::connection_dir();
    if found.is_empty() && problems.is_empty() {
        println!(
            "attach: no Blender with the viga add-on is running (looked in {})",
            dir.display()
        );
    }
    for problem in problems {
        println!("attach: {problem}");
    }
    for connection in found {
        let info = &connection.info;
        let state = if !connection.is_live() {
            "stale (its Blender is gone)".to_owned()
        } else {
            match viga_blender::attach::attach(&connection, std::time::Duration::from_secs(5)).await
            {
                Ok(client) => format!("attachable ({})", client.describe()),
                Err(err) => err.to_string(),
            }
        };
        println!(
            "attach: Blender {} pid {} via {}: {state}",
            info.blender_version,
            info.pid,
            connection.file.display()
        );
    }
}

fn display_opt(path: &Option<PathBuf>) -> String {
    path.as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "(no script)".to_owned())
}
