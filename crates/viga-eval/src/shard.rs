//! Deterministic, disjoint shards: `--shard i/n` (0 <= i < n) takes every n-th instance of
//! the sorted selection, starting at the i-th. Every shard of one job must be given the same
//! data and selection; then the shards are disjoint and together cover it exactly, which is
//! what a Slurm job array (`$SLURM_ARRAY_TASK_ID`) or a Kubernetes Indexed Job
//! (`$JOB_COMPLETION_INDEX`, 0-based) needs.

use std::fmt;
use std::str::FromStr;

use crate::EvalError;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub index: usize,
    pub count: usize,
}

impl Shard {
    /// The whole selection.
    pub const ALL: Shard = Shard { index: 0, count: 1 };

    /// Round-robin rather than contiguous blocks, so each shard gets a mix of tasks and the
    /// shards finish at about the same time.
    pub fn select<T>(self, items: Vec<T>) -> Vec<T> {
        items
            .into_iter()
            .enumerate()
            .filter(|(position, _)| position % self.count == self.index)
            .map(|(_, item)| item)
            .collect()
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl FromStr for Shard {
    type Err = EvalError;

    fn from_str(text: &str) -> Result<Self, EvalError> {
        let bad = |why: &str| EvalError::BadShard {
            spec: text.to_owned(),
            why: why.to_owned(),
        };
        let (index, count) = text
            .split_once('/')
            .ok_or_else(|| bad("expected i/n, e.g. 0/4"))?;
        let index: usize = index
            .trim()
            .parse()
            .map_err(|_| bad("i is not a non-negative integer"))?;
        let count: usize = count
            .trim()
            .parse()
            .map_err(|_| bad("n is not a positive integer"))?;
        if count == 0 {
            return Err(bad("n must be at least 1"));
        }
        if index >= count {
            return Err(bad("i counts from 0 and must be less than n"));
        }
        Ok(Shard { index, count })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_are_disjoint_and_cover_everything() {
        let items: Vec<u32> = (0..17).collect();
        for count in 1..6 {
            let mut seen = Vec::new();
            for index in 0..count {
                let shard: Shard = format!("{index}/{count}").parse().unwrap();
                let part = shard.select(items.clone());
                // Balanced to within one instance.
                assert!(part.len() >= 17 / count && part.len() <= 17 / count + 1);
                seen.extend(part);
            }
            seen.sort_unstable();
            assert_eq!(seen, items, "{count} shards");
        }
    }

    #[test]
    fn bad_specs_are_refused_with_the_reason() {
        for (spec, why) in [
            ("3/2", "less than n"),
            ("2/2", "less than n"),
            ("0/0", "at least 1"),
            ("1", "expected i/n"),
            ("-1/2", "non-negative"),
            ("a/b", "non-negative"),
        ] {
            let err = spec.parse::<Shard>().unwrap_err().to_string();
            assert!(err.contains(spec) && err.contains(why), "{spec}: {err}");
        }
    }
}
