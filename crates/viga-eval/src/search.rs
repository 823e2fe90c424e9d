//! The `search` baseline: no model at all. It treats the start program's numeric literals as
//! parameters and searches them with renders in the loop (coordinate moves, a wider scan of
//! an integer whose nearest steps both fail, then a pattern move after every sweep that
//! improved), minimising the photometric loss against the target
//! views, within a budget of evaluated programs. It is real inverse graphics without a VLM,
//! and a floor any model must beat.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use viga_blender::{BlenderCommands as _, BlenderTransport};
use viga_protocol::bridge::{RenderRequest, SceneReset};
use viga_skills::metrics::photometric_loss;

use crate::EvalError;
use crate::benchmark::{Context, Proposal, Proposer};
use crate::layout::Instance;
use crate::scenes::SceneBenchmark;
use crate::scores::{FitViews, RenderSpec};

/// A number written in the program.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Literal {
    /// Byte range in the program, sign included.
    pub start: usize,
    pub end: usize,
    pub value: f64,
    /// Written without a decimal point or exponent: it stays an integer.
    pub integer: bool,
}

fn is_identifier_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || byte == b'_'
}

/// The numeric literals of a Python program, outside strings and comments, not part of a name
/// (`Camera1`) and not complex (`2j`), hex or with underscores. A minus sign that can only be
/// unary (after `(`, `,`, `=`, `[`, `:` or an operator) belongs to the number.
pub fn numeric_literals(code: &str) -> Vec<Literal> {
    let bytes = code.as_bytes();
    let mut literals = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let byte = bytes[i];
        if byte == b'#' {
            while i < bytes.len() && bytes[i] != b'\n' {
                i += 1;
            }
            continue;
        }
        if byte == b'"' || byte == b'\'' {
            i = skip_string(bytes, i);
            continue;
        }
        let starts_number = byte.is_ascii_digit()
            || (byte == b'.' && bytes.get(i + 1).is_some_and(u8::is_ascii_digit));
        let after_name =
            i > 0 && (is_identifier_byte(bytes[i - 1]) || (byte != b'.' && bytes[i - 1] == b'.'));
        if !starts_number || after_name {
            i += 1;
            continue;
        }
        let mut end = i;
        while end < bytes.len() && bytes[end].is_ascii_digit() {
            end += 1;
        }
        let mut integer = true;
        if end < bytes.len() && bytes[end] == b'.' {
            integer = false;
            end += 1;
            while end < bytes.len() && bytes[end].is_ascii_digit() {
                end += 1;
            }
        }
        if end < bytes.len() && (bytes[end] == b'e' || bytes[end] == b'E') {
            let mut exponent = end + 1;
            if exponent < bytes.len() && (bytes[exponent] == b'+' || bytes[exponent] == b'-') {
                exponent += 1;
            }
            if exponent < bytes.len() && bytes[exponent].is_ascii_digit() {
                integer = false;
                end = exponent;
                while end < bytes.len() && bytes[end].is_ascii_digit() {
                    end += 1;
                }
            }
        }
        let unusual = end < bytes.len() && (is_identifier_byte(bytes[end]) || bytes[end] == b'.');
        if unusual {
            // 0x1F, 1_000, 2j, 1.2.3: not a plain number we can rewrite.
            while end < bytes.len() && (is_identifier_byte(bytes[end]) || bytes[end] == b'.') {
                end += 1;
            }
            i = end;
            continue;
        }
        let start = signed_start(bytes, i);
        if let Ok(value) = code[start..end].parse::<f64>() {
            literals.push(Literal {
                start,
                end,
                value,
                integer,
            });
        }
        i = end;
    }
    literals
}

/// Where a literal starting at `digit` begins, including a unary minus.
fn signed_start(bytes: &[u8], digit: usize) -> usize {
    if digit == 0 || bytes[digit - 1] != b'-' {
        return digit;
    }
    let before = bytes[..digit - 1]
        .iter()
        .rev()
        .find(|b| !b.is_ascii_whitespace());
    match before {
        None => digit - 1,
        Some(b) if b"(,=[:+-*/<>{%".contains(b) => digit - 1,
        Some(_) => digit,
    }
}

