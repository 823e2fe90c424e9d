//! The search itself, over any [`Objective`]: coordinate moves on the parameters
//! ([`super::space`]) that take a doubled step once more when they improve, halve the step
//! when they do not, and give a parameter up at once when the loss does not respond to it;
//! wider scans of a real on a plateau and of a count (with the extent it spans); a tie undone
//! when it stops improving; a pattern move after every sweep that improved; counts restarted
//! at their neighbours after the descent; every number kept within its property's range.
//! Within a budget of rendered programs and, optionally, a deadline.

use std::time::Instant;

use async_trait::async_trait;

use super::RefineError;
use super::literals::{Literal, numeric_literals, with_values};
use super::space::{Parameter, Selection, parameters};

/// What the search did.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchOutcome {
    pub code: String,
    /// The objective of the start program and of the best found (`None`: it does not run).
    pub start_loss: Option<f64>,
    pub best_loss: Option<f64>,
    /// Programs scored, the start program included, and how many of them were turned down
    /// before rendering (they do not count against the budget).
    pub evaluations: u32,
    pub refused: u32,
    /// Numbers in the program, and how many of them the search was allowed to move.
    pub literals: usize,
    pub free: usize,
    /// The numbers it changed: (line, old text, new text).
    pub changes: Vec<(usize, String, String)>,
    /// The deadline ended it before its budget or its convergence did.
    pub out_of_time: bool,
}

/// How a program scored.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Score {
    /// It does not run (or a view could not render).
    Failed,
    /// Its loss; lower is better.
    Loss(f64),
    /// It was turned down before the costly part (the render): its loss would be at least
    /// this, which is no better than the bound it was asked to beat.
    Refused(f64),
}

impl Score {
    fn loss(self) -> Option<f64> {
        match self {
            Score::Failed => None,
            Score::Loss(loss) | Score::Refused(loss) => Some(loss),
        }
    }
}

impl SearchOutcome {
    /// Programs rendered and scored in full: what the budget bounds.
    pub fn rendered(&self) -> u32 {
        self.evaluations - self.refused
    }
}

/// Something that scores programs.
#[async_trait]
pub trait Objective: Send + Sync {
    /// The loss of the start program, which the search begins from (`None`: it does not
    /// run): an objective that compares programs with where they started (what rested, what
    /// stood upright) learns that here.
    async fn start(&self, code: &str) -> Result<Option<f64>, RefineError> {
        Ok(self.score(code, f64::INFINITY).await?.loss())
    }

    /// How `code` scores. When the objective can tell before the costly part that the loss
    /// is at least `beat`, it may answer [`Score::Refused`].
    async fn score(&self, code: &str, beat: f64) -> Result<Score, RefineError>;

    /// Moves worth trying that the objective reads off `code`'s pictures rather than its
    /// loss, each a set of `literals` (by index) with new values; only literals `movable`
    /// says may move. None by default.
    async fn suggest(
        &self,
        code: &str,
        literals: &[Literal],
        movable: &[bool],
    ) -> Result<Vec<Vec<(usize, f64)>>, RefineError> {
        let _ = (code, literals, movable);
        Ok(Vec::new())
    }
}

/// How far a search may go.
#[derive(Debug, Clone)]
pub struct SearchLimits {
    /// Programs it may score in full (rendered), the start program included; programs turned
    /// down before rendering count a quarter each.
    pub budget: u32,
    /// Past this instant it stops and keeps the best so far.
    pub deadline: Option<Instant>,
    pub selection: Selection,
}

impl SearchLimits {
    pub fn budget(budget: u32) -> Self {
        Self {
            budget,
            deadline: None,
            selection: Selection::All,
        }
    }
}

