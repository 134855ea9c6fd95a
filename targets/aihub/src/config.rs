//! AI Hub's credentials, read only from the official client's own file: `$QAIHUB_CLIENT_INI`, else
//! `~/.qai_hub/client.ini`, section `[api]` with `api_token`, `api_url` and `web_url` — what
//! `qai-hub configure --api_token …` writes. npugate never asks for, stores or prints a token.

use std::path::{Path, PathBuf};

/// The environment variable that names the client's file (the official client's own).
pub const CLIENT_INI_ENV: &str = "QAIHUB_CLIENT_INI";
/// The command that writes the file.
pub const CONFIGURE: &str = "qai-hub configure --api_token YOUR_TOKEN";
/// Qualcomm's own service: its `api_url`s are on this domain (or a subdomain of it), over https.
pub const QUALCOMM_DOMAIN: &str = "aihub.qualcomm.com";

/// How to reach AI Hub, as the official client is configured.
#[derive(Clone)]
pub struct ClientConfig {
    /// The API's base URL.
    pub api_url: String,
    /// The web site's base URL (job links).
    pub web_url: String,
    /// The token (never printed).
    pub api_token: String,
    /// The file it came from.
    pub file: PathBuf,
}

impl std::fmt::Debug for ClientConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientConfig")
            .field("api_url", &self.api_url)
            .field("web_url", &self.web_url)
            .field("file", &self.file)
            .finish_non_exhaustive()
    }
}

/// Why the credentials could not be read: each names the file and the fix.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// No file.
    #[error("no Qualcomm AI Hub credentials: {} does not exist; configure the official client with `{CONFIGURE}` (pip install qai-hub; the token is on your AI Hub account page), or point {CLIENT_INI_ENV} at its file", .0.display())]
    Missing(PathBuf),
    /// A file npugate cannot read or parse.
    #[error("cannot read Qualcomm AI Hub credentials from {}: {}; write it again with `{CONFIGURE}`", .0.display(), .1)]
    Unreadable(PathBuf, String),
    /// A file without a field.
    #[error("{} has no `{}` in its [api] section; write it again with `{CONFIGURE}`", .0.display(), .1)]
    MissingField(PathBuf, &'static str),
}

/// The client's file: `$QAIHUB_CLIENT_INI`, else `~/.qai_hub/client.ini`.
pub fn client_ini() -> PathBuf {
    match std::env::var_os(CLIENT_INI_ENV) {
        Some(path) if !path.is_empty() => expand_home(Path::new(&path)),
        _ => expand_home(Path::new("~/.qai_hub/client.ini")),
    }
}