fn skip_string(bytes: &[u8], start: usize) -> usize {
    let quote = bytes[start];
    let triple = bytes.get(start + 1) == Some(&quote) && bytes.get(start + 2) == Some(&quote);
    let mut i = start + if triple { 3 } else { 1 };
    while i < bytes.len() {
        if bytes[i] == b'\\' {
            i += 2;
            continue;
        }
        if bytes[i] == quote {
            if !triple {
                return i + 1;
            }
            if bytes.get(i + 1) == Some(&quote) && bytes.get(i + 2) == Some(&quote) {
                return i + 3;
            }
        }
        if bytes[i] == b'\n' && !triple {
            return i + 1;
        }
        i += 1;
    }
    bytes.len()
}

/// The program with its literals replaced by `values` (same order as `literals`).
pub fn with_values(code: &str, literals: &[Literal], values: &[f64]) -> String {
    let mut out = String::with_capacity(code.len() + literals.len() * 4);
    let mut cursor = 0;
    for (literal, value) in literals.iter().zip(values) {
        out.push_str(&code[cursor..literal.start]);
        if literal.integer {
            out.push_str(&format!("{}", value.round() as i64));
        } else {
            // Shortest form that reads back exactly, always with a decimal point.
            let text = format!("{value:?}");
            out.push_str(&text);
        }
        cursor = literal.end;
    }
    out.push_str(&code[cursor..]);
    out
}

/// What the search did.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchOutcome {
    pub code: String,
    pub start_loss: Option<f64>,
    pub best_loss: Option<f64>,
    pub evaluations: u32,
    pub literals: usize,
}

/// Something that scores a program (lower is better); `None` when it does not run.
#[async_trait]
pub trait Objective: Send + Sync {
    async fn score(&self, code: &str) -> Result<Option<f64>, EvalError>;
}

/// Pattern search over the literals of `start`, at most `budget` scored programs.
pub async fn search(
    start: &str,
    objective: &dyn Objective,
    budget: u32,
) -> Result<SearchOutcome, EvalError> {
    let literals = numeric_literals(start);
    let start_loss = objective.score(start).await?;
    let mut search = PatternSearch::new(start, literals, objective, budget, start_loss);
    while search.has_budget() && search.frozen.iter().any(|f| !f) {
        let sweep_start = search.best.clone();
        search.coordinate_sweep().await?;
        // Pattern move: keep going in the direction the whole sweep moved.
        if search.best != sweep_start && search.has_budget() {
            search.pattern_move(&sweep_start).await?;
        }
    }
    Ok(search.outcome(start_loss))
}

/// One search in progress: the best values found so far and, per literal, the step it is
/// moved by and whether it is done (frozen).
struct PatternSearch<'a> {
    start: &'a str,
    literals: Vec<Literal>,
    objective: &'a dyn Objective,
    budget: u32,
    /// Scored programs so far, the start program included.
    evaluations: u32,
    best: Vec<f64>,
    /// Infinite until a program runs.
    best_loss: f64,
    steps: Vec<f64>,
    frozen: Vec<bool>,
}

impl<'a> PatternSearch<'a> {
    /// A search from the start program's own values, which cost one evaluation.
    fn new(
        start: &'a str,
        literals: Vec<Literal>,
        objective: &'a dyn Objective,
        budget: u32,
        start_loss: Option<f64>,
    ) -> Self {
        // Integers move by whole units; a real by a quarter of its size, and at least 0.1 so
        // that a zero moves too.
        let steps = literals
            .iter()
            .map(|l| {
                if l.integer {
                    1.0
                } else {
                    (l.value.abs() * 0.25).max(0.1)
                }
            })
            .collect();
        Self {
            start,
            best: literals.iter().map(|l| l.value).collect(),
            frozen: vec![false; literals.len()],
            literals,
            objective,
            budget,
            evaluations: 1,
            best_loss: start_loss.unwrap_or(f64::INFINITY),
            steps,
        }
    }

