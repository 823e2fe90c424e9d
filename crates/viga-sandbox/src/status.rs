//! The policy a worker is contained under, the halves containment is made of, and what the
//! launcher reports about each.

use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::{ContainError, Limit, LimitsStatus};

/// Whether programs written on a model's behalf run contained.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ContainmentPolicy {
    /// Not contained: for a worker that must reach the network or write anywhere.
    Off,
    /// Contained as far as the kernel allows; what is missing is stated, not refused.
    #[default]
    Auto,
    /// The worker does not start unless every half of containment holds.
    Require,
}

impl ContainmentPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::Auto => "auto",
            Self::Require => "require",
        }
    }
}

impl std::fmt::Display for ContainmentPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ContainmentPolicy {
    type Err = ContainError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "off" => Ok(Self::Off),
            "auto" => Ok(Self::Auto),
            "require" => Ok(Self::Require),
            other => Err(ContainError::Usage(format!(
                "containment {other:?} is not off, auto or require"
            ))),
        }
    }
}

/// One half of containment. `require` needs all of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Half {
    /// No TCP, UDP or name lookups out.
    Network,
    /// Writes only in the named folders.
    Writes,
    /// Reads only in the system's folders, the program's install and the named folders.
    Reads,
    /// No pathname Unix socket of the session (bus, display, agents, daemons) reachable.
    UnixSockets,
    /// No process the program starts outlives it.
    Processes,
    /// No display, bus or agent variable passed on.
    Environment,
}

impl Half {
    pub const ALL: [Half; 6] = [
        Half::Network,
        Half::Writes,
        Half::Reads,
        Half::UnixSockets,
        Half::Processes,
        Half::Environment,
    ];

    /// The name used on the launcher's command line and in messages.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Network => "network",
            Self::Writes => "writes",
            Self::Reads => "reads",
            Self::UnixSockets => "unix-sockets",
            Self::Processes => "processes",
            Self::Environment => "environment",
        }
    }
}

impl std::fmt::Display for Half {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Half {
    type Err = ContainError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Half::ALL
            .into_iter()
            .find(|half| half.as_str() == text)
            .ok_or_else(|| {
                ContainError::Usage(format!(
                    "{text:?} is not a half of containment: use network, writes, reads, unix-sockets, processes or environment"
                ))
            })
    }
}

/// One half of containment: whether it holds, and how or why not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Guard {
    pub active: bool,
    pub detail: String,
}

impl Guard {
    pub fn active(detail: impl Into<String>) -> Self {
        Self {
            active: true,
            detail: detail.into(),
        }
    }

    pub fn absent(detail: impl Into<String>) -> Self {
        Self {
            active: false,
            detail: detail.into(),
        }
    }

    /// What a status written before viga checked a half says about it.
    fn not_recorded() -> Self {
        Self::absent("not recorded (written before viga checked it)")
    }
}

/// What containment a worker runs under, as its launcher reported it. Written to run
/// folders as `containment.json`; older files (with `filesystem` for the writes and
/// without the later halves) still read, the missing halves as not held.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContainmentStatus {
    pub policy: ContainmentPolicy,
    pub network: Guard,
    #[serde(alias = "filesystem")]
    pub writes: Guard,
    #[serde(default = "Guard::not_recorded")]
    pub reads: Guard,
    #[serde(default = "Guard::not_recorded")]
    pub unix_sockets: Guard,
    #[serde(default = "Guard::not_recorded")]
    pub processes: Guard,
    #[serde(default = "Guard::not_recorded")]
    pub environment: Guard,
    /// The limits on memory, processes, file size and what is written; older files have
    /// none, read as not recorded.
    #[serde(default = "LimitsStatus::not_recorded")]
    pub limits: LimitsStatus,
}

impl ContainmentStatus {
    /// The status of a worker started without the launcher.
    pub fn off() -> Self {
        Self::uncontained("containment is off")
    }

