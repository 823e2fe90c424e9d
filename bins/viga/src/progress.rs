//! Terminal progress: one line per step, from the run's events; or, for a program (the
//! Blender add-on's panel), the typed JSON-lines stream of `viga_protocol::stream`.

use viga_core::{ModelText, RunUpdate};
use viga_protocol::event::{RunEvent, StopReason};
use viga_protocol::stream::{StreamLine, StreamRecord};

pub struct Printer {
    max_iterations: u32,
}

impl Printer {
    pub fn new(max_iterations: u32) -> Self {
        Self { max_iterations }
    }

    pub fn show(&self, event: &RunEvent) {
        match event {
            RunEvent::RunStarted {
                resumed_from_iteration: Some(index),
                ..
            } => {
                say!("resuming at iteration {index}");
            }
            RunEvent::IterationStarted { index } => {
                if self.max_iterations > 0 {
                    say!("iteration {index}/{}", self.max_iterations);
                } else {
                    say!("iteration {index}");
                }
            }
            RunEvent::PlanProduced { plan, .. } => {
                say!("  plan: {}", first_line(plan));
            }
            RunEvent::ExecutionFinished {
                result,
                failure,
                attempt,
                ..
            } => say!("  {}", attempt_line(result, failure.as_ref(), *attempt)),
            RunEvent::FastRetry { .. } => say!("  asking for a fix (fast retry)"),
            RunEvent::WorkerRestarted { reason } => {
                say!("  the worker restarted: {}", first_line(reason))
            }
            RunEvent::ReplyRefused { reason, .. } => {
                say!(
                    "  a reply was refused and the program failed: {}",
                    first_line(reason)
                )
            }
            RunEvent::GeneratorToolCalled { call, .. } => {
                say!(
                    "  generator used {}{}: {}",
                    call.tool,
                    if call.ok { "" } else { " (failed)" },
                    first_line(&call.outcome)
                );
            }
            RunEvent::NumbersRefined { .. } => say!("  {}", refined_line(event)),
            RunEvent::ToolInvoked { tool, ok, .. } => {
                say!(
                    "  verifier used {tool}{}",
                    if *ok { "" } else { " (failed)" }
                );
            }
            RunEvent::FeedbackProduced { feedback, .. } => say!("  {}", verdict_line(feedback)),
            RunEvent::ViewScored {
                view,
                photometric_loss,
                ..
            } => say!("  {view}: photometric loss {photometric_loss:.5} (0 is the target)"),
            RunEvent::Warning { message } => say!("  warning: {message}"),
            RunEvent::RunFinished { stop, iterations } => {
                let why = match stop {
                    StopReason::Accepted => "the verifier accepted the result".to_owned(),
                    StopReason::MaxIterations => "the iteration budget is spent".to_owned(),
                    StopReason::GeneratorEnded { why } => {
                        format!("the generator ended the run (end_process): {why}")
                    }
                    StopReason::Cancelled => "cancelled".to_owned(),
                    StopReason::TimeLimit { seconds } => format!(
                        "the time limit ({}) passed; what was made by then is kept",
                        viga_protocol::event::seconds_in_words(*seconds)
                    ),
                    StopReason::Failed { message, .. } => format!("failed: {message}"),
                };
                say!("stopped after {iterations} iterations: {why}");
            }
            _ => {}
        }
    }
}

/// How one attempt at running the program went.
fn attempt_line(
    result: &viga_protocol::iteration::ExecutionResult,
    failure: Option<&viga_protocol::iteration::FailureClass>,
    attempt: u32,
) -> String {
    match failure {
        Some(failure) => {
            let detail = result
                .error
                .as_ref()
                .map(ToString::to_string)
                .unwrap_or_else(|| failure.describe().to_owned());
            format!("attempt {}: {failure} {}", attempt + 1, first_line(&detail))
        }
        None => format!(
            "attempt {}: ran in {:.0} ms",
            attempt + 1,
            result.duration_ms
        ),
    }
}

/// The verifier's verdict and its first difference.
/// `refine_numbers`' outcome in a line.
fn refined_line(event: &RunEvent) -> String {
    let RunEvent::NumbersRefined {
        loss_before,
        loss_after,
        programs,
        changed,
        seconds,
        out_of_time,
        ..
    } = event
    else {
        return String::new();
    };
    let stopped = if *out_of_time {
        ", stopped at its time limit"
    } else {
        ""
    };
    format!(
        "refined {changed} number(s) in {programs} renders ({seconds:.1} s{stopped}): loss {loss_before:.5} -> {loss_after:.5}"
    )
}