    fn has_budget(&self) -> bool {
        self.evaluations < self.budget
    }

    /// Tries each literal that is not frozen in turn, one step up, then one step down. An
    /// integer the picture responds to, which neither step improved, is scanned further
    /// before it is given up: a count's loss is seldom monotone (more, thinner posts can
    /// look like fewer, thicker ones), so the nearest whole step may point the wrong way.
    async fn coordinate_sweep(&mut self) -> Result<(), EvalError> {
        for i in 0..self.literals.len() {
            if self.frozen[i] {
                continue;
            }
            let (improved, responded) = self.step_literal(i).await?;
            if improved {
                continue;
            }
            if self.literals[i].integer && responded && self.scan_integer(i).await? {
                continue;
            }
            self.refine_or_freeze(i);
        }
        Ok(())
    }

    /// Moves literal `i` by its step, up first: whether a move improved the loss, and
    /// whether any move changed it at all (the picture responds to this literal).
    async fn step_literal(&mut self, i: usize) -> Result<(bool, bool), EvalError> {
        let mut responded = false;
        for direction in [1.0, -1.0] {
            if !self.has_budget() {
                break;
            }
            let mut candidate = self.best.clone();
            candidate[i] += direction * self.steps[i];
            let before = self.best_loss;
            let (improved, loss) = self.try_scored(candidate).await?;
            if improved {
                return Ok((true, true));
            }
            responded |=
                loss.is_some_and(|loss| (loss - before).abs() > RESPONSE * before.max(1e-9));
        }
        Ok((false, responded))
    }

