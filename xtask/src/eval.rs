//! `cargo xtask eval …`: the evaluation front end is `viga eval` (in the product binary);
//! this forwards to it, except `make-mini` and `make-bench-mini`, which regenerate the
//! BlenderGym and BlenderBench mini-suites, fixtures of this repository, and `make-fresh`,
//! which makes new random BlenderGym-layout instances with four cameras (by seed).

use std::path::PathBuf;

use anyhow::{Context as _, Result};
use viga_locate::BlenderLauncher;

use crate::blender::run_script;

/// What both mini-suite scripts use, run in front of either (see its docstring).
const MINI_SCENES: &str = include_str!("../../fixtures/mini_scenes.py");

/// A mini-suite's generator script and its fixture folder.
struct MiniSuite {
    script: &'static str,
    dir: &'static str,
}

const GYM_MINI: MiniSuite = MiniSuite {
    script: include_str!("../../fixtures/blendergym-mini/make_mini.py"),
    dir: "fixtures/blendergym-mini",
};
const GYM_FRESH: MiniSuite = MiniSuite {
    script: include_str!("../../fixtures/blendergym-fresh/make_fresh.py"),
    dir: "output/blendergym-fresh",
};
const BENCH_MINI: MiniSuite = MiniSuite {
    script: include_str!("../../fixtures/blenderbench-mini/make_mini.py"),
    dir: "fixtures/blenderbench-mini",
};

/// `eval make-mini|make-bench-mini|make-fresh [--out DIR] [--size N] [--samples N]` (and
/// `make-fresh`'s `--seed N --per-task K`), or any `viga eval` command.
pub fn run(args: &[String], launcher: impl FnOnce() -> Result<BlenderLauncher>) -> Result<()> {
    let mini = match args.first().map(String::as_str) {
        Some("make-mini") => Some(GYM_MINI),
        Some("make-bench-mini") => Some(BENCH_MINI),
        Some("make-fresh") => Some(GYM_FRESH),
        _ => None,
    };
    let Some(mini) = mini else {
        // N-CLIP's network (candle) is built only when asked for: --clip-weights.
        let features: &[&str] = if args.iter().any(|a| a.starts_with("--clip-weights")) {
            &["--features", "clip"]
        } else {
            &[]
        };
        launcher()?;
        // The eval profile optimises N-CLIP and the Chamfer distance (Cargo.toml says why).
        let mut cargo_args = vec!["run", "--profile", "eval", "--package", "viga"];
        cargo_args.extend(features);
        cargo_args.extend(["--", "eval"]);
        return crate::cargo(&cargo_args, args);
    };
    let mut out = crate::setup::workspace_root().join(mini.dir);
    let (mut size, mut samples) = (64u32, 16u32);
    // make-fresh only: which random instances, and how many per task.
    let (mut seed, mut per_task) = (1u64, 2u32);
    let mut rest = args[1..].iter();
    while let Some(flag) = rest.next() {
        let value = rest
            .next()
            .with_context(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--out" => out = PathBuf::from(value),
            "--size" => size = value.parse().context("--size takes a number of pixels")?,
            "--samples" => samples = value.parse().context("--samples takes a number")?,
            "--seed" if args[0] == "make-fresh" => {
                seed = value.parse().context("--seed takes a whole number")?;
            }
            "--per-task" if args[0] == "make-fresh" => {
                per_task = value.parse().context("--per-task takes a number")?;
            }
            other => anyhow::bail!(
                "unknown {} flag {other}; use --out, --size, --samples{}",
                args[0],
                if args[0] == "make-fresh" {
                    ", --seed, --per-task"
                } else {
                    ""
                }
            ),
        }
    }
    run_script(
        &launcher()?,
        &format!("{MINI_SCENES}\n{}", mini.script),
        &format!("{}.py", args[0]),
        &[
            out.clone().into(),
            size.to_string().into(),
            samples.to_string().into(),
            seed.to_string().into(),
            per_task.to_string().into(),
        ],
    )?;
    println!("instances written to {}", out.display());
    Ok(())
}