fn expand_home(path: &Path) -> PathBuf {
    match (path.strip_prefix("~"), std::env::var_os("HOME")) {
        (Ok(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ => path.to_path_buf(),
    }
}

impl ClientConfig {
    /// The official client's configuration ([`client_ini`]).
    pub fn load() -> Result<ClientConfig, ConfigError> {
        ClientConfig::read(&client_ini())
    }

    /// The configuration in `file` (an INI file with an `[api]` section).
    pub fn read(file: &Path) -> Result<ClientConfig, ConfigError> {
        if !file.is_file() {
            return Err(ConfigError::Missing(file.to_path_buf()));
        }
        let ini =
            ini::Ini::load_from_file(file).map_err(|e| ConfigError::Unreadable(file.to_path_buf(), e.to_string()))?;
        let section = ini.section(Some("api")).ok_or(ConfigError::MissingField(file.to_path_buf(), "[api]"))?;
        let field = |name: &'static str| -> Result<String, ConfigError> {
            section
                .get(name)
                .map(|value| value.trim().to_string())
                .filter(|value| !value.is_empty())
                .ok_or(ConfigError::MissingField(file.to_path_buf(), name))
        };
        Ok(ClientConfig {
            api_token: field("api_token")?,
            api_url: field("api_url")?.trim_end_matches('/').to_string(),
            web_url: field("web_url")?,
            file: file.to_path_buf(),
        })
    }

    /// True when `api_url` is Qualcomm's own service (https on [`QUALCOMM_DOMAIN`]); anything else
    /// (a proxy, a stand-in) is named as not Qualcomm's in every output.
    pub fn is_qualcomm(&self) -> bool {
        let Some(rest) = self.api_url.strip_prefix("https://") else {
            return false;
        };
        let host = rest.split(['/', ':']).next().unwrap_or_default().to_ascii_lowercase();
        host == QUALCOMM_DOMAIN || host.ends_with(&format!(".{QUALCOMM_DOMAIN}"))
    }

    /// `{api_url}/api/v1/{path}/`, the trailing slash kept as the service wants it.
    pub fn api(&self, path: &str) -> String {
        format!("{}/api/v1/{}/", self.api_url, path.trim_matches('/'))
    }

    /// The web page of a job, joined to `web_url` as the official client joins it (a URL join:
    /// a last path segment without a trailing slash is replaced).
    pub fn job_link(&self, job_id: &str) -> String {
        let (scheme, rest) = self.web_url.split_once("://").unwrap_or(("", &self.web_url));
        let base = match rest.find('/') {
            Some(path) => &rest[..path + rest[path..].rfind('/').unwrap_or(0)],
            None => rest,
        };
        let base = if scheme.is_empty() { base.to_string() } else { format!("{scheme}://{base}") };
        format!("{base}/jobs/{job_id}/")
    }

    /// How the service is named in outputs: `Qualcomm AI Hub (URL)`, or a warning that it is not.
    pub fn service(&self) -> String {
        match self.is_qualcomm() {
            true => format!("Qualcomm AI Hub ({})", self.api_url),
            false => format!(
                "{} — NOT Qualcomm's AI Hub service (its numbers come from whatever answers there)",
                self.api_url
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(text: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("client.ini");
        std::fs::write(&file, text).unwrap();
        (dir, file)
    }

    #[test]
    fn the_official_clients_file_is_read_and_a_missing_one_names_the_configure_command() {
        let (_dir, file) = write(
            "[api]\napi_token = abc\napi_url = https://workbench.aihub.qualcomm.com\nweb_url = https://workbench.aihub.qualcomm.com/\nverbose = True\n",
        );
        let config = ClientConfig::read(&file).unwrap();
        assert_eq!(config.api_token, "abc");
        assert!(config.is_qualcomm());
        assert_eq!(config.api("devices"), "https://workbench.aihub.qualcomm.com/api/v1/devices/");
        assert_eq!(config.job_link("j1"), "https://workbench.aihub.qualcomm.com/jobs/j1/");
        let web = |web_url: &str| ClientConfig { web_url: web_url.into(), ..config.clone() }.job_link("j1");
        assert_eq!(web("http://127.0.0.1:9/web"), "http://127.0.0.1:9/jobs/j1/", "as urljoin does");
        assert_eq!(web("http://127.0.0.1:9/a/b"), "http://127.0.0.1:9/a/jobs/j1/");
        assert!(!format!("{config:?}").contains("abc"), "the token is never printed");
        let missing = ClientConfig::read(&file.with_file_name("none.ini")).unwrap_err().to_string();
        assert!(missing.contains("qai-hub configure --api_token") && missing.contains("none.ini"), "{missing}");
        let (_dir, no_token) = write("[api]\napi_url = http://127.0.0.1:1\nweb_url = http://127.0.0.1:1\n");
        assert!(ClientConfig::read(&no_token).unwrap_err().to_string().contains("`api_token`"));
    }

    #[test]
    fn only_https_on_qualcomms_domain_is_qualcomms_service() {
        let config = |url: &str| ClientConfig {
            api_url: url.into(),
            web_url: url.into(),
            api_token: "t".into(),
            file: PathBuf::new(),
        };
        assert!(config("https://app.aihub.qualcomm.com").is_qualcomm());
        for other in
            ["http://workbench.aihub.qualcomm.com", "http://127.0.0.1:8000", "https://aihub.qualcomm.com.example.org"]
        {
            assert!(!config(other).is_qualcomm(), "{other}");
            assert!(config(other).service().contains("NOT Qualcomm"), "{other}");
        }
    }
}