fn verdict_line(feedback: &viga_protocol::iteration::Feedback) -> String {
    let verdict = if feedback.accepted {
        "accepted"
    } else {
        "not accepted"
    };
    let first = feedback
        .visual_differences
        .first()
        .map(String::as_str)
        .unwrap_or("");
    format!(
        "verifier: {verdict}{}{}",
        if first.is_empty() { "" } else { "; " },
        first_line(first)
    )
}

fn first_line(text: &str) -> String {
    let line = text.lines().next().unwrap_or_default();
    if line.chars().count() > 100 {
        format!("{}...", line.chars().take(100).collect::<String>())
    } else {
        line.to_owned()
    }
}

/// How a command reports its run: lines for a person, or JSON lines for a program (the
/// Blender add-on's panel), one object per line with a `kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum EventsFormat {
    #[default]
    Text,
    Jsonl,
}

/// Where a run's progress goes. In JSON-lines mode stdout carries nothing but the JSON
/// objects, and words for a person go to stderr.
pub struct Output {
    format: EventsFormat,
    printer: Printer,
}

impl Output {
    pub fn new(format: EventsFormat, max_iterations: u32) -> Self {
        Self {
            format,
            printer: Printer::new(max_iterations),
        }
    }

    pub fn is_jsonl(&self) -> bool {
        self.format == EventsFormat::Jsonl
    }

    /// A line for the person at the terminal.
    /// A line for the person; outside text in it (names from a scene) steers no terminal.
    pub fn say(&self, text: &str) {
        let text = viga_io::terminal::terminal_safe(text);
        match self.format {
            EventsFormat::Text => println!("{text}"),
            EventsFormat::Jsonl => eprintln!("{text}"),
        }
    }

    pub fn event(&self, event: &viga_protocol::event::TimedEvent) {
        match self.format {
            EventsFormat::Text => self.printer.show(&event.event),
            EventsFormat::Jsonl => event_line(event),
        }
    }

    pub fn run_folder(&self, path: &std::path::Path) {
        self.labelled_path("run_folder", "run folder", path);
    }

    pub fn report(&self, path: &std::path::Path) {
        self.labelled_path("report", "report", path);
    }

    fn labelled_path(&self, kind: &str, label: &str, path: &std::path::Path) {
        let path = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        match self.format {
            EventsFormat::Text => println!("{label}: {}", path.display()),
            EventsFormat::Jsonl if kind == "report" => stream_line(StreamLine::Report { path }),
            EventsFormat::Jsonl => stream_line(StreamLine::RunFolder { path }),
        }
    }

    /// The last line: how the run ended (text mode says this through the events).
    pub fn finished(
        &self,
        stop: &StopReason,
        message: &str,
        final_program: Option<&std::path::Path>,
        exit_code: u8,
    ) {
        if self.format == EventsFormat::Jsonl {
            stream_line(StreamLine::Finished {
                stop: stop.clone(),
                message: message.to_owned(),
                final_program: final_program
                    .map(|p| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())),
                exit_code,
            });
        }
    }
}

/// The JSON-lines form of a run event.
pub fn event_line(event: &viga_protocol::event::TimedEvent) {
    stream_line(StreamLine::Event {
        event: event.clone(),
    });
}

/// The JSON-lines form of a piece of model text (not in the run's log).
fn model_text_line(text: ModelText) {
    stream_line(StreamLine::ModelText {
        index: text.index,
        role: text.role,
        delta: text.delta,
    });
}

/// The JSON-lines form of an error that ended a command before or during its run.
pub fn error_line(message: &str) {
    stream_line(StreamLine::Error {
        message: message.to_owned(),
    });
}

/// Prints one line of the typed stream.
fn stream_line(line: StreamLine) {
    use std::io::Write as _;
    let Ok(text) = serde_json::to_string(&StreamRecord::new(line)) else {
        return;
    };
    let mut stdout = std::io::stdout().lock();
    // A reader that went away (the panel closed) is no reason to stop the run.
    let _ = writeln!(stdout, "{text}");
    let _ = stdout.flush();
}

