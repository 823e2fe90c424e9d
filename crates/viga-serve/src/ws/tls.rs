//! Where the server listens and how: TLS (rustls with ring) from a PEM certificate chain and
//! key, or plain TCP. Plain is refused on any address but loopback unless asked for by name:
//! tokens, requests and scenes would cross the network readable by anyone on the way.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use super::GatewayError;
use super::credentials::shared_mode;

/// The PEM files of the server's certificate chain and private key.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    pub certificate: PathBuf,
    pub key: PathBuf,
}

/// How the server may be reached.
#[derive(Debug, Clone, Default)]
pub struct ListenSecurity {
    /// Serve TLS (`wss://`, `https://`) with these files.
    pub tls: Option<TlsFiles>,
    /// Serve plain WebSocket on an address other machines can reach (behind a TLS proxy on
    /// the same host, say). Without it such an address is refused.
    pub plain_on_public_address: bool,
}

/// A bound listener and, for TLS, its acceptor.
pub struct Listener {
    pub(super) tcp: TcpListener,
    pub(super) tls: Option<TlsAcceptor>,
}

impl std::fmt::Debug for Listener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Listener")
            .field("address", &self.tcp.local_addr().ok())
            .field("tls", &self.tls.is_some())
            .finish()
    }
}

impl Listener {
    /// Binds `address` after checking the security asked for: TLS files that load, or plain
    /// only on loopback unless `plain_on_public_address`.
    pub async fn bind(
        address: SocketAddr,
        security: &ListenSecurity,
    ) -> Result<Self, GatewayError> {
        let tls = match &security.tls {
            Some(files) => Some(acceptor(files)?),
            None if address.ip().is_loopback() || security.plain_on_public_address => None,
            None => return Err(GatewayError::PlainOnPublicAddress { address }),
        };
        let tcp = TcpListener::bind(address)
            .await
            .map_err(|source| GatewayError::Bind { address, source })?;
        Ok(Self { tcp, tls })
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.tcp.local_addr()
    }

    /// `ws` or `wss`: how clients reach it.
    pub fn scheme(&self) -> &'static str {
        if self.tls.is_some() { "wss" } else { "ws" }
    }
}

fn tls_error(path: &Path, problem: impl std::fmt::Display) -> GatewayError {
    GatewayError::Tls {
        path: path.to_owned(),
        problem: problem.to_string(),
    }
}

/// A TLS acceptor for the files; a key file other users may read is refused.
fn acceptor(files: &TlsFiles) -> Result<TlsAcceptor, GatewayError> {
    let key_metadata = std::fs::metadata(&files.key).map_err(|err| tls_error(&files.key, err))?;
    if let Some(mode) = shared_mode(&key_metadata) {
        return Err(tls_error(
            &files.key,
            format!(
                "other users may read or change this private key (mode {mode:o}); make it yours alone with `chmod 600`"
            ),
        ));
    }
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&files.certificate)
        .map_err(|err| tls_error(&files.certificate, err))?
        .collect::<Result<_, _>>()
        .map_err(|err| tls_error(&files.certificate, err))?;
    if chain.is_empty() {
        return Err(tls_error(
            &files.certificate,
            "holds no PEM certificate (-----BEGIN CERTIFICATE-----)",
        ));
    }
    let key = PrivateKeyDer::from_pem_file(&files.key).map_err(|err| {
        tls_error(
            &files.key,
            format!("holds no usable PEM private key: {err}"),
        )
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|err| tls_error(&files.certificate, err))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|err| {
            tls_error(
                &files.certificate,
                format!("the certificate and the key do not go together: {err}"),
            )
        })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}
