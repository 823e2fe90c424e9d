//! Limits on what a contained program may use (memory, processes, file size, the size of
//! what it writes), how they are given to the launcher (`--limit memory=4G`), and what the
//! launcher reports about each.

use std::ffi::OsString;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::ContainError;

const KIB: u64 = 1024;
const MIB: u64 = 1024 * KIB;
const GIB: u64 = 1024 * MIB;

/// The environment variable the launcher gives the program: the limits that hold, as
/// `name=value` pairs joined by commas, so it can name the one it ran into.
pub const LIMITS_ENV: &str = "VIGA_LIMITS";

/// The line the launcher prints on its error output when it stopped the program for going
/// past a limit it watches: this marker, the limit's name, a space, then a sentence.
pub const LIMIT_MARKER: &str = "VIGA_LIMIT ";

/// One limit on a contained program.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Limit {
    /// Memory: bytes.
    Memory,
    /// Processes and threads: a count.
    Processes,
    /// The size of any one file it writes: bytes.
    FileSize,
    /// How much it may add to the folders it writes in: bytes.
    Scratch,
}

impl Limit {
    pub const ALL: [Limit; 4] = [
        Limit::Memory,
        Limit::Processes,
        Limit::FileSize,
        Limit::Scratch,
    ];

    /// The name on the launcher's command line (`--limit NAME=VALUE`) and in messages.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Memory => "memory",
            Self::Processes => "processes",
            Self::FileSize => "file-size",
            Self::Scratch => "scratch",
        }
    }

    /// What a person calls it: "the memory limit".
    pub fn noun(self) -> &'static str {
        match self {
            Self::Memory => "memory limit",
            Self::Processes => "process limit",
            Self::FileSize => "file-size limit",
            Self::Scratch => "scratch limit",
        }
    }

    /// `value` as a person reads it: "4 GiB", "256 processes".
    pub fn show(self, value: u64) -> String {
        match self {
            Self::Processes => format!("{value} processes"),
            _ => show_size(value),
        }
    }

    /// Parses a value of this limit: a count for processes, else a size (`4G`, `512M`,
    /// `1048576`), or `none`.
    pub fn parse_value(self, text: &str) -> Result<Option<u64>, ContainError> {
        let text = text.trim();
        if text.eq_ignore_ascii_case("none") {
            return Ok(None);
        }
        let value = match self {
            Self::Processes => text.parse::<u64>().ok(),
            _ => parse_size(text),
        };
        match value {
            Some(0) | None => Err(ContainError::Usage(format!(
                "{text:?} is not a valid {}: use {} or none",
                self.noun(),
                match self {
                    Self::Processes => "a number of processes (256)",
                    _ => "a size (4G, 512M, 1048576)",
                }
            ))),
            Some(value) => Ok(Some(value)),
        }
    }
}

impl std::fmt::Display for Limit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Limit {
    type Err = ContainError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Limit::ALL
            .into_iter()
            .find(|limit| limit.as_str() == text)
            .ok_or_else(|| {
                ContainError::Usage(format!(
                    "{text:?} is not a limit: use memory, processes, file-size or scratch"
                ))
            })
    }
}

/// A size in bytes, with an optional binary suffix (K, M, G, T, with or without `iB`/`B`).
fn parse_size(text: &str) -> Option<u64> {
    let digits = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, suffix) = text.split_at(digits);
    let number: u64 = number.parse().ok()?;
    let unit = match suffix.trim().to_ascii_uppercase().as_str() {
        "" | "B" => 1,
        "K" | "KB" | "KIB" => KIB,
        "M" | "MB" | "MIB" => MIB,
        "G" | "GB" | "GIB" => GIB,
        "T" | "TB" | "TIB" => 1024 * GIB,
        _ => return None,
    };
    number.checked_mul(unit)
}

/// A size as a person reads it: whole GiB, MiB or KiB when it is one, else bytes.
pub fn show_size(bytes: u64) -> String {
    for (unit, name) in [(GIB, "GiB"), (MIB, "MiB"), (KIB, "KiB")] {
        if bytes >= unit && bytes.is_multiple_of(unit) {
            return format!("{} {name}", bytes / unit);
        }
    }
    format!("{bytes} bytes")
}