    /// The status of a Blender no containment holds, `why` said for every half (a person's
    /// Blender that viga reaches through another program).
    pub fn uncontained(why: &str) -> Self {
        let off = || Guard::absent(why);
        Self {
            policy: ContainmentPolicy::Off,
            network: off(),
            writes: off(),
            reads: off(),
            unix_sockets: off(),
            processes: off(),
            environment: off(),
            limits: LimitsStatus::all_missing(why),
        }
    }

    /// Every half with its guard, in a fixed order.
    pub fn halves(&self) -> [(Half, &Guard); 6] {
        [
            (Half::Network, &self.network),
            (Half::Writes, &self.writes),
            (Half::Reads, &self.reads),
            (Half::UnixSockets, &self.unix_sockets),
            (Half::Processes, &self.processes),
            (Half::Environment, &self.environment),
        ]
    }

    /// The halves that do not hold.
    pub fn missing(&self) -> Vec<Half> {
        self.halves()
            .into_iter()
            .filter(|(_, guard)| !guard.active)
            .map(|(half, _)| half)
            .collect()
    }

    /// The limits asked for that do not hold.
    pub fn missing_limits(&self) -> Vec<Limit> {
        self.limits.missing()
    }

    /// Every half holds, and every limit holds or was turned off by name (what `require`
    /// needs).
    pub fn is_complete(&self) -> bool {
        self.missing().is_empty() && self.missing_limits().is_empty()
    }

    /// What `require` misses, by name: halves, then limits.
    pub fn missing_names(&self) -> Vec<String> {
        self.missing()
            .into_iter()
            .map(|half| half.as_str().to_owned())
            .chain(
                self.missing_limits()
                    .into_iter()
                    .map(|limit| format!("the {}", limit.noun())),
            )
            .collect()
    }

    /// What would make the missing halves and limits hold, in words, from the causes their
    /// details name: the setting that turns user namespaces or Landlock off, and who may
    /// change it. Empty when nothing is missing.
    pub fn remedy(&self) -> String {
        let details: Vec<&str> = self
            .halves()
            .into_iter()
            .filter(|(_, guard)| !guard.active)
            .map(|(_, guard)| guard.detail.as_str())
            .collect();
        let named = |needle: &str| details.iter().any(|detail| detail.contains(needle));
        let mut remedies = Vec::new();
        for (setting, fix) in USER_NAMESPACE_SWITCHES {
            if named(setting) {
                remedies.push(format!(
                    "user namespaces are turned off by {setting}: {fix}"
                ));
            }
        }
        if named("Landlock")
            && details
                .iter()
                .any(|d| d.contains("no Landlock") || d.contains("not enabled"))
        {
            remedies.push(
                "the kernel enforces no Landlock: it needs Linux 5.13 or later built with Landlock, and landlock in its lsm= boot list".to_owned(),
            );
        }
        if !remedies.is_empty() {
            remedies.push(
                "these are settings of the machine, so on a shared cluster node they are its administrators' to change; until then --containment auto runs with what holds and records it in every run folder".to_owned(),
            );
        }
        if !self.missing_limits().is_empty() {
            remedies.push(
                "a limit holds as a user other than root, or with a delegated cgroup v2; or turn that limit off by name (--process-limit none)".to_owned(),
            );
        }
        remedies.join("; ")
    }