/// Searches the numbers of `start` that `limits` lets move, at most `limits.budget` scored
/// programs.
pub async fn search(
    start: &str,
    objective: &dyn Objective,
    limits: &SearchLimits,
) -> Result<SearchOutcome, RefineError> {
    let literals = numeric_literals(start);
    let start_loss = objective.start(start).await?;
    let parameters = parameters(&literals, &limits.selection);
    let mut search = PatternSearch::new(start, literals, parameters, objective, limits, start_loss);
    // What the pictures suggest goes first (an object carried to the empty spot it belongs
    // in), and once more when the descent has stalled, from where it stands.
    search.try_suggestions().await?;
    search.descend(Some(STALLED)).await?;
    // Counts trade off against sizes and spacings (more, thinner posts look like fewer,
    // thicker ones), so once the descent stalls each count is tried at its neighbours with
    // the reals fitted again; a restart that wins starts another descent.
    while search.has_budget() && search.restart_counts().await? {
        search.descend(Some(STALLED)).await?;
    }
    if search.has_budget() && search.try_suggestions().await? {
        search.descend(Some(STALLED)).await?;
    }
    // What is left of the budget refines every number to its finest step.
    search.descend(None).await?;
    Ok(search.outcome(start_loss))
}

/// One search in progress: the best values found so far (one per literal) and, per
/// parameter, the step it is moved by and whether it is done (frozen).
struct PatternSearch<'a> {
    start: &'a str,
    literals: Vec<Literal>,
    parameters: Vec<Parameter>,
    objective: &'a dyn Objective,
    limits: &'a SearchLimits,
    /// Scored programs so far, the start program included, and those of them refused.
    evaluations: u32,
    refused: u32,
    best: Vec<f64>,
    /// Infinite until a program runs.
    best_loss: f64,
    steps: Vec<f64>,
    frozen: Vec<bool>,
    /// Whether a real has had its wider scan.
    scanned: Vec<bool>,
    /// Per parameter, whether the loss ever responded to it.
    responds: Vec<bool>,
    out_of_time: bool,
}

/// How one parameter's moves went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Moved {
    Improved,
    /// Neither move improved, but the loss changed: the picture responds to it. `plateau`:
    /// by little (the parameter may be far from its place, where the loss is flat).
    Responded {
        plateau: bool,
    },
    /// The loss did not change either way.
    Quiet,
    /// Both moves were refused unrendered: the scene's structure holds it.
    Held,
}

impl<'a> PatternSearch<'a> {
    /// A search from the start program's own values, which cost one evaluation.
    fn new(
        start: &'a str,
        literals: Vec<Literal>,
        parameters: Vec<Parameter>,
        objective: &'a dyn Objective,
        limits: &'a SearchLimits,
        start_loss: Option<f64>,
    ) -> Self {
        let steps = parameters
            .iter()
            .map(|p| initial_step(&literals[p.members[0]]))
            .collect();
        Self {
            start,
            best: literals.iter().map(|l| l.value).collect(),
            frozen: vec![false; parameters.len()],
            scanned: vec![false; parameters.len()],
            responds: vec![false; parameters.len()],
            literals,
            parameters,
            objective,
            limits,
            evaluations: 1,
            refused: 0,
            best_loss: start_loss.unwrap_or(f64::INFINITY),
            steps,
            out_of_time: false,
        }
    }

    fn has_budget(&mut self) -> bool {
        if self
            .limits
            .deadline
            .is_some_and(|deadline| Instant::now() >= deadline)
        {
            self.out_of_time = true;
            return false;
        }
        let spent = 4 * (self.evaluations - self.refused) + self.refused;
        spent < 4 * self.limits.budget
    }

    fn value(&self, p: usize) -> f64 {
        self.best[self.parameters[p].members[0]]
    }

    /// The best values with parameter `p` at `value`.
    fn with(&self, p: usize, value: f64) -> Vec<f64> {
        let mut values = self.best.clone();
        for &member in &self.parameters[p].members {
            values[member] = value;
        }
        values
    }

    /// Sweeps until every parameter is done or the budget is spent; with `stalled`, also
    /// once a sweep lowered the loss by less than that share of it (the budget is better
    /// spent elsewhere before the numbers are refined to their finest steps).
    async fn descend(&mut self, stalled: Option<f64>) -> Result<(), RefineError> {
        while self.has_budget() && self.frozen.iter().any(|f| !f) {
            let sweep_start = self.best.clone();
            let loss_before = self.best_loss;
            self.coordinate_sweep().await?;
            // Pattern move: keep going in the direction the whole sweep moved.
            if self.best != sweep_start && self.has_budget() {
                self.pattern_move(&sweep_start).await?;
            }
            if stalled.is_some_and(|share| loss_before - self.best_loss < share * loss_before) {
                return Ok(());
            }
        }
        Ok(())
    }

