use std::time::Duration;

use serde_json::json;
use viga_provider::{
    ErrorKind, ImageEncoding, ProviderConfig, ProviderKind, Secret, build_provider_with_env,
};

fn parse(value: serde_json::Value) -> Result<ProviderConfig, String> {
    serde_json::from_value(value).map_err(|err| err.to_string())
}

fn config_error(config: &ProviderConfig, env: &[(&str, &str)]) -> String {
    let err = build_provider_with_env(config, |name| {
        env.iter()
            .find(|(key, _)| *key == name)
            .map(|(_, value)| (*value).to_owned())
    })
    .err()
    .expect("the config must be refused");
    assert_eq!(err.kind(), ErrorKind::Config, "{err}");
    err.to_string()
}

#[test]
fn a_minimal_config_gets_the_documented_defaults() {
    let config = parse(json!({"kind": "anthropic", "model": "claude-sonnet-4-5"})).unwrap();
    assert_eq!(config.base_url, None);
    assert_eq!(config.api_key_env, None);
    assert_eq!(config.timeouts.connect, Duration::from_secs(15));
    assert_eq!(config.timeouts.request, Duration::from_secs(600));
    assert_eq!(config.timeouts.stream_idle, Duration::from_secs(300));
    assert_eq!(config.retry.max_attempts, 5);
    assert_eq!(config.retry.initial_backoff, Duration::from_secs(1));
    assert_eq!(config.retry.max_backoff, Duration::from_secs(30));
    assert_eq!(config.retry.max_total_wait, Duration::from_secs(120));
    assert_eq!(config.images.max_side, 1024);
    assert_eq!(config.images.format, ImageEncoding::Png);
    assert_eq!(config.images.jpeg_quality, 85);
    assert_eq!(
        config,
        ProviderConfig::new(ProviderKind::Anthropic, "claude-sonnet-4-5")
    );
}

#[test]
fn every_field_round_trips_in_seconds() {
    let written = json!({
        "kind": "openai_compatible",
        "model": "llava",
        "base_url": "http://localhost:11434/v1",
        "api_key_env": "OLLAMA_KEY",
        "timeouts": {"connect_secs": 2.5, "request_secs": 60.0, "stream_idle_secs": 30.0, "stream_total_secs": 900.0},
        "retry": {"max_attempts": 2, "initial_backoff_secs": 0.25, "max_backoff_secs": 4.0, "max_total_wait_secs": 10.0},
        "images": {"max_side": 768, "format": "jpeg", "jpeg_quality": 90},
        "tool_calling": true
    });
    let config = parse(written.clone()).unwrap();
    assert_eq!(config.timeouts.connect, Duration::from_millis(2500));
    assert_eq!(config.retry.initial_backoff, Duration::from_millis(250));
    assert_eq!(config.images.format, ImageEncoding::Jpeg);
    assert_eq!(serde_json::to_value(&config).unwrap(), written);
}

#[test]
fn tool_calling_follows_the_kind_unless_the_config_says() {
    let of = |value: serde_json::Value| parse(value).unwrap().tool_calling();
    assert_eq!(of(json!({"kind": "openai", "model": "m"})), Some(true));
    assert_eq!(of(json!({"kind": "anthropic", "model": "m"})), Some(true));
    assert_eq!(of(json!({"kind": "gemini", "model": "m"})), Some(true));
    let local =
        json!({"kind": "openai_compatible", "model": "m", "base_url": "http://localhost:1/v1"});
    assert_eq!(of(local.clone()), Some(false));
    let mut capable = local;
    capable["tool_calling"] = json!(true);
    assert_eq!(of(capable), Some(true));
    assert_eq!(
        of(json!({"kind": "openai", "model": "m", "tool_calling": false})),
        Some(false)
    );
    // A script answers with whatever it holds: its reader decides.
    assert_eq!(of(json!({"kind": "scripted", "script": "s.json"})), None);
    assert_eq!(
        of(json!({"kind": "scripted", "script": "s.json", "tool_calling": true})),
        Some(true)
    );
    let unset = serde_json::to_value(ProviderConfig::new(ProviderKind::OpenAi, "m")).unwrap();
    assert!(unset.get("tool_calling").is_none(), "{unset}");
}

#[test]
fn typos_negative_durations_and_unknown_kinds_are_refused() {
    let typo = parse(json!({"kind": "openai", "model": "gpt-4o", "timeout": {}})).unwrap_err();
    assert!(typo.contains("unknown field `timeout`"), "{typo}");
    let negative = parse(json!({"kind": "openai", "model": "m", "timeouts": {"connect_secs": -1}}))
        .unwrap_err();
    assert!(
        negative.contains("non-negative number of seconds"),
        "{negative}"
    );
    let kind = parse(json!({"kind": "mistral", "model": "m"})).unwrap_err();
    assert!(kind.contains("unknown variant `mistral`"), "{kind}");
}

#[test]
fn a_key_in_the_config_file_is_refused_with_advice_and_not_echoed() {
    let err =
        parse(json!({"kind": "gemini", "model": "gemini-2.5-flash", "api_key": "AIza-secret"}))
            .unwrap_err();
    assert!(
        err.contains("API keys are not read from config files"),
        "{err}"
    );
    assert!(err.contains("export GEMINI_API_KEY=<key>"), "{err}");
    assert!(!err.contains("AIza-secret"), "{err}");
}

