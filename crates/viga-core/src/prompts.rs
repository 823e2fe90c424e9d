//! Prompt templates, loaded at run time: each domain has its defaults (a Blender scene's are
//! compiled in from this crate's `prompts/`), and a folder given by the user replaces any of
//! them by file name.

use std::path::Path;

use crate::CoreError;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prompts {
    pub plan: String,
    pub generator: String,
    /// The generator's system prompt when it has tools (seed 001) instead of answering
    /// with one fenced program.
    pub generator_tools: String,
    /// Seed 002's fast-retry prompt; `{error_message}` is replaced.
    pub fast_fix: String,
    pub verifier: String,
    /// `{instruction}`, `{location}`, `{target}`, `{distance}`, `{azimuth}`, `{elevation}`.
    pub investigate: String,
}

impl Default for Prompts {
    fn default() -> Self {
        Self {
            plan: include_str!("../prompts/plan.md").to_owned(),
            generator: include_str!("../prompts/generator.md").to_owned(),
            generator_tools: include_str!("../prompts/generator_tools.md").to_owned(),
            fast_fix: include_str!("../prompts/fast_fix.md").to_owned(),
            verifier: include_str!("../prompts/verifier.md").to_owned(),
            investigate: include_str!("../prompts/investigate.md").to_owned(),
        }
    }
}

impl Prompts {
    /// `defaults` (a domain's), with every `<name>.md` found in `folder` replacing its
    /// default.
    pub fn load(folder: Option<&Path>, defaults: Self) -> Result<Self, CoreError> {
        let mut prompts = defaults;
        let Some(folder) = folder else {
            return Ok(prompts);
        };
        if !folder.is_dir() {
            return Err(CoreError::Config(format!(
                "prompt folder {} does not exist; pass a folder holding plan.md, generator.md, generator_tools.md, fast_fix.md, verifier.md or investigate.md",
                folder.display()
            )));
        }
        for (name, slot) in [
            ("plan.md", &mut prompts.plan),
            ("generator.md", &mut prompts.generator),
            ("generator_tools.md", &mut prompts.generator_tools),
            ("fast_fix.md", &mut prompts.fast_fix),
            ("verifier.md", &mut prompts.verifier),
            ("investigate.md", &mut prompts.investigate),
        ] {
            let path = folder.join(name);
            if path.exists() {
                *slot = std::fs::read_to_string(&path).map_err(|err| {
                    CoreError::Config(format!("cannot read prompt {}: {err}", path.display()))
                })?;
            }
        }
        Ok(prompts)
    }
}

/// Replaces `{key}` placeholders.
pub fn fill(template: &str, values: &[(&str, String)]) -> String {
    values
        .iter()
        .fold(template.to_owned(), |text, (key, value)| {
            text.replace(&format!("{{{key}}}"), value)
        })
}