    /// Looks at the best program's pictures and takes the best move they suggest, again
    /// from there while a look improves ([`MOST_LOOKS`]); true when one did.
    async fn try_suggestions(&mut self) -> Result<bool, RefineError> {
        let mut improved = false;
        for _ in 0..MOST_LOOKS {
            if !self.look().await? {
                break;
            }
            improved = true;
        }
        Ok(improved)
    }

    /// One look: every move the objective suggests for the best program, each from the best
    /// values alone, and the best of them kept when it beats them (the first that improves
    /// may be one object put in another's place). Looking costs one evaluation when it
    /// suggests any.
    async fn look(&mut self) -> Result<bool, RefineError> {
        if !self.has_budget() || !self.best_loss.is_finite() {
            return Ok(false);
        }
        let mut movable = vec![false; self.literals.len()];
        for parameter in &self.parameters {
            for &member in &parameter.members {
                movable[member] = true;
            }
        }
        let code = with_values(self.start, &self.literals, &self.best);
        let literals = numeric_literals(&code);
        if literals.len() != self.literals.len() {
            return Ok(false);
        }
        let suggestions = self.objective.suggest(&code, &literals, &movable).await?;
        if suggestions.is_empty() {
            return Ok(false);
        }
        self.evaluations += 1;
        let mut winner: Option<(Vec<f64>, f64)> = None;
        for suggestion in suggestions {
            if !self.has_budget() {
                break;
            }
            let mut candidate = self.best.clone();
            for (index, value) in suggestion {
                if movable.get(index) == Some(&true) {
                    candidate[index] = value;
                }
            }
            let candidate = self.within_ranges(candidate);
            let beat = winner.as_ref().map_or(self.best_loss, |(_, loss)| *loss);
            if candidate == self.best {
                continue;
            }
            if let Score::Loss(loss) = self.evaluate(&candidate, beat).await?
                && loss < beat
            {
                winner = Some((candidate, loss));
            }
        }
        let Some((values, loss)) = winner else {
            return Ok(false);
        };
        self.best = values;
        self.best_loss = loss;
        Ok(true)
    }

    /// Tries each integer the loss responds to at its nearest other values, each with a short
    /// descent of the reals from their start steps, and keeps the first restart that beats
    /// the best; true when one did (every parameter is then free again). A restart that
    /// loses is forgotten.
    async fn restart_counts(&mut self) -> Result<bool, RefineError> {
        let counts: Vec<usize> = (0..self.parameters.len())
            .filter(|&p| self.parameters[p].integer && self.responds[p])
            .collect();
        for p in counts {
            for offset in [1.0, -1.0, 2.0, -2.0] {
                let value = self.value(p) + offset;
                if (value < 0.0 && self.value(p) >= 0.0) || !self.has_budget() {
                    continue;
                }
                if self.restart_at(p, value).await? {
                    return Ok(true);
                }
            }
        }
        Ok(false)
    }

    /// One restart: integer `p` at `value`, then the reals descend for at most
    /// [`RESTART_EVALUATIONS`] programs; kept only when it ends below the best loss.
    async fn restart_at(&mut self, p: usize, value: f64) -> Result<bool, RefineError> {
        let saved = (
            self.best.clone(),
            self.best_loss,
            self.steps.clone(),
            self.frozen.clone(),
        );
        let candidate = self.within_ranges(self.with(p, value));
        let Score::Loss(loss) = self.evaluate(&candidate, f64::INFINITY).await? else {
            return Ok(false);
        };
        self.best = candidate;
        self.best_loss = loss;
        for q in 0..self.parameters.len() {
            let real = !self.parameters[q].integer;
            self.frozen[q] = !real;
            if real {
                self.steps[q] = initial_step(&self.literals[self.parameters[q].members[0]]);
            }
        }
        let stop = self.evaluations + RESTART_EVALUATIONS;
        while self.has_budget() && self.evaluations < stop && self.frozen.iter().any(|f| !f) {
            self.coordinate_sweep().await?;
        }
        if self.best_loss < saved.1 {
            self.frozen.fill(false);
            return Ok(true);
        }
        (self.best, self.best_loss, self.steps, self.frozen) = saved;
        Ok(false)
    }

