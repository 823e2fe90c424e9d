//! The one provider factory every command uses: a front end's choices, then the settings a
//! run folder saved, then the defaults; the key from the environment, else from the key
//! store (`viga key set`).

use std::path::PathBuf;
use std::sync::Arc;

use viga_core::folder::SavedProvider;
use viga_keys::KeyStore;
use viga_provider::{Provider, ProviderConfig, ProviderKind, build_provider_with_env};

use crate::AppError;

/// What a person chose for the model, each `None` when not chosen.
#[derive(Debug, Clone, Default)]
pub struct ProviderChoice {
    /// A provider settings file that replaces everything else.
    pub config_file: Option<PathBuf>,
    /// The provider kind's name (`openai`, `anthropic`, `gemini`, `openai_compatible`,
    /// `scripted`); `openai` when nothing else says.
    pub kind: Option<String>,
    pub model: Option<String>,
    pub base_url: Option<String>,
    /// The variable the API key is read from.
    pub api_key_env: Option<String>,
    /// A scripted session's file.
    pub script: Option<PathBuf>,
}

impl ProviderChoice {
    /// Whether the choice names a provider of its own (so settings a run folder saved are
    /// not used).
    pub fn names_a_provider(&self) -> bool {
        self.kind.is_some() || self.config_file.is_some()
    }
}

/// The provider settings `choice` makes, over `saved` (a run folder's) when the choice
/// names no provider of its own.
pub fn settings(
    choice: &ProviderChoice,
    saved: Option<ProviderConfig>,
) -> Result<ProviderConfig, AppError> {
    if let Some(path) = &choice.config_file {
        // A flag's file that cannot be read is a usage error, as any bad flag value.
        let text = std::fs::read_to_string(path)
            .map_err(|err| AppError::Config(format!("cannot read {}: {err}", path.display())))?;
        return serde_json::from_str(&text).map_err(|err| {
            AppError::Config(format!(
                "{} is not a valid provider config: {err}",
                path.display()
            ))
        });
    }
    let mut config = match (&choice.kind, saved) {
        (None, Some(saved)) => saved,
        (kind, _) => {
            let kind = kind.as_deref().unwrap_or("openai");
            let kind = ProviderKind::ALL
                .into_iter()
                .find(|known| known.name() == kind)
                .ok_or_else(|| {
                    let known: Vec<&str> = ProviderKind::ALL.iter().map(|k| k.name()).collect();
                    AppError::Config(format!(
                        "unknown provider {kind:?}; use one of {}",
                        known.join(", ")
                    ))
                })?;
            ProviderConfig::new(kind, choice.model.clone().unwrap_or_default())
        }
    };
    if let Some(model) = &choice.model {
        config.model.clone_from(model);
    }
    if let Some(url) = &choice.base_url {
        config.base_url = Some(url.clone());
    }
    if let Some(var) = &choice.api_key_env {
        config.api_key_env = Some(var.clone());
    }
    if let Some(script) = &choice.script {
        config.script = Some(script.clone());
    }
    Ok(config)
}

/// The provider `settings` describe, its key from the environment or, when the variable is
/// not set, from the key store. A store that cannot be read is said with the missing key.
pub fn build(settings: &ProviderConfig) -> Result<Arc<dyn Provider>, AppError> {
    build_with_env(settings, |name| std::env::var(name).ok())
}

/// [`build`] with the environment read through `env` (tests give their own).
pub fn build_with_env(
    settings: &ProviderConfig,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Arc<dyn Provider>, AppError> {
    let problem = std::cell::RefCell::new(None);
    let built = build_provider_with_env(settings, |name| {
        if let Some(value) = env(name).filter(|v| !v.trim().is_empty()) {
            return Some(value);
        }
        match KeyStore::from_environment().and_then(|store| store.get(name)) {
            Ok(found) => found.map(|(key, _)| key),
            Err(err) => {
                *problem.borrow_mut() = Some(err);
                None
            }
        }
    });
    match (built, problem.into_inner()) {
        (Ok(provider), _) => Ok(provider),
        (Err(error), Some(store)) => Err(AppError::ProviderWithoutStore {
            error: Box::new(error),
            store: Box::new(store),
        }),
        (Err(error), None) => Err(error.into()),
    }
}

/// [`settings`] then [`build`].
pub fn chosen(
    choice: &ProviderChoice,
    saved: Option<ProviderConfig>,
) -> Result<(ProviderConfig, Arc<dyn Provider>), AppError> {
    let settings = settings(choice, saved)?;
    let provider = build(&settings)?;
    Ok((settings, provider))
}

/// What a run folder saved that resume does not use unless `choice` gives it anew (only the
/// provider's own settings are trusted: [`SavedProvider`]), in words.
pub fn unused_saved_settings(saved: &SavedProvider, choice: &ProviderChoice) -> Vec<String> {
    let mut said = Vec::new();
    // Debug-quoted: the text is the folder's, and may hold terminal escapes.
    if let (Some(url), None) = (&saved.untrusted_base_url, &choice.base_url) {
        said.push(format!(
            "not using the base URL {url:?} saved in the run folder; give it with --base-url to use it"
        ));
    }
    if let (Some(variable), None) = (&saved.untrusted_key_env, &choice.api_key_env) {
        said.push(format!(
            "not reading the key variable {variable:?} the run folder names; give it with --api-key-env to use it"
        ));
    }
    said
}