    /// Tries integer `i` at values further away ([`integer_scan`]), nearest first, keeping the
    /// first that improves; true when one did.
    async fn scan_integer(&mut self, i: usize) -> Result<bool, EvalError> {
        for value in integer_scan(self.best[i]) {
            if !self.has_budget() {
                break;
            }
            let mut candidate = self.best.clone();
            candidate[i] = value;
            if self.try_values(candidate).await? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// After a literal failed to improve: an integer is done; a real halves its step, and is
    /// done once the step is negligible next to its size.
    fn refine_or_freeze(&mut self, i: usize) {
        let literal = &self.literals[i];
        if literal.integer {
            self.frozen[i] = true;
        } else {
            self.steps[i] *= 0.5;
            self.frozen[i] = self.steps[i] < 1e-3 * literal.value.abs().max(1.0);
        }
    }

    /// Tries the point as far beyond the best values as the sweep moved them.
    async fn pattern_move(&mut self, sweep_start: &[f64]) -> Result<(), EvalError> {
        let pattern: Vec<f64> = self
            .best
            .iter()
            .zip(sweep_start)
            .map(|(b, s)| b + (b - s))
            .collect();
        self.try_values(pattern).await?;
        Ok(())
    }

    /// Scores the program with `values`, counting the evaluation, and keeps them when they
    /// beat the best loss; true when they did.
    async fn try_values(&mut self, values: Vec<f64>) -> Result<bool, EvalError> {
        Ok(self.try_scored(values).await?.0)
    }

    /// [`Self::try_values`], with the loss the values scored (`None`: the program failed).
    async fn try_scored(&mut self, values: Vec<f64>) -> Result<(bool, Option<f64>), EvalError> {
        self.evaluations += 1;
        let program = with_values(self.start, &self.literals, &values);
        let loss = self.objective.score(&program).await?;
        match loss {
            Some(loss) if loss < self.best_loss => {
                self.best = values;
                self.best_loss = loss;
                Ok((true, Some(loss)))
            }
            _ => Ok((false, loss)),
        }
    }

    fn outcome(self, start_loss: Option<f64>) -> SearchOutcome {
        SearchOutcome {
            code: with_values(self.start, &self.literals, &self.best),
            start_loss,
            best_loss: self.best_loss.is_finite().then_some(self.best_loss),
            evaluations: self.evaluations,
            literals: self.literals.len(),
        }
    }
}

/// A move changed the loss by more than this share of it: the picture responds to the
/// literal (render noise at the eval's samples stays well below).
const RESPONSE: f64 = 1e-4;

/// The values an integer is scanned at after its nearest whole steps failed: two to four
/// steps either way, and a half to twice its value (a count that is far off); never
/// negative when it was not, nearest first, each once.
fn integer_scan(value: f64) -> Vec<f64> {
    let mut values: Vec<f64> = [2.0, -2.0, 3.0, -3.0, 4.0, -4.0]
        .iter()
        .map(|offset| value + offset)
        .chain([0.5, 0.75, 1.25, 1.5, 2.0].map(|factor| (value * factor).round()))
        .filter(|candidate| value < 0.0 || *candidate >= 0.0)
        .filter(|candidate| (candidate - value).abs() > 1.5)
        .collect();
    values.sort_by(|a, b| (a - value).abs().total_cmp(&(b - value).abs()));
    let mut once = Vec::with_capacity(values.len());
    for candidate in values {
        if !once.contains(&candidate) {
            once.push(candidate);
        }
    }
    once
}

/// Mean PL of a program's views against target images: the program runs on a base scene, then
/// each named camera is rendered at its target's settings.
pub struct SceneObjective {
    pub blender: Arc<dyn BlenderTransport>,
    pub base: SceneReset,
    /// Cameras in the same order as `targets`.
    pub cameras: Vec<String>,
    pub targets: Vec<Vec<u8>>,
    pub render: RenderSpec,
    pub timeout: Duration,
}

impl std::fmt::Debug for SceneObjective {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SceneObjective")
            .field("cameras", &self.cameras)
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl Objective for SceneObjective {
    async fn score(&self, code: &str) -> Result<Option<f64>, EvalError> {
        let ran = self
            .blender
            .execute(code, Some(self.base.clone()), Some(self.timeout))
            .await?;
        if ran.error.is_some() {
            return Ok(None);
        }
        let mut total = 0.0;
        for (camera, target) in self.cameras.iter().zip(&self.targets) {
            let request = RenderRequest {
                camera: Some(camera.clone()),
                pose: None,
                spec: self.render,
                output_path: None,
            };
            let view = match self.blender.render(request, Some(self.timeout)).await {
                Ok(output) => output.image.data,
                // A program that broke a camera does not score, like one that raised.
                Err(viga_blender::TransportError::Refused { .. }) => return Ok(None),
                Err(err) => return Err(err.into()),
            };
            total += photometric_loss(&view, target).map_err(|err| EvalError::Harness {
                instance: camera.clone(),
                message: format!("search scoring: {err}"),
            })?;
        }
        Ok(Some(total / self.targets.len().max(1) as f64))
    }
}

/// The search as a system under test.
#[derive(Debug, Clone)]
pub struct SearchProposer {
    /// Scored programs per instance, the start program included.
    pub budget: u32,
    /// How the search renders; the eval's own settings make its losses the reported ones.
    pub render: RenderSpec,
    pub timeout: Duration,
    /// The goal views whose mean PL the search minimises. With [`FitViews::AllScored`] it
    /// minimises PL on the very views it is scored on (an upper bound, not a fair comparison
    /// with a model); with [`FitViews::Only`] the other views are held out.
    pub fit_views: FitViews,
}

impl SearchProposer {
    /// The fitted views of `instance` with their goal renders, in camera order.
    fn fitted<'a>(
        &self,
        instance: &Instance,
        goal_renders: &'a [PathBuf],
    ) -> Result<Vec<(String, &'a PathBuf)>, EvalError> {
        let fitted: Vec<(String, &PathBuf)> = instance
            .cameras()
            .zip(goal_renders)
            .filter(|(camera, _)| self.fit_views.fits(camera))
            .collect();
        if let FitViews::Only(names) = &self.fit_views
            && fitted.len() != names.len()
        {
            return Err(self.missing_views(std::slice::from_ref(instance)));
        }
        Ok(fitted)
    }

    /// The instances that lack a fit view.
    fn lacking<'a>(&self, instances: &'a [Instance]) -> Vec<&'a Instance> {
        let FitViews::Only(names) = &self.fit_views else {
            return Vec::new();
        };
        instances
            .iter()
            .filter(|instance| {
                let cameras: Vec<String> = instance.cameras().collect();
                names.iter().any(|name| !cameras.contains(name))
            })
            .collect()
    }