    /// Tries each parameter that is not frozen in turn. One the loss does not respond to is
    /// given up; an integer that responds but whose nearest steps failed is scanned further
    /// (a count's loss is seldom monotone: more, thinner posts can look like fewer, thicker
    /// ones); a tie that failed is undone, its members searched on their own.
    async fn coordinate_sweep(&mut self) -> Result<(), RefineError> {
        let mut p = 0;
        while p < self.parameters.len() {
            if self.frozen[p] {
                p += 1;
                continue;
            }
            let moved = self.step_parameter(p).await?;
            self.responds[p] |= matches!(moved, Moved::Improved | Moved::Responded { .. });
            if moved == Moved::Improved {
                p += 1;
                continue;
            }
            if let Moved::Responded { plateau } = moved
                && self.scan_further(p, plateau).await?
            {
                p += 1;
                continue;
            }
            if self.should_untie(p, moved) {
                self.untie(p);
                continue;
            }
            self.refine_or_freeze(p, moved);
            p += 1;
        }
        Ok(())
    }

    /// Moves parameter `p` by its step, up first; a move that improves is followed by a
    /// doubled step the same way ([`MAX_EXPANSIONS`]).
    async fn step_parameter(&mut self, p: usize) -> Result<Moved, RefineError> {
        let mut responded = false;
        let mut steepest: f64 = 0.0;
        let mut refused = 0;
        for direction in [1.0, -1.0] {
            if !self.has_budget() {
                break;
            }
            let before = self.best_loss;
            let candidate = self.with(p, self.value(p) + direction * self.steps[p]);
            let (improved, score) = self.try_scored(candidate).await?;
            if improved {
                self.keep_going(p, direction).await?;
                return Ok(Moved::Improved);
            }
            refused += u32::from(matches!(score, Score::Refused(_)));
            if let Some(loss) = score.loss() {
                let change = (loss - before).abs() / before.max(1e-9);
                responded |= change > RESPONSE;
                steepest = steepest.max(change);
            }
        }
        Ok(if refused == 2 {
            Moved::Held
        } else if responded {
            Moved::Responded {
                plateau: steepest < PLATEAU,
            }
        } else {
            Moved::Quiet
        })
    }

    /// After a step of `p` improved: doubles the step the same way while that improves (at
    /// most [`MAX_EXPANSIONS`] times), and keeps the last step that worked. An integer goes
    /// on one unit at a time ([`COUNT_STEPS`]): a doubled step from 3 lands on 1 and never
    /// sees 2, and a count of 1 hides every spacing.
    async fn keep_going(&mut self, p: usize, direction: f64) -> Result<(), RefineError> {
        let (times, factor) = if self.parameters[p].integer {
            (COUNT_STEPS, 1.0)
        } else {
            (MAX_EXPANSIONS, 2.0)
        };
        for _ in 0..times {
            if !self.has_budget() {
                break;
            }
            let step = self.steps[p] * factor;
            let candidate = self.with(p, self.value(p) + direction * step);
            if !self.try_values(candidate).await? {
                break;
            }
            self.steps[p] = step;
        }
        Ok(())
    }

    /// Tries parameter `p` at values further away, nearest first, keeping the first that
    /// improves; true when one did. An integer is scanned each time its nearest steps fail
    /// ([`integer_scan`]); a real once, at 2, 4 and 8 steps either way ([`real_scan`]), when
    /// its nearest steps changed the loss by little: a picture's loss is flat while an
    /// object is off its place, so the nearest steps may all fail far from the goal (where
    /// they changed it by much, the parameter sits in a valley).
    async fn scan_further(&mut self, p: usize, plateau: bool) -> Result<bool, RefineError> {
        let values = if self.parameters[p].integer {
            integer_scan(self.value(p))
        } else if plateau && !self.scanned[p] {
            self.scanned[p] = true;
            real_scan(self.value(p), self.steps[p])
        } else {
            return Ok(false);
        };
        for value in values {
            if !self.has_budget() {
                break;
            }
            let candidate = self.with(p, value);
            if self.try_values(candidate).await? {
                return Ok(true);
            }
        }
        if self.parameters[p].integer {
            return self.count_with_extent(p).await;
        }
        Ok(false)
    }