#[test]
fn a_missing_key_names_the_variable_to_set() {
    let openai = ProviderConfig::new(ProviderKind::OpenAi, "gpt-4o");
    let err = config_error(&openai, &[]);
    assert!(
        err.contains("OPENAI_API_KEY is not set: export OPENAI_API_KEY="),
        "{err}"
    );
    assert!(
        config_error(
            &ProviderConfig::new(ProviderKind::Anthropic, "m"),
            &[("ANTHROPIC_API_KEY", "  ")]
        )
        .contains("ANTHROPIC_API_KEY is not set")
    );
    assert!(
        config_error(&ProviderConfig::new(ProviderKind::Gemini, "m"), &[])
            .contains("GEMINI_API_KEY")
    );
    let custom = ProviderConfig {
        api_key_env: Some("WORK_OPENAI_KEY".to_owned()),
        ..openai.clone()
    };
    let err = config_error(&custom, &[("OPENAI_API_KEY", "sk-other")]);
    assert!(err.contains("WORK_OPENAI_KEY is not set"), "{err}");
    let provider = build_provider_with_env(&openai, |name| {
        (name == "OPENAI_API_KEY").then(|| "sk-x".to_owned())
    })
    .unwrap();
    assert_eq!((provider.name(), provider.model()), ("openai", "gpt-4o"));
}

#[test]
fn incomplete_or_impossible_configs_say_what_to_fix() {
    let compatible = ProviderConfig::new(ProviderKind::OpenAiCompatible, "llava");
    assert!(config_error(&compatible, &[]).contains("needs `base_url`"));
    let ftp = ProviderConfig {
        base_url: Some("ftp://example".to_owned()),
        ..compatible.clone()
    };
    assert!(config_error(&ftp, &[]).contains("must start with http:// or https://"));
    let unnamed = ProviderConfig::new(ProviderKind::Anthropic, " ");
    assert!(config_error(&unnamed, &[("ANTHROPIC_API_KEY", "k")]).contains("`model` is empty"));
    let mut no_attempts = ProviderConfig::new(ProviderKind::Anthropic, "m");
    no_attempts.retry.max_attempts = 0;
    assert!(config_error(&no_attempts, &[("ANTHROPIC_API_KEY", "k")]).contains("max_attempts"));
    let mut zero_timeout = ProviderConfig::new(ProviderKind::Anthropic, "m");
    zero_timeout.timeouts.stream_idle = Duration::ZERO;
    assert!(
        config_error(&zero_timeout, &[("ANTHROPIC_API_KEY", "k")]).contains("greater than zero")
    );
    let key_with_newline = config_error(
        &ProviderConfig::new(ProviderKind::Anthropic, "m"),
        &[("ANTHROPIC_API_KEY", "sk-a\nb")],
    );
    assert!(
        key_with_newline.contains("cannot go in an HTTP header")
            && !key_with_newline.contains("sk-a"),
        "{key_with_newline}"
    );
    let scripted = ProviderConfig::new(ProviderKind::Scripted, "");
    assert!(config_error(&scripted, &[]).contains("needs `script`"));
}

#[test]
fn a_scripted_config_builds_the_scripted_provider() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("demo.json");
    std::fs::write(
        &path,
        r#"{"turns": [{"response": {"text": "hi", "finish_reason": "stop"}}]}"#,
    )
    .unwrap();
    let config = parse(json!({"kind": "scripted", "script": path})).unwrap();
    let provider = build_provider_with_env(&config, |_| None).unwrap();
    assert_eq!(
        (provider.name(), provider.model()),
        ("scripted", "scripted:demo")
    );
}

#[test]
fn secrets_never_show_in_debug_output() {
    let secret = Secret::new("sk-live-abcdef");
    assert_eq!(format!("{secret:?}"), "Secret(<redacted>)");
    assert_eq!(format!("{:?}", Some(&secret)), "Some(Secret(<redacted>))");
    assert_eq!(secret.expose(), "sk-live-abcdef");
}

/// A run records the settings its provider was built from, so `resume` can build the same
/// provider: every built provider keeps them, and one made by hand has none.
#[test]
fn a_built_provider_keeps_the_settings_it_was_built_from() {
    let compatible = parse(json!({
        "kind": "openai_compatible",
        "model": "llava",
        "base_url": "http://localhost:11434/v1",
        "api_key_env": "OLLAMA_KEY"
    }))
    .unwrap();
    let provider = build_provider_with_env(&compatible, |_| Some("k".to_owned())).unwrap();
    assert_eq!(provider.config(), Some(&compatible));
    assert_eq!(
        (provider.name(), provider.model()),
        ("openai_compatible", "llava")
    );
    let by_hand = viga_provider::ScriptedProvider::new(
        "scripted:by-hand",
        viga_provider::scripted::Script {
            description: String::new(),
            turns: Vec::new(),
        },
    );
    assert_eq!(viga_provider::Provider::config(&by_hand), None);
}
