//! `scores.json`: photometric loss against the target, per view per iteration.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Scores {
    /// What the numbers are (lower is better).
    pub metric: String,
    pub iterations: Vec<IterationScores>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct IterationScores {
    pub index: u32,
    /// View (camera name) to loss.
    pub views: BTreeMap<String, f64>,
    /// Mean over views.
    pub mean: f64,
}

impl Default for Scores {
    fn default() -> Self {
        Self::new()
    }
}

impl Scores {
    pub fn new() -> Self {
        Self {
            metric: "photometric_loss (BlenderGym PL: mean squared RGB difference in [0, 1])"
                .to_owned(),
            iterations: Vec::new(),
        }
    }

    pub fn record(&mut self, index: u32, view: &str, loss: f64) {
        let position = match self.iterations.iter().position(|s| s.index == index) {
            Some(position) => position,
            None => {
                self.iterations.push(IterationScores {
                    index,
                    views: BTreeMap::new(),
                    mean: 0.0,
                });
                self.iterations.len() - 1
            }
        };
        let entry = &mut self.iterations[position];
        entry.views.insert(view.to_owned(), loss);
        entry.mean = entry.views.values().sum::<f64>() / entry.views.len() as f64;
    }
}