    /// The error for instances that lack a fit view.
    fn missing_views(&self, instances: &[Instance]) -> EvalError {
        let lacking: Vec<String> = self
            .lacking(instances)
            .into_iter()
            .map(|instance| format!("{} has {} view(s)", instance.name, instance.views))
            .collect();
        let shown = if lacking.len() > 5 {
            format!(
                "{}, and {} more",
                lacking[..5].join(", "),
                lacking.len() - 5
            )
        } else {
            lacking.join(", ")
        };
        let named = match &self.fit_views {
            FitViews::Only(names) if names.len() > 1 => {
                format!("{} are not views", names.join(", "))
            }
            fit => format!("{} is not a view", fit.describe()),
        };
        EvalError::BadFitViews {
            message: format!(
                "{named} of every selected instance ({shown}); name views every instance has, or select fewer instances"
            ),
        }
    }
}

#[async_trait]
impl Proposer<SceneBenchmark> for SearchProposer {
    fn system(&self) -> String {
        match &self.fit_views {
            FitViews::AllScored => format!("search (budget {})", self.budget),
            FitViews::Only(names) => {
                format!(
                    "search (budget {}, fit on {})",
                    self.budget,
                    names.join("+")
                )
            }
        }
    }

    fn fit_views(&self) -> Option<FitViews> {
        Some(self.fit_views.clone())
    }

    fn check(&self, instances: &[Instance]) -> Result<(), EvalError> {
        if self.lacking(instances).is_empty() {
            Ok(())
        } else {
            Err(self.missing_views(instances))
        }
    }