    /// Integer `p` one more or one fewer together with one real scaled in proportion, either
    /// way: a count and what it spans go together (a grid of more cells over a wider size,
    /// more posts at a closer spacing), so a count whose moves alone fail may still be right
    /// with its extent. True when one pair improved.
    async fn count_with_extent(&mut self, p: usize) -> Result<bool, RefineError> {
        let count = self.value(p);
        let reals: Vec<usize> = (0..self.parameters.len())
            .filter(|&q| !self.parameters[q].integer && self.value(q) != 0.0)
            .collect();
        for next in [count + 1.0, count - 1.0] {
            if next < 1.0 || count < 1.0 {
                continue;
            }
            for &q in &reals {
                for ratio in [next / count, count / next] {
                    if !self.has_budget() {
                        return Ok(false);
                    }
                    let mut candidate = self.with(p, next);
                    for &member in &self.parameters[q].members {
                        candidate[member] = self.best[member] * ratio;
                    }
                    if self.try_values(candidate).await? {
                        return Ok(true);
                    }
                }
            }
        }
        Ok(false)
    }

    /// Whether tied parameter `p`, which just failed to improve, is done as a tie: when the
    /// picture responds to it, moving together has gone as far as it helps, and its members
    /// are searched on their own.
    fn should_untie(&self, p: usize, moved: Moved) -> bool {
        self.parameters[p].is_tied() && matches!(moved, Moved::Responded { .. })
    }

    /// Replaces tied parameter `p` by its members, each with the tie's step.
    fn untie(&mut self, p: usize) {
        let members = self.parameters[p].untied();
        let count = members.len();
        let step = self.steps[p];
        self.parameters.splice(p..=p, members);
        self.steps.splice(p..=p, std::iter::repeat_n(step, count));
        self.frozen.splice(p..=p, std::iter::repeat_n(false, count));
        self.scanned.splice(p..=p, std::iter::repeat_n(true, count));
        self.responds
            .splice(p..=p, std::iter::repeat_n(true, count));
    }

    /// After a parameter failed to improve: an integer, one the loss does not respond to or
    /// one the structure holds is done; a real halves its step, and is done once the step is
    /// negligible next to its size.
    fn refine_or_freeze(&mut self, p: usize, moved: Moved) {
        let literal = &self.literals[self.parameters[p].members[0]];
        if self.parameters[p].integer || matches!(moved, Moved::Quiet | Moved::Held) {
            self.frozen[p] = true;
        } else {
            self.steps[p] *= 0.5;
            self.frozen[p] = self.steps[p] < FINEST_STEP * literal.value.abs().max(1.0);
        }
    }

