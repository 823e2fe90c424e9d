//! Evaluation set-up: from a front end's choices to a benchmark run.
