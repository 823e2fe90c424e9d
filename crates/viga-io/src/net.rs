//! What every HTTP client of viga needs, whoever builds it (the provider adapters here, the
//! Poly Haven asset source in viga-skills): the TLS crypto provider installed, and whether a
//! server is on this machine (a local server is reached without the proxy).

use std::sync::Once;

/// reqwest is built with `rustls-no-provider` so that the ring crypto provider replaces the
/// default aws-lc-rs (which doubles a cold build); rustls then needs one installed per
/// process before the first client is built.
pub fn install_crypto_provider() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        // An error means the process already installed a provider; reqwest uses that one.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// Whether `url` names this machine (`localhost`, 127.0.0.0/8, `[::1]`).
pub fn is_loopback(url: &url::Url) -> bool {
    let Some(host) = url.host_str() else {
        return false;
    };
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    bare.parse::<std::net::IpAddr>()
        .map_or(host.eq_ignore_ascii_case("localhost"), |ip| {
            ip.is_loopback()
        })
}

/// An error and its causes on one line: reqwest's own message alone rarely names the cause.
pub fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}