    /// One line for a person: what holds and what does not, each half by name.
    pub fn summary(&self) -> String {
        self.halves()
            .into_iter()
            .map(|(half, guard)| {
                let held = if guard.active {
                    "contained"
                } else {
                    "NOT contained"
                };
                format!("{half} {held} ({})", guard.detail)
            })
            .chain(std::iter::once(self.limits.summary()))
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// The kernel settings that take user namespaces from unprivileged processes, and how an
/// administrator gives them back.
const USER_NAMESPACE_SWITCHES: [(&str, &str); 3] = [
    (
        "user.max_user_namespaces",
        "an administrator can allow them with `sysctl -w user.max_user_namespaces=15000` (and a file in /etc/sysctl.d/ to keep it)",
    ),
    (
        "kernel.unprivileged_userns_clone",
        "an administrator can allow them with `sysctl -w kernel.unprivileged_userns_clone=1`",
    ),
    (
        "kernel.apparmor_restrict_unprivileged_userns",
        "an administrator can allow them with `sysctl -w kernel.apparmor_restrict_unprivileged_userns=0`, or with an AppArmor profile that grants viga `userns`",
    ),
];

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_summary_names_every_half_and_says_what_is_not_contained() {
        let mut status = ContainmentStatus::off();
        status.policy = ContainmentPolicy::Auto;
        status.writes = Guard::active("Landlock V7");
        assert!(!status.is_complete());
        assert_eq!(
            status.missing(),
            vec![
                Half::Network,
                Half::Reads,
                Half::UnixSockets,
                Half::Processes,
                Half::Environment
            ]
        );
        let summary = status.summary();
        assert!(
            summary.starts_with("network NOT contained (containment is off); writes contained (Landlock V7); reads NOT contained"),
            "{summary}"
        );
        assert!(summary.contains("unix-sockets NOT contained"), "{summary}");
    }

    #[test]
    fn a_status_written_before_the_later_halves_still_reads() {
        let old = r#"{"policy":"auto","network":{"active":true,"detail":"own namespace"},
            "filesystem":{"active":true,"detail":"Landlock V7: writes only in /x"}}"#;
        let status: ContainmentStatus = serde_json::from_str(old).unwrap();
        assert!(status.writes.active);
        assert!(!status.reads.active);
        // Written before limits: each reads as not recorded, and require would not accept it.
        assert_eq!(status.missing_limits(), Limit::ALL.to_vec());
        assert!(status.limits.memory.detail.contains("not recorded"));
        assert_eq!(
            status.missing(),
            vec![
                Half::Reads,
                Half::UnixSockets,
                Half::Processes,
                Half::Environment
            ]
        );
    }

    #[test]
    fn the_remedy_names_the_setting_that_turned_user_namespaces_off_and_who_may_change_it() {
        let mut status = ContainmentStatus::off();
        status.policy = ContainmentPolicy::Require;
        let off = "no user namespace: user namespaces are disabled (user.max_user_namespaces = 0)";
        status.network = Guard::absent(off);
        status.processes = Guard::absent(off);
        let remedy = status.remedy();
        assert!(
            remedy.contains("sysctl -w user.max_user_namespaces="),
            "{remedy}"
        );
        assert!(remedy.contains("administrators"), "{remedy}");
        assert!(!remedy.contains("another Blender"), "{remedy}");
        let mut apparmor = ContainmentStatus::off();
        apparmor.network = Guard::absent(
            "AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns = 1)",
        );
        assert!(
            apparmor.remedy().contains("AppArmor profile"),
            "{}",
            apparmor.remedy()
        );
    }

    #[test]
    fn halves_parse_by_their_names_and_an_unknown_one_is_named() {
        for half in Half::ALL {
            assert_eq!(half.as_str().parse::<Half>().unwrap(), half);
        }
        let err = "sockets".parse::<Half>().unwrap_err().to_string();
        assert!(err.contains("\"sockets\" is not a half"), "{err}");
    }

    #[test]
    fn limits_are_written_with_value_and_how_and_read_back() {
        use crate::{Enforcement, LimitGuard};
        let mut status = ContainmentStatus::off();
        status.limits.memory = LimitGuard::held(Enforcement::Cgroup, 1 << 30, "memory.max");
        status.limits.processes = LimitGuard::unlimited();
        let json = serde_json::to_value(&status).unwrap();
        assert_eq!(
            json["limits"]["memory"],
            serde_json::json!({"active": true, "value": 1073741824, "how": "cgroup", "detail": "memory.max"})
        );
        assert_eq!(json["limits"]["processes"]["how"], "unlimited");
        assert_eq!(json["limits"]["scratch"]["how"], "missing");
        assert!(json["limits"]["processes"].get("value").is_none());
        let back: ContainmentStatus = serde_json::from_value(json).unwrap();
        assert_eq!(back, status);
        assert_eq!(back.missing_limits(), vec![Limit::FileSize, Limit::Scratch]);
        assert!(back.missing_names().ends_with(&[
            "the file-size limit".to_owned(),
            "the scratch limit".to_owned()
        ]));
    }
}
