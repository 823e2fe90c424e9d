//! Terminal progress: one line per step, from the run's events.

use viga_protocol::event::{RunEvent, StopReason};

pub struct Printer {
    max_iterations: u32,
}

impl Printer {
    pub fn new(max_iterations: u32) -> Self {
        Self { max_iterations }
    }

    pub fn show(&mut self, event: &RunEvent) {
        match event {
            RunEvent::RunStarted {
                resumed_from_iteration: Some(index),
                ..
            } => {
                println!("resuming at iteration {index}");
            }
            RunEvent::IterationStarted { index } => {
                if self.max_iterations > 0 {
                    println!("iteration {index}/{}", self.max_iterations);
                } else {
                    println!("iteration {index}");
                }
            }
            RunEvent::PlanProduced { plan, .. } => {
                println!("  plan: {}", first_line(plan));
            }
            RunEvent::ExecutionFinished {
                result,
                failure: Some(failure),
                attempt,
                ..
            } => {
                let detail = result
                    .error
                    .as_ref()
                    .map(ToString::to_string)
                    .unwrap_or_else(|| failure.describe().to_owned());
                println!(
                    "  attempt {}: {failure} {}",
                    attempt + 1,
                    first_line(&detail)
                );
            }
            RunEvent::ExecutionFinished {
                result, attempt, ..
            } => {
                println!(
                    "  attempt {}: ran in {:.0} ms",
                    attempt + 1,
                    result.duration_ms
                );
            }
            RunEvent::FastRetry { .. } => println!("  asking for a fix (fast retry)"),
            RunEvent::WorkerRestarted { reason } => {
                println!("  Blender restarted: {}", first_line(reason))
            }
            RunEvent::ToolInvoked { tool, ok, .. } => {
                println!(
                    "  verifier used {tool}{}",
                    if *ok { "" } else { " (failed)" }
                );
            }
            RunEvent::FeedbackProduced { feedback, .. } => {
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
                println!(
                    "  verifier: {verdict}{}{}",
                    if first.is_empty() { "" } else { "; " },
                    first_line(first)
                );
            }
            RunEvent::Warning { message } => println!("  warning: {message}"),
            RunEvent::RunFinished { stop, iterations } => {
                let why = match stop {
                    StopReason::Accepted => "the verifier accepted the scene".to_owned(),
                    StopReason::MaxIterations => "the iteration budget is spent".to_owned(),
                    StopReason::Cancelled => "cancelled".to_owned(),
                    StopReason::Failed { message } => format!("failed: {message}"),
                };
                println!("stopped after {iterations} iterations: {why}");
            }
            _ => {}
        }
    }
}

fn first_line(text: &str) -> String {
    let line = text.lines().next().unwrap_or_default();
    if line.chars().count() > 100 {
        format!("{}...", line.chars().take(100).collect::<String>())
    } else {
        line.to_owned()
    }
}