/// The limits a contained program runs under; `None` is no limit, asked for by name
/// (`--limit processes=none`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub memory: Option<u64>,
    pub processes: Option<u64>,
    pub file_size: Option<u64>,
    pub scratch: Option<u64>,
}

impl Default for Limits {
    /// What fits a 2-core, 8 GB laptop with viga, a desktop and one worker besides: half the
    /// memory for one program; 256 processes and threads (Blender needs a few dozen, a fork
    /// bomb is stopped long before the machine's limit); 1 GiB for one file (a render or a
    /// saved scene is tens of MiB); 2 GiB written in all.
    fn default() -> Self {
        Self {
            memory: Some(4 * GIB),
            processes: Some(256),
            file_size: Some(GIB),
            scratch: Some(2 * GIB),
        }
    }
}

impl Limits {
    /// No limit at all.
    pub fn none() -> Self {
        Self {
            memory: None,
            processes: None,
            file_size: None,
            scratch: None,
        }
    }

    pub fn get(&self, limit: Limit) -> Option<u64> {
        match limit {
            Limit::Memory => self.memory,
            Limit::Processes => self.processes,
            Limit::FileSize => self.file_size,
            Limit::Scratch => self.scratch,
        }
    }

    pub fn set(&mut self, limit: Limit, value: Option<u64>) {
        match limit {
            Limit::Memory => self.memory = value,
            Limit::Processes => self.processes = value,
            Limit::FileSize => self.file_size = value,
            Limit::Scratch => self.scratch = value,
        }
    }

    /// The same limits with `limit` set to `value`.
    pub fn with(mut self, limit: Limit, value: Option<u64>) -> Self {
        self.set(limit, value);
        self
    }

    /// Applies one `NAME=VALUE` (the launcher's `--limit`).
    pub fn assign(&mut self, assignment: &str) -> Result<(), ContainError> {
        let Some((name, value)) = assignment.split_once('=') else {
            return Err(ContainError::Usage(format!(
                "--limit {assignment:?}: expected NAME=VALUE (memory=4G, processes=256, file-size=1G, scratch=2G, or NAME=none)"
            )));
        };
        let limit: Limit = name.trim().parse()?;
        self.set(limit, limit.parse_value(value)?);
        Ok(())
    }

    /// The launcher's options that ask for these limits.
    pub fn options(&self) -> Vec<OsString> {
        Limit::ALL
            .into_iter()
            .flat_map(|limit| {
                let value = self
                    .get(limit)
                    .map_or_else(|| "none".to_owned(), |value| value.to_string());
                ["--limit".into(), format!("{limit}={value}").into()]
            })
            .collect()
    }
}

/// How a limit holds, or that it does not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Enforcement {
    /// By a cgroup v2 controller (memory.max, pids.max): for the program and all it starts.
    Cgroup,
    /// By a resource limit (setrlimit) the program and all it starts inherit.
    Rlimit,
    /// By the launcher, which measures and stops the program past it.
    Watched,
    /// No limit was asked for (`NAME=none`).
    Unlimited,
    /// Asked for, but nothing here can enforce it.
    Missing,
}

/// One limit as the launcher reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LimitGuard {
    /// It holds (cgroup, rlimit or watched).
    pub active: bool,
    /// The limit asked for, when one was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<u64>,
    pub how: Enforcement,
    pub detail: String,
}

impl LimitGuard {
    pub fn held(how: Enforcement, value: u64, detail: impl Into<String>) -> Self {
        Self {
            active: true,
            value: Some(value),
            how,
            detail: detail.into(),
        }
    }

    pub fn missing(value: Option<u64>, detail: impl Into<String>) -> Self {
        Self {
            active: false,
            value,
            how: Enforcement::Missing,
            detail: detail.into(),
        }
    }

    pub fn unlimited() -> Self {
        Self {
            active: false,
            value: None,
            how: Enforcement::Unlimited,
            detail: "no limit (asked for with none)".to_owned(),
        }
    }

