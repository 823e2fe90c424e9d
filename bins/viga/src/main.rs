//! `viga`: the command line. Thin: it parses arguments, builds the configuration, and hands
//! everything else to the library crates.

mod agent;
mod args;
mod attach;
mod eval;
mod eval_bench;
mod gn;
mod mcp;
mod progress;
mod search;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context as _, Result, bail};
use clap::Parser as _;
use std::io::IsTerminal as _;
use viga_blender::{BlenderCommands as _, BlenderTransport, Worker, WorkerConfig, locate};
use viga_core::RunHandle;
use viga_protocol::event::StopReason;
use viga_provider::{ProviderConfig, ProviderKind, build_provider};

use crate::args::{ApplyChoice, Cli, Command, ProviderArgs, RunArgs};
use crate::progress::Output;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("VIGA_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let jsonl = cli.command.events() == progress::EventsFormat::Jsonl;
    match dispatch(cli.command).await {
        Ok(code) => code,
        Err(err) => {
            if jsonl {
                progress::error_line(&format!("{err:#}"));
            }
            eprintln!("error: {err:#}");
            std::process::ExitCode::from(2)
        }
    }
}

async fn dispatch(command: Command) -> Result<std::process::ExitCode> {
    match command {
        Command::Run(args) if args.generator == args::Generator::Search => {
            if args.attach.wanted() {
                bail!(
                    "--attach works with the model generator; the search runs on --base or an empty scene"
                );
            }
            search::run(args).await
        }
        Command::Run(args) => run(args).await,
        Command::Eval { command } => eval::run(command).await,
        Command::Resume {
            run,
            provider,
            max_iterations,
            events,
        } => resume(&run, provider, max_iterations, events).await,
        Command::Apply { run, attach } => apply(&run, &attach).await,
        Command::Addon { command } => attach::addon(command).await,
        Command::Report { run, out } => {
            let path = viga_core::report::write_html(&run, out.as_deref())?;
            println!("report: {}", path.display());
            Ok(std::process::ExitCode::SUCCESS)
        }
        Command::Doctor => doctor().await,
        Command::Gn(args) => gn::run(args).await,
        Command::Agent(args) => agent::run(args).await,
        Command::Mcp {
            attach,
            live,
            addons,
            resolution,
        } => mcp::serve(&attach, live, addons.as_deref(), &resolution).await,
        Command::Gateway {
            listen,
            addons,
            setup,
        } => mcp::gateway(listen, addons, setup).await,
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
            let kind: ProviderKind = serde_json::from_value(serde_json::Value::String(kind.to_owned())).map_err(|_| {
                anyhow::anyhow!("unknown provider {kind:?}; use openai, anthropic, gemini, openai_compatible or scripted")
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

async fn start_blender() -> Result<Arc<dyn BlenderTransport>> {
    let launcher = locate()?;
    let worker = Worker::start(WorkerConfig::new(launcher)).await?;
    Ok(Arc::new(worker))
}

async fn run(args: RunArgs) -> Result<std::process::ExitCode> {
    let mut out = Output::new(args.events, args.max_iterations);
    let provider_settings = provider_config(&args.provider, None)?;
    let mut config = args.run_config()?;
    config.provider = provider_settings.kind.name().to_owned();
    let provider = build_provider(&provider_settings)?;
    // The provider's own name for its model: for a scripted run, the script's label.
    config.model = provider.model().to_owned();
    if provider_settings.kind == ProviderKind::Scripted {
        out.say(&format!(
            "[scripted provider] every model answer is replayed from {}",
            display_opt(&provider_settings.script)
        ));
    }
    let handle = if args.attach.wanted() {
        // The person's Blender is asked for a copy of the open scene and let go: it is not
        // held (nor touched) while the run works in a Blender of viga's own.
        let user = attach::attach(&args.attach).await?;
        let worker = attach::start_worker(Some(&user.connection)).await?;
        viga_core::attached::start_on_user_scene(
            config,
            provider,
            worker,
            user.transport.as_ref(),
            &args.output,
        )
        .await?
    } else {
        viga_core::start(config, provider, start_blender().await?, &args.output)?
    };
    viga_core::RunFolder::open(handle.folder())?.write_provider(&provider_settings)?;
    let followed = follow(handle, &mut out).await?;
    if args.attach.wanted() {
        offer_result(&followed, &args, &out).await?;
    }
    Ok(finish(&followed, &out))
}

async fn resume(
    folder: &Path,
    args: ProviderArgs,
    max_iterations: Option<u32>,
    events: progress::EventsFormat,
) -> Result<std::process::ExitCode> {
    // Checked first, so a wrong path is reported as such, not as a provider problem.
    let saved = viga_core::RunFolder::open(folder)?.read_provider();
    let provider_settings = provider_config(&args, saved)?;
    let provider = build_provider(&provider_settings)?;
    let blender = start_blender().await?;
    let handle = viga_core::resume(folder, provider, blender, max_iterations)?;
    let mut out = Output::new(events, max_iterations.unwrap_or(0));
    let followed = follow(handle, &mut out).await?;
    Ok(finish(&followed, &out))
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
    let mut cancelled_at: Option<tokio::time::Instant> = None;
    loop {
        let deadline = cancelled_at.map(|at| at + CANCEL_GRACE);
        tokio::select! {
            event = handle.next_event() => match event {
                Some(event) => out.event(&event),
                None => break,
            },
            signal = tokio::signal::ctrl_c(), if cancelled_at.is_none() => {
                if signal.is_ok() {
                    out.say("stopping the run (Ctrl-C)...");
                    handle.cancel();
                    cancelled_at = Some(tokio::time::Instant::now());
                }
            },
            _ = sleep_until(deadline), if deadline.is_some() => {
                out.say("the run was busy; left it (resume it with `viga resume`)");
                return Ok(Followed { folder, outcome: None });
            },
        }
    }
    let outcome = handle.wait().await?;
    let report = viga_core::report::write_html(&outcome.folder, None)?;
    out.report(&report);
    Ok(Followed {
        folder,
        outcome: Some(outcome),
    })
}

async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// The exit code for a run (and the JSON-lines `finished` line).
fn finish(followed: &Followed, out: &Output) -> std::process::ExitCode {
    let (outcome, message, code) = match followed.outcome.as_ref().map(|o| &o.stop) {
        None | Some(StopReason::Cancelled) => ("cancelled", String::new(), 130),
        Some(StopReason::Accepted) => ("accepted", String::new(), 0),
        Some(StopReason::MaxIterations) => ("max_iterations", String::new(), 0),
        Some(StopReason::Failed { message }) => ("failed", message.clone(), 1),
    };
    let final_program = followed.folder.join(viga_core::folder::FINAL_PROGRAM);
    out.finished(
        outcome,
        &message,
        final_program.is_file().then_some(final_program.as_path()),
        code,
    );
    std::process::ExitCode::from(code)
}

/// After an attached run: applies its result to the person's scene as one undo step, when
/// they want it.
async fn offer_result(followed: &Followed, args: &RunArgs, out: &Output) -> Result<()> {
    let finished_well = followed.outcome.as_ref().is_some_and(|o| {
        o.final_code.is_some() && matches!(o.stop, StopReason::Accepted | StopReason::MaxIterations)
    });
    if !finished_well {
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
    let user = attach::attach(&args.attach).await?;
    let applied =
        viga_core::attached::apply_to_user_scene(&followed.folder, user.transport.as_ref()).await?;
    report_applied(&applied, out)
}

fn ask_yes(question: &str) -> Result<bool> {
    use std::io::Write as _;
    print!("{question}");
    std::io::stdout().flush()?;
    let mut answer = String::new();
    std::io::stdin().read_line(&mut answer)?;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes"))
}

fn report_applied(applied: &viga_protocol::bridge::AppliedProgram, out: &Output) -> Result<()> {
    match &applied.execution.error {
        None => {
            out.say("applied to your scene in Blender (Ctrl-Z takes it back)");
            Ok(())
        }
        Some(error) => bail!(
            "the result failed on your current scene and was undone ({error}); your scene is as it was"
        ),
    }
}

async fn apply(folder: &Path, args: &attach::AttachArgs) -> Result<std::process::ExitCode> {
    viga_core::RunFolder::open(folder)?;
    let user = attach::attach(args).await?;
    let applied = viga_core::attached::apply_to_user_scene(folder, user.transport.as_ref()).await?;
    report_applied(&applied, &Output::new(progress::EventsFormat::Text, 0))?;
    Ok(std::process::ExitCode::SUCCESS)
}

async fn doctor() -> Result<std::process::ExitCode> {
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
    for (kind, variable) in [
        ("openai", "OPENAI_API_KEY"),
        ("anthropic", "ANTHROPIC_API_KEY"),
        ("gemini", "GEMINI_API_KEY"),
    ] {
        let present = std::env::var_os(variable).is_some_and(|v| !v.is_empty());
        println!(
            "{kind}: {variable} {}",
            if present { "is set" } else { "is not set" }
        );
    }
    worker.shutdown().await;
    report_attachable().await;
    Ok(std::process::ExitCode::SUCCESS)
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