    /// Tries the point as far beyond the best values as the sweep moved them.
    async fn pattern_move(&mut self, sweep_start: &[f64]) -> Result<(), RefineError> {
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
    async fn try_values(&mut self, values: Vec<f64>) -> Result<bool, RefineError> {
        Ok(self.try_scored(values).await?.0)
    }

    /// [`Self::try_values`], with how the values scored.
    async fn try_scored(&mut self, values: Vec<f64>) -> Result<(bool, Score), RefineError> {
        let values = self.within_ranges(values);
        if values == self.best {
            // Held at the edge of its range: nothing to render.
            return Ok((false, Score::Loss(self.best_loss)));
        }
        let score = self.evaluate(&values, self.best_loss).await?;
        match score {
            Score::Loss(loss) if loss < self.best_loss => {
                self.best = values;
                self.best_loss = loss;
                Ok((true, score))
            }
            _ => Ok((false, score)),
        }
    }

    /// Scores the program with `values` against the bound `beat`, counting the evaluation
    /// (and the refusal, when it was turned down unrendered).
    async fn evaluate(&mut self, values: &[f64], beat: f64) -> Result<Score, RefineError> {
        self.evaluations += 1;
        let program = with_values(self.start, &self.literals, values);
        let score = self.objective.score(&program, beat).await?;
        if matches!(score, Score::Refused(_)) {
            self.refused += 1;
        }
        Ok(score)
    }

    /// `values` with every literal that has a range ([`Literal::range`]) kept inside it.
    fn within_ranges(&self, mut values: Vec<f64>) -> Vec<f64> {
        for (value, literal) in values.iter_mut().zip(&self.literals) {
            if let Some((low, high)) = literal.range {
                *value = value.clamp(low, high);
            }
        }
        values
    }

    fn outcome(self, start_loss: Option<f64>) -> SearchOutcome {
        let code = with_values(self.start, &self.literals, &self.best);
        let fitted = numeric_literals(&code);
        let changes = self
            .literals
            .iter()
            .zip(&fitted)
            .filter(|(before, after)| before.value != after.value)
            .map(|(before, after)| {
                (
                    before.line,
                    self.start[before.start..before.end].to_owned(),
                    code[after.start..after.end].to_owned(),
                )
            })
            .collect();
        SearchOutcome {
            code,
            start_loss,
            best_loss: self.best_loss.is_finite().then_some(self.best_loss),
            evaluations: self.evaluations,
            refused: self.refused,
            literals: self.literals.len(),
            free: self.parameters.iter().map(|p| p.members.len()).sum(),
            changes,
            out_of_time: self.out_of_time,
        }
    }
}

/// Integers move by whole units; a real by a quarter of its size, and at least 0.1 so that a
/// zero moves too.
fn initial_step(literal: &Literal) -> f64 {
    if literal.integer {
        1.0
    } else {
        (literal.value.abs() * 0.25).max(0.1)
    }
}

/// A real is done once its step is below this share of its size (of 1, when smaller): half
/// a centimetre on a metre.
const FINEST_STEP: f64 = 5e-3;

/// How many times in a row the search looks at the pictures while looking improves: an
/// object per look, and a second look to correct the first.
const MOST_LOOKS: usize = 3;

/// A sweep that lowers the loss by less than this share of it has stalled: counts are
/// restarted and the pictures looked at again before the rest is refined.
const STALLED: f64 = 0.005;

/// Programs a restart's descent of the reals may score.
const RESTART_EVALUATIONS: u32 = 16;

/// How many times a step that improved is doubled and tried again. Once: more let one
/// parameter run ahead and cover another's error (measured: a metal ring's colour pushed up
/// instead of its metallic down).
const MAX_EXPANSIONS: u32 = 1;

/// How many more units an integer that improved is moved the same way while it improves.
const COUNT_STEPS: u32 = 3;

/// Nearest steps that changed the loss by less than this share of it left the parameter on a
/// plateau: it is scanned further.
const PLATEAU: f64 = 0.15;

/// A move changed the loss by more than this share of it: the picture responds to the
/// parameter (render noise at the eval's samples stays well below).
const RESPONSE: f64 = 1e-4;

/// The values a real is scanned at after its nearest steps failed the first time: 2, 4 and 8
/// steps either way, nearest first.
fn real_scan(value: f64, step: f64) -> Vec<f64> {
    [2.0, -2.0, 4.0, -4.0, 8.0, -8.0]
        .iter()
        .map(|steps| value + steps * step)
        .collect()
}

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

#[cfg(test)]
mod tests {
    use super::*;

    fn values_of(code: &str) -> Vec<f64> {
        numeric_literals(code).iter().map(|l| l.value).collect()
    }

    /// A quadratic bowl: the search must walk to its minimum.
    struct Bowl;

    #[async_trait]
    impl Objective for Bowl {
        async fn score(&self, code: &str, _beat: f64) -> Result<Score, RefineError> {
            let values = values_of(code);
            if values[0] < -50.0 {
                return Ok(Score::Failed);
            }
            Ok(Score::Loss(
                (values[0] - 3.0).powi(2) + (values[1] + 1.25).powi(2) + (values[2] - 4.0).powi(2),
            ))
        }
    }

    /// A count whose nearest steps mislead: one fewer looks a little better than one more,
    /// and the goal is three away.
    struct Fence;