/// Asks `run` for model text as it arrives when the output is for a program (the panel shows
/// it as it comes); called as soon as the run is started, so its first model call streams.
pub fn stream_model_text<O: Send + 'static, F>(run: &viga_core::RunHandle<O, F>, out: &Output) {
    if out.is_jsonl() {
        run.stream_model_text();
    }
}

/// Shows a run's events until it ends (and, in JSON-lines mode, model text as it arrives).
/// Ctrl-C (or SIGINT from the Blender panel), or SIGTERM, cancels it:
/// a model call in flight is abandoned at once, a Blender call in flight finishes first, and
/// the run then ends as cancelled, so the caller can still take its changes back. With
/// `leave_after`, a run still busy that long after the cancel is left to wind down (its
/// folder is consistent at every moment, and `viga resume` continues it): `false` then.
pub async fn follow_events<O: Send + 'static, F>(
    run: &mut viga_core::RunHandle<O, F>,
    out: &Output,
    what: &str,
    show: impl Fn(&viga_protocol::event::TimedEvent, bool),
    leave_after: Option<std::time::Duration>,
) -> bool {
    let jsonl = out.is_jsonl();
    // Listened for from here on, not per wait: a signal that arrives while an event is being
    // shown is kept for the next wait (a fresh `ctrl_c()` each turn would miss it). SIGTERM
    // (a batch system stopping a job, `kill`) stops the run as Ctrl-C does, so its folder
    // says how it ended.
    let mut stops = StopSignals::listen();
    stream_model_text(run, out);
    let mut cancelled_at: Option<tokio::time::Instant> = None;
    loop {
        let deadline = cancelled_at.zip(leave_after).map(|(at, grace)| at + grace);
        tokio::select! {
            update = run.next_update() => match update {
                Some(RunUpdate::Event(event)) => show(&event, jsonl),
                Some(RunUpdate::ModelText(text)) if jsonl => model_text_line(text),
                Some(RunUpdate::ModelText(_)) => {}
                None => return true,
            },
            heard = stops.next(), if cancelled_at.is_none() => {
                out.say(&format!("stopping {what} ({heard})..."));
                run.cancel();
                cancelled_at = Some(tokio::time::Instant::now());
            },
            _ = sleep_until(deadline), if deadline.is_some() => {
                out.say(&format!("{what} was busy; left it (resume it with `viga resume`)"));
                return false;
            },
        }
    }
}

/// SIGINT and SIGTERM, listened for from when this is made: a signal that arrives between
/// two waits is kept for the next. Heard also by a process started with SIGINT ignored (a
/// background job), whose stop would otherwise never come.
pub struct StopSignals {
    interrupts: Option<tokio::signal::unix::Signal>,
    terminations: Option<tokio::signal::unix::Signal>,
}

impl StopSignals {
    pub fn listen() -> Self {
        use tokio::signal::unix::{SignalKind, signal};
        Self {
            interrupts: signal(SignalKind::interrupt()).ok(),
            terminations: signal(SignalKind::terminate()).ok(),
        }
    }

    /// The next stop, in words: `Ctrl-C` (SIGINT) or `SIGTERM`.
    pub async fn next(&mut self) -> &'static str {
        tokio::select! {
            () = next_interrupt(&mut self.interrupts) => "Ctrl-C",
            () = next_signal(&mut self.terminations) => "SIGTERM",
        }
    }
}

/// Waits for the next SIGINT; without a listener (the runtime could not make one), for
/// Ctrl-C as tokio reports it. Never returns when neither can be waited for.
async fn next_interrupt(interrupts: &mut Option<tokio::signal::unix::Signal>) {
    let heard = match interrupts {
        Some(listener) => listener.recv().await.is_some(),
        None => tokio::signal::ctrl_c().await.is_ok(),
    };
    if !heard {
        std::future::pending::<()>().await;
    }
}

/// Waits for the next signal `listener` hears; never returns without a listener.
async fn next_signal(listener: &mut Option<tokio::signal::unix::Signal>) {
    let heard = match listener {
        Some(listener) => listener.recv().await.is_some(),
        None => false,
    };
    if !heard {
        std::future::pending::<()>().await;
    }
}

async fn sleep_until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