    async fn propose(
        &self,
        instance: &Instance,
        context: Context<Arc<dyn BlenderTransport>>,
    ) -> Result<Proposal, EvalError> {
        let Context {
            worker: blender,
            goal: goal_renders,
            ..
        } = context;
        let start = std::fs::read_to_string(&instance.start_py)
            .map_err(|err| EvalError::io(&instance.start_py, err))?;
        let fitted = self.fitted(instance, &goal_renders)?;
        let targets = fitted
            .iter()
            .map(|(_, path)| std::fs::read(path).map_err(|err| EvalError::io(path, err)))
            .collect::<Result<Vec<_>, _>>()?;
        let cameras: Vec<String> = fitted.into_iter().map(|(camera, _)| camera).collect();
        let objective = SceneObjective {
            blender,
            base: SceneReset::Blend {
                path: instance.blend.to_string_lossy().into_owned(),
            },
            cameras: cameras.clone(),
            targets,
            render: self.render,
            timeout: self.timeout,
        };
        let outcome = search(&start, &objective, self.budget).await?;
        Ok(Proposal {
            code: Some(outcome.code),
            note: Some(format!(
                "{} literals, {} programs scored; PL on the fit views ({}) {} -> {}",
                outcome.literals,
                outcome.evaluations,
                cameras.join(", "),
                outcome
                    .start_loss
                    .map_or("n/a".to_owned(), |l| format!("{l:.6}")),
                outcome
                    .best_loss
                    .map_or("n/a".to_owned(), |l| format!("{l:.6}")),
            )),
            // Every program the search kept was an improvement on the one before it by its
            // own objective, so the final one stands for them all.
            candidates: Vec::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_outside_strings_comments_and_names() {
        let code = "import bpy\nobj = bpy.data.objects['Camera1']  # move 3 units\nobj.location = (1.5, -2, 3e-1)\nx = f(-4.25, 0x1F, 1_000, 2j)\ns = \"\"\"7 8\"\"\"\nfor i in range(5): y = i-1\n";
        let found: Vec<(&str, f64, bool)> = numeric_literals(code)
            .iter()
            .map(|l| (&code[l.start..l.end], l.value, l.integer))
            .collect();
        assert_eq!(
            found,
            [
                ("1.5", 1.5, false),
                ("-2", -2.0, true),
                ("3e-1", 0.3, false),
                ("-4.25", -4.25, false),
                ("5", 5.0, true),
                ("1", 1.0, true)
            ]
        );
    }

    #[test]
    fn rewriting_keeps_everything_else_and_integers_integral() {
        let code = "a = (1.5, -2)\nb = 'x 9'\n";
        let literals = numeric_literals(code);
        assert_eq!(
            with_values(code, &literals, &[0.25, 3.4]),
            "a = (0.25, 3)\nb = 'x 9'\n"
        );
        assert_eq!(
            with_values(code, &literals, &[1.5, -2.0]),
            code,
            "unchanged values round-trip"
        );
    }

    /// A quadratic bowl: the search must walk to its minimum.
    struct Bowl;

    #[async_trait]
    impl Objective for Bowl {
        async fn score(&self, code: &str) -> Result<Option<f64>, EvalError> {
            let values: Vec<f64> = numeric_literals(code).iter().map(|l| l.value).collect();
            if values[0] < -50.0 {
                return Ok(None);
            }
            Ok(Some(
                (values[0] - 3.0).powi(2) + (values[1] + 1.25).powi(2) + (values[2] - 4.0).powi(2),
            ))
        }
    }

    /// A count whose nearest steps mislead: one fewer looks a little better than one more,
    /// and the goal is three away.
    struct Fence;

    #[async_trait]
    impl Objective for Fence {
        async fn score(&self, code: &str) -> Result<Option<f64>, EvalError> {
            let posts = numeric_literals(code)[0].value;
            Ok(Some(match posts as i64 {
                9 => 0.0,
                5 => 2.9,
                7 => 3.1,
                n => 3.0 + (n - 6).abs() as f64 * 0.05,
            }))
        }
    }

    #[tokio::test]
    async fn a_count_is_scanned_past_a_misleading_nearest_step() {
        let outcome = search("posts = 6\n", &Fence, 30).await.unwrap();
        assert_eq!(outcome.code, "posts = 9\n", "{outcome:?}");
    }

    #[test]
    fn an_integer_is_scanned_nearest_first_and_never_below_zero_from_above() {
        assert_eq!(integer_scan(6.0), [8.0, 4.0, 9.0, 3.0, 10.0, 2.0, 12.0]);
        assert_eq!(
            integer_scan(1.0),
            [3.0, 4.0, 5.0],
            "no negative count, no repeats"
        );
        assert_eq!(integer_scan(-4.0), [-2.0, -6.0, -1.0, -7.0, 0.0, -8.0]);
    }

    #[tokio::test]
    async fn the_search_finds_the_minimum_within_its_budget() {
        let outcome = search("x = (0.0, 2.0)\nn = 1\n", &Bowl, 400).await.unwrap();
        let values: Vec<f64> = numeric_literals(&outcome.code)
            .iter()
            .map(|l| l.value)
            .collect();
        assert!(
            (values[0] - 3.0).abs() < 0.01 && (values[1] + 1.25).abs() < 0.01,
            "{}",
            outcome.code
        );
        assert_eq!(values[2], 4.0, "integers move in whole steps");
        assert!(outcome.evaluations <= 400);
        assert!(outcome.best_loss.unwrap() < outcome.start_loss.unwrap());
        let tight = search("x = (0.0, 2.0)\nn = 1\n", &Bowl, 5).await.unwrap();
        assert_eq!(tight.evaluations, 5, "the budget is a hard limit");
    }
}