    #[async_trait]
    impl Objective for Fence {
        async fn score(&self, code: &str, _beat: f64) -> Result<Score, RefineError> {
            let posts = values_of(code)[0];
            Ok(Score::Loss(match posts as i64 {
                9 => 0.0,
                5 => 2.9,
                7 => 3.1,
                n => 3.0 + (n - 6).abs() as f64 * 0.05,
            }))
        }
    }

    #[tokio::test]
    async fn a_count_is_scanned_past_a_misleading_nearest_step() {
        let outcome = search("posts = 6\n", &Fence, &SearchLimits::budget(30))
            .await
            .unwrap();
        assert_eq!(outcome.code, "posts = 9\n", "{outcome:?}");
        assert_eq!(outcome.changes, [(1, "6".to_owned(), "9".to_owned())]);
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
        let outcome = search("x = (0.0, 2.0)\nn = 1\n", &Bowl, &SearchLimits::budget(400))
            .await
            .unwrap();
        let values = values_of(&outcome.code);
        assert!(
            (values[0] - 3.0).abs() < 0.01 && (values[1] + 1.25).abs() < 0.01,
            "{}",
            outcome.code
        );
        assert_eq!(values[2], 4.0, "integers move in whole steps");
        assert!(outcome.evaluations <= 400);
        assert!(outcome.best_loss.unwrap() < outcome.start_loss.unwrap());
        let tight = search("x = (0.0, 2.0)\nn = 1\n", &Bowl, &SearchLimits::budget(5))
            .await
            .unwrap();
        assert_eq!(tight.evaluations, 5, "the budget is a hard limit");
    }

    /// Two sides that must differ in the end: 1 and 3.
    struct Sides;

    #[async_trait]
    impl Objective for Sides {
        async fn score(&self, code: &str, _beat: f64) -> Result<Score, RefineError> {
            let values = values_of(code);
            Ok(Score::Loss(
                (values[0] - 1.0).powi(2) + (values[1] - 3.0).powi(2),
            ))
        }
    }

    #[tokio::test]
    async fn a_tie_moves_together_then_comes_undone_when_the_picture_asks() {
        let outcome = search("size = (2.0, 2.0)\n", &Sides, &SearchLimits::budget(200))
            .await
            .unwrap();
        let values = values_of(&outcome.code);
        assert!(
            (values[0] - 1.0).abs() < 0.01 && (values[1] - 3.0).abs() < 0.01,
            "{}",
            outcome.code
        );
    }

    /// The loss responds only to the first number.
    struct OnlyFirst(std::sync::atomic::AtomicU32);

    #[async_trait]
    impl Objective for OnlyFirst {
        async fn score(&self, code: &str, _beat: f64) -> Result<Score, RefineError> {
            self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            Ok(Score::Loss((values_of(code)[0] - 2.0).powi(2)))
        }
    }

    #[tokio::test]
    async fn a_number_the_loss_ignores_costs_one_pair_of_moves_and_pins_are_kept() {
        let objective = OnlyFirst(Default::default());
        let outcome = search(
            "a = 0.0\nb = 5.0\nc = 7.0  # viga: keep\n",
            &objective,
            &SearchLimits::budget(1000),
        )
        .await
        .unwrap();
        assert!((values_of(&outcome.code)[0] - 2.0).abs() < 0.01);
        assert_eq!(outcome.free, 2, "c is pinned");
        assert!(outcome.code.ends_with("c = 7.0  # viga: keep\n"));
        assert!(
            outcome.changes.iter().all(|(line, _, _)| *line == 1),
            "{:?}",
            outcome.changes
        );
        // b: two quiet moves, then given up; the rest is a's walk and its refinement.
        assert!(outcome.evaluations < 60, "{}", outcome.evaluations);
    }

    /// Cells of a grid whose size must stay half a unit per cell: a count alone or a size
    /// alone only makes it worse.
    struct Grid;

    #[async_trait]
    impl Objective for Grid {
        async fn score(&self, code: &str, _beat: f64) -> Result<Score, RefineError> {
            let values = values_of(code);
            let (cells, size) = (values[0], values[1]);
            Ok(Score::Loss(
                (cells - 5.0).abs() + 10.0 * (size - 0.5 * cells).abs(),
            ))
        }
    }