    /// Either it holds or nobody asked for it: what `require` accepts.
    pub fn is_satisfied(&self) -> bool {
        self.active || self.how == Enforcement::Unlimited
    }

    fn not_recorded() -> Self {
        Self::missing(None, "not recorded (written before viga had limits)")
    }
}

/// Every limit as the launcher reports it (`containment.json`'s `limits`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LimitsStatus {
    #[serde(default = "LimitGuard::not_recorded")]
    pub memory: LimitGuard,
    #[serde(default = "LimitGuard::not_recorded")]
    pub processes: LimitGuard,
    #[serde(default = "LimitGuard::not_recorded")]
    pub file_size: LimitGuard,
    #[serde(default = "LimitGuard::not_recorded")]
    pub scratch: LimitGuard,
}

impl LimitsStatus {
    /// What a status written before viga had limits says.
    pub fn not_recorded() -> Self {
        Self::all(LimitGuard::not_recorded)
    }

    /// Every limit missing for the same reason.
    pub fn all_missing(why: &str) -> Self {
        Self::all(|| LimitGuard::missing(None, why))
    }

    fn all(guard: impl Fn() -> LimitGuard) -> Self {
        Self {
            memory: guard(),
            processes: guard(),
            file_size: guard(),
            scratch: guard(),
        }
    }

    /// Every limit with its guard, in a fixed order.
    pub fn limits(&self) -> [(Limit, &LimitGuard); 4] {
        [
            (Limit::Memory, &self.memory),
            (Limit::Processes, &self.processes),
            (Limit::FileSize, &self.file_size),
            (Limit::Scratch, &self.scratch),
        ]
    }

    /// The limits asked for that do not hold.
    pub fn missing(&self) -> Vec<Limit> {
        self.limits()
            .into_iter()
            .filter(|(_, guard)| !guard.is_satisfied())
            .map(|(limit, _)| limit)
            .collect()
    }

    /// The value of `VIGA_LIMITS` for the program: each limit that holds.
    pub fn environment(&self) -> String {
        self.limits()
            .into_iter()
            .filter_map(|(limit, guard)| {
                let value = guard.value.filter(|_| guard.active)?;
                Some(format!("{limit}={value}"))
            })
            .collect::<Vec<_>>()
            .join(",")
    }

