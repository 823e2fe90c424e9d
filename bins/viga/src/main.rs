//! `viga`: the command line. Thin: it parses arguments, builds the configuration, and hands
//! everything else to the library crates.

#![warn(clippy::too_many_lines)] // no function over 80 lines: clippy.toml sets the threshold

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
use viga_blender::{ContainedWorkers, Worker};
use viga_core::RunHandle;
use viga_protocol::event::StopReason;
use viga_provider::ProviderKind;

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
        // A slides or page run refuses the scene's flags, `--generator search` among them.
        Command::Run(args) if args.mode != args::Mode::Scene => run(args, contained).await,
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
            if args.through_mcp.is_some() {
                bail!(
                    "--through-mcp works with the model generator; the search runs on --base or an empty scene in viga's own Blender"
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
            let choice = viga_domain_scene::attached::ResultChoice::from_iteration(iteration);
            let trust = ApplyTrust {
                trusted,
                confirmed: confirm_trusted,
            };
            apply(&run, choice, trust, &attach, events, contained).await
        }
        Command::Addon { command } => attach::addon(command).await,
        Command::Report { run, out } => {
            let path =
                viga_core::report::write_html(&run, out.as_deref(), &viga_app::domains::kinds())?;
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

/// A Blender of viga's own for model-written programs, contained (see
/// `viga_app::workers::start_blender`), its remarks said on the terminal.
async fn start_blender(
    contained: &ContainedWorkers,
    attached: Option<&viga_blender::attach::Connection>,
    access: viga_blender::Access,
    assets: Option<&Path>,
) -> Result<Arc<Worker>> {
    Ok(viga_app::workers::start_blender(contained, attached, access, assets, &Terminal).await?)
}

/// A command's remarks on the way, on the terminal: said on stdout, warnings on stderr.
struct Terminal;

impl viga_app::Tell for Terminal {
    fn say(&self, line: &str) {
        say!("{line}");
    }
    fn warn(&self, line: &str) {
        eprintln!("warning: {}", viga_io::terminal::terminal_safe(line));
    }
}

impl viga_app::Tell for Output {
    fn say(&self, line: &str) {
        Output::say(self, line);
    }
    fn warn(&self, line: &str) {
        eprintln!("warning: {}", viga_io::terminal::terminal_safe(line));
    }
}

async fn run(args: RunArgs, contained: &ContainedWorkers) -> Result<std::process::ExitCode> {
    args.check_viewport_flag()?;
    let mut out = Output::new(args.events, args.max_iterations);
    // Decoded video frames live here until the run has copied its targets in.
    let frames = tempfile::tempdir().context("no temporary folder for the target's frames")?;
    let (mut config, start) = args.start(frames.path())?;
    let provider = run_model(&args, &mut config, &out).await?;
    let start = match start {
        args::RunStart::Ready(start) => *start,
        args::RunStart::Attached(scene) => viga_app::runs::Start::Attached {
            scene,
            user: viga_app::attach::attach(args.attach.connection.as_deref()).await?,
        },
        args::RunStart::ThroughMcp(scene, server) => {
            let question = viga_app::trust::through_mcp_question();
            if !trust_confirmed(args.confirm_trusted, &out, &question)? {
                bail!(
                    "trusted mode was not confirmed for this run: {} Answer yes when asked, or give --confirm-trusted when the person already agreed (without --through-mcp, the run works in viga's contained Blender)",
                    question.lines.first().map_or("", String::as_str)
                );
            }
            viga_app::runs::Start::ThroughMcp {
                scene,
                blender: server.connect(&out).await?,
            }
        }
    };
    let handle =
        viga_app::runs::start(config, start, provider, &args.output, contained, &out).await?;
    progress::stream_model_text(&handle, &out);
    let followed = follow(handle, &mut out).await?;
    if args.attach.wanted() {
        offer_result(&followed, &args, &out, contained).await?;
    }
    Ok(finish(&followed, &out))
}

/// The model a run asks, from its flags, recorded in `config` (its kind, the model's own
/// name, whether the generator gets its tools); a scripted one is said so.
async fn run_model(
    args: &RunArgs,
    config: &mut viga_core::RunConfig,
    out: &Output,
) -> Result<Arc<dyn viga_provider::Provider>> {
    let mut provider_settings = viga_app::provider::settings(&args.provider.choice(), None)?;
    if args.generator_tools == viga_core::GeneratorTools::Auto {
        config.tool_calling_found =
            viga_app::tool_calling::find_out(&mut provider_settings, out).await;
        if let Some(found) = &config.tool_calling_found {
            out.say(found);
        }
    }
    let provider = viga_app::provider::build(&provider_settings)?;
    config.provider = provider_settings.kind.name().to_owned();
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

async fn resume(
    folder: &Path,
    args: ProviderArgs,
    max_iterations: Option<u32>,
    events: progress::EventsFormat,
    contained: &ContainedWorkers,
) -> Result<std::process::ExitCode> {
    let mut out = Output::new(events, max_iterations.unwrap_or(0));
    let handle =
        viga_app::runs::resume(folder, &args.choice(), max_iterations, contained, &out).await?;
    progress::stream_model_text(&handle, &out);
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
    let show = |event: &viga_protocol::event::TimedEvent, _jsonl: bool| out.event(event);
    let ended =
        progress::follow_events(&mut handle, out, "the run", show, Some(CANCEL_GRACE)).await;
    if !ended {
        if let Err(err) = viga_core::RunFolder::open(&folder)
            .and_then(|run| run.finish_left_run(viga_protocol::event::StopReason::Cancelled))
        {
            viga_app::Tell::warn(
                &*out,
                &format!("the run folder does not say the run was cancelled: {err}"),
            );
        }
        return Ok(Followed {
            folder,
            outcome: None,
        });
    }
    let outcome = handle.wait().await?;
    let report = viga_core::report::write_html(&outcome.folder, None, &viga_app::domains::kinds())?;
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
    let result = viga_domain_scene::attached::ChosenResult::open(
        &followed.folder,
        viga_domain_scene::attached::ResultChoice::Final,
    )?;
    let user = viga_app::attach::attach(args.attach.connection.as_deref()).await?;
    let summary = viga_app::attach::apply_as_data(&result, &user, contained, out).await?;
    out.say(&summary);
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
    choice: viga_domain_scene::attached::ResultChoice,
    trust: ApplyTrust,
    args: &attach::AttachArgs,
    events: progress::EventsFormat,
    contained: &ContainedWorkers,
) -> Result<std::process::ExitCode> {
    let out = Output::new(events, 0);
    // Checked first, so a wrong folder or iteration is reported as such.
    let result = viga_domain_scene::attached::ChosenResult::open(folder, choice)?;
    if trust.trusted && !trust_confirmed(trust.confirmed, &out, &viga_app::trust::apply_question())?
    {
        bail!(
            "trusted mode was not confirmed for this apply; run without --trusted to apply the result as data, with no program running in your Blender"
        );
    }
    let user = viga_app::attach::attach(args.connection.as_deref()).await?;
    let said = if trust.trusted {
        viga_app::attach::apply_by_running(&result, &user, &out).await?
    } else {
        let summary = viga_app::attach::apply_as_data(&result, &user, contained, &out).await?;
        out.say(&summary);
        summary
    };
    // The panel follows `viga apply --events jsonl` as any other command: its last line.
    out.finished(&StopReason::Accepted, &said, None, 0);
    Ok(std::process::ExitCode::SUCCESS)
}

/// Whether trusted mode is confirmed: `already` by a front end that asked, or now by the
/// person at the terminal (a JSON-lines stream has a front end to ask, never a person here).
fn trust_confirmed(
    already: bool,
    out: &Output,
    question: &viga_app::trust::TrustQuestion,
) -> Result<bool, viga_app::AppError> {
    Ok(already || (!out.is_jsonl() && ask_trust(question)?))
}

/// Puts `question` to the person at the terminal; only `yes` agrees, and nobody at a
/// terminal is a no (what was asked is said either way).
fn ask_trust(question: &viga_app::trust::TrustQuestion) -> Result<bool, viga_app::AppError> {
    for line in &question.lines {
        eprintln!("{line}");
    }
    if !std::io::stdin().is_terminal() {
        return Ok(false);
    }
    eprint!("Type 'yes' to allow it for {}: ", question.scope);
    let mut answer = String::new();
    std::io::stdin()
        .read_line(&mut answer)
        .map_err(|err| viga_app::AppError::io("standard input", err))?;
    Ok(answer.trim() == "yes")
}

async fn doctor(contained: &ContainedWorkers) -> Result<std::process::ExitCode> {
    viga_app::doctor::check(contained, &Terminal).await?;
    Ok(std::process::ExitCode::SUCCESS)
}

fn display_opt(path: &Option<PathBuf>) -> String {
    path.as_ref()
        .map_or_else(|| "(no script)".to_owned(), |p| p.display().to_string())
}