    #[tokio::test]
    async fn a_count_moves_with_the_extent_it_spans() {
        let outcome = search(
            "cells = 3
size = 1.5
",
            &Grid,
            &SearchLimits::budget(120),
        )
        .await
        .unwrap();
        let values = values_of(&outcome.code);
        assert_eq!(values[0], 5.0, "{}", outcome.code);
        assert!((values[1] - 2.5).abs() < 1e-9, "{}", outcome.code);
    }

    /// Cubes of a stack whose goal is 2: one cube alone looks better than three (it hides
    /// what the others should show), and none is worse again.
    struct Stack;

    #[async_trait]
    impl Objective for Stack {
        async fn score(&self, code: &str, _beat: f64) -> Result<Score, RefineError> {
            Ok(Score::Loss(match values_of(code)[0] as i64 {
                2 => 0.0,
                1 => 0.5,
                3 => 0.8,
                4 => 1.0,
                _ => 1.2,
            }))
        }
    }

    #[tokio::test]
    async fn a_count_that_improved_goes_on_one_unit_at_a_time() {
        // The start, 5, 3, then 2: a doubled step from 3 would have landed on 1.
        let outcome = search("cubes = 4\n", &Stack, &SearchLimits::budget(4))
            .await
            .unwrap();
        assert_eq!(outcome.code, "cubes = 2\n", "{outcome:?}");
    }

    /// A loss that is flat unless x is near 5; the objective suggests 4.9.
    struct Suggests;

    #[async_trait]
    impl Objective for Suggests {
        async fn score(&self, code: &str, _beat: f64) -> Result<Score, RefineError> {
            let x = values_of(code)[0];
            Ok(Score::Loss(if (x - 5.0).abs() < 0.3 {
                (x - 5.0).powi(2)
            } else {
                1.0
            }))
        }

        async fn suggest(
            &self,
            _code: &str,
            literals: &[Literal],
            movable: &[bool],
        ) -> Result<Vec<Vec<(usize, f64)>>, RefineError> {
            assert_eq!(literals.len(), 2);
            assert_eq!(movable, [true, false], "the pinned number may not move");
            Ok(vec![vec![(0, 4.9)]])
        }
    }

    #[tokio::test]
    async fn a_suggested_move_crosses_a_plateau_the_descent_cannot() {
        let outcome = search(
            "x = 0.0\ny = 1.0  # viga: keep\n",
            &Suggests,
            &SearchLimits::budget(40),
        )
        .await
        .unwrap();
        let x = values_of(&outcome.code)[0];
        assert!((x - 5.0).abs() < 0.01, "{}", outcome.code);
        let plain = search("x = 0.0\n", &PlateauOnly, &SearchLimits::budget(40))
            .await
            .unwrap();
        assert_eq!(
            plain.best_loss,
            Some(1.0),
            "without the suggestion it stays on the plateau"
        );
    }

    /// [`Suggests`]'s loss without its suggestion.
    struct PlateauOnly;

    #[async_trait]
    impl Objective for PlateauOnly {
        async fn score(&self, code: &str, beat: f64) -> Result<Score, RefineError> {
            Suggests.score(code, beat).await
        }
    }

    /// Any change of the second number breaks the scene's structure: refused unrendered.
    struct Held;

    #[async_trait]
    impl Objective for Held {
        async fn score(&self, code: &str, beat: f64) -> Result<Score, RefineError> {
            let values = values_of(code);
            if values[1] != 0.5 {
                return Ok(Score::Refused(beat + 1.0));
            }
            Ok(Score::Loss((values[0] - 1.0).powi(2)))
        }
    }

    #[tokio::test]
    async fn a_number_the_structure_holds_is_given_up_after_one_refused_pair() {
        let outcome = search(
            "x = 0.0
z = 0.5
",
            &Held,
            &SearchLimits::budget(100),
        )
        .await
        .unwrap();
        assert!((values_of(&outcome.code)[0] - 1.0).abs() < 0.01);
        assert_eq!(values_of(&outcome.code)[1], 0.5);
        assert_eq!(outcome.refused, 2, "{outcome:?}");
        assert_eq!(outcome.rendered(), outcome.evaluations - 2);
    }
}