    /// One line for a person, each limit by name.
    pub fn summary(&self) -> String {
        self.limits()
            .into_iter()
            .map(|(limit, guard)| format!("{} {}", limit.noun(), describe(limit, guard)))
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// "4 GiB (rlimit: …)", "NOT held (…)", "none".
pub fn describe(limit: Limit, guard: &LimitGuard) -> String {
    match (guard.active, guard.how, guard.value) {
        (true, how, Some(value)) => format!(
            "{} ({}: {})",
            limit.show(value),
            serde_json::to_value(how)
                .ok()
                .and_then(|how| how.as_str().map(str::to_owned))
                .unwrap_or_default(),
            guard.detail
        ),
        (_, Enforcement::Unlimited, _) => "none (asked for with none)".to_owned(),
        (_, _, Some(value)) => format!("of {} NOT held ({})", limit.show(value), guard.detail),
        _ => format!("NOT held ({})", guard.detail),
    }
}

/// The disk space the files beneath `folders` take (links are not followed, and a folder
/// that cannot be read counts as empty): what a program wrote there, sparse files by what
/// they really take.
pub(crate) fn usage(folders: &[std::path::PathBuf]) -> u64 {
    let mut pending: Vec<std::path::PathBuf> = folders.to_vec();
    let mut total: u64 = 0;
    while let Some(folder) = pending.pop() {
        let Ok(listing) = std::fs::read_dir(&folder) else {
            continue;
        };
        for entry in listing.flatten() {
            let Ok(metadata) = entry.metadata() else {
                continue;
            };
            if metadata.is_dir() {
                pending.push(entry.path());
            } else {
                total = total.saturating_add(taken(&metadata));
            }
        }
    }
    total
}

#[cfg(unix)]
fn taken(metadata: &std::fs::Metadata) -> u64 {
    use std::os::unix::fs::MetadataExt as _;
    metadata.blocks().saturating_mul(512)
}

#[cfg(not(unix))]
fn taken(metadata: &std::fs::Metadata) -> u64 {
    metadata.len()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn sizes_and_counts_parse_and_show_as_people_write_them() {
        assert_eq!(Limit::Memory.parse_value("4G").unwrap(), Some(4 * GIB));
        assert_eq!(Limit::Memory.parse_value("4GiB").unwrap(), Some(4 * GIB));
        assert_eq!(Limit::Scratch.parse_value("64m").unwrap(), Some(64 * MIB));
        assert_eq!(Limit::FileSize.parse_value("1048576").unwrap(), Some(MIB));
        assert_eq!(Limit::Processes.parse_value("256").unwrap(), Some(256));
        assert_eq!(Limit::Processes.parse_value("none").unwrap(), None);
        for (limit, bad) in [
            (Limit::Memory, "4X"),
            (Limit::Memory, "0"),
            (Limit::Processes, "4G"),
            (Limit::Scratch, ""),
        ] {
            let err = limit.parse_value(bad).unwrap_err().to_string();
            assert!(err.contains("is not a valid"), "{bad}: {err}");
        }
        assert_eq!(show_size(4 * GIB), "4 GiB");
        assert_eq!(show_size(64 * MIB), "64 MiB");
        assert_eq!(show_size(1500), "1500 bytes");
        assert_eq!(Limit::Processes.show(256), "256 processes");
    }

    #[test]
    fn limits_round_trip_through_the_launchers_options() {
        let limits = Limits::default()
            .with(Limit::Processes, None)
            .with(Limit::Scratch, Some(64 * MIB));
        let mut parsed = Limits::none();
        let options = limits.options();
        for pair in options.chunks(2) {
            assert_eq!(pair[0], "--limit");
            parsed.assign(&pair[1].to_string_lossy()).unwrap();
        }
        assert_eq!(parsed, limits);
        let err = parsed.assign("memory").unwrap_err().to_string();
        assert!(err.contains("expected NAME=VALUE"), "{err}");
        let err = parsed.assign("disk=1G").unwrap_err().to_string();
        assert!(err.contains("\"disk\" is not a limit"), "{err}");
    }

    #[test]
    fn a_missing_limit_is_named_and_none_satisfies_require() {
        let status = LimitsStatus {
            memory: LimitGuard::held(Enforcement::Rlimit, 4 * GIB, "RLIMIT_DATA"),
            processes: LimitGuard::missing(Some(256), "root"),
            file_size: LimitGuard::held(Enforcement::Rlimit, GIB, "RLIMIT_FSIZE"),
            scratch: LimitGuard::unlimited(),
        };
        assert_eq!(status.missing(), vec![Limit::Processes]);
        assert_eq!(
            status.environment(),
            format!("memory={},file-size={GIB}", 4 * GIB)
        );
        let summary = status.summary();
        assert!(
            summary.starts_with("memory limit 4 GiB (rlimit: RLIMIT_DATA); process limit of 256 processes NOT held (root)"),
            "{summary}"
        );
        assert!(summary.ends_with("scratch limit none (asked for with none)"));
        let old: LimitsStatus = serde_json::from_str("{}").unwrap();
        assert_eq!(old.missing(), Limit::ALL.to_vec());
    }

    #[test]
    fn usage_counts_what_files_take_beneath_the_folders() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("renders")).unwrap();
        std::fs::write(dir.path().join("renders/a.png"), vec![1u8; 300_000]).unwrap();
        std::fs::write(dir.path().join("b.txt"), vec![1u8; 100_000]).unwrap();
        // A sparse file takes next to nothing.
        let sparse = std::fs::File::create(dir.path().join("sparse")).unwrap();
        sparse.set_len(GIB).unwrap();
        let used = usage(&[dir.path().to_path_buf()]);
        assert!((400_000..1_000_000).contains(&used), "{used}");
        assert_eq!(usage(&[dir.path().join("missing")]), 0);
    }
}
