//! What trusting model-written Python means, said the same way by every command that asks:
//! the person is shown what it allows and confirms for this one run or apply; nobody to ask
//! is a no. The front end asks; this module says what to ask and what the answer decides.

use viga_gn::PythonPolicy;

use crate::AppError;

/// A question a person answers before model-written Python runs with less around it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrustQuestion {
    /// What it allows, one sentence a line.
    pub lines: Vec<String>,
    /// What the confirmation covers ("this run", "this apply").
    pub scope: &'static str,
}

/// Running a program in the person's own Blender: as them, with what Blender can reach.
const IN_YOUR_BLENDER: &str = "model-written Python runs as you, with your files, your network and the API keys in Blender's environment.";

/// `viga apply --trusted`: the run's program runs in the person's Blender.
pub fn apply_question() -> TrustQuestion {
    TrustQuestion {
        lines: vec![format!(
            "--trusted runs the run's program in your own Blender: {IN_YOUR_BLENDER}"
        )],
        scope: "this apply",
    }
}

/// `viga run --through-mcp`: the run's programs run in the person's Blender, through their
/// MCP server's code tool.
pub fn through_mcp_question() -> TrustQuestion {
    TrustQuestion {
        lines: vec![
            format!(
                "--through-mcp runs this run's programs in your own Blender, through the MCP server's code tool: {IN_YOUR_BLENDER}"
            ),
            "Each program starts from your scene as it is now (viga goes back by undo); the result stays in your scene, and Ctrl-Z walks back to it as it was. Leave Blender alone while the run works.".to_owned(),
        ],
        scope: "this run",
    }
}

/// What a Geometry Nodes run asks to be trusted with.
#[derive(Debug, Clone, Copy, Default)]
pub struct GnTrust {
    /// Steps run in the person's own Blender (`--trusted`).
    pub live: bool,
    /// PYTHON steps run without safe mode (`--trusted-python`).
    pub unrestricted: bool,
    /// The run works on the person's open scene (`--attach`).
    pub attached: bool,
    /// The front end already asked and the person agreed (`--confirm-trusted`).
    pub confirmed: bool,
}

/// The Python policy of a Geometry Nodes run; when it asks for trust not yet confirmed,
/// `ask` puts the question to the person (its answer: whether they agreed).
pub fn gn_policy(
    trust: GnTrust,
    ask: impl FnOnce(&TrustQuestion) -> Result<bool, AppError>,
) -> Result<PythonPolicy, AppError> {
    if trust.live && !trust.attached {
        return Err(AppError::Config(
            "--trusted runs the steps in your own Blender and needs --attach; without --attach they run in viga's contained worker".to_owned(),
        ));
    }
    if !trust.live && !trust.unrestricted {
        if trust.confirmed {
            return Err(AppError::Config(
                "--confirm-trusted confirms --trusted or --trusted-python; give the one you mean"
                    .to_owned(),
            ));
        }
        return Ok(PythonPolicy::safe());
    }
    let confirmed = trust.confirmed || ask(&gn_question(trust))?;
    if trust.live && !confirmed {
        return Err(AppError::Config(
            "trusted mode was not confirmed for this run; run without --trusted to work on a copy in viga's worker".to_owned(),
        ));
    }
    if trust.unrestricted {
        return PythonPolicy::trusted(true, confirmed).map_err(AppError::from);
    }
    Ok(PythonPolicy::safe())
}

fn gn_question(trust: GnTrust) -> TrustQuestion {
    let mut lines = Vec::new();
    if trust.live {
        lines.push(format!(
            "--trusted runs this run's steps in your own Blender: {IN_YOUR_BLENDER}"
        ));
    }
    if trust.unrestricted {
        lines.push(format!(
            "--trusted-python lets model-written Python run without safe mode's restrictions{}.",
            if trust.live {
                ""
            } else {
                " (in viga's contained worker)"
            }
        ));
    }
    TrustQuestion {
        lines,
        scope: "this run",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn live_steps_need_an_attached_scene_and_a_yes() {
        let live = GnTrust {
            live: true,
            attached: true,
            ..GnTrust::default()
        };
        let refused = gn_policy(live, |_| Ok(false)).unwrap_err();
        assert!(refused.to_string().contains("not confirmed"), "{refused}");
        let mut asked = None;
        gn_policy(live, |question| {
            asked = Some(question.clone());
            Ok(true)
        })
        .unwrap();
        let asked = asked.unwrap();
        assert_eq!(asked.scope, "this run");
        assert!(asked.lines[0].contains("your own Blender"));
        let unattached = GnTrust {
            attached: false,
            ..live
        };
        assert!(gn_policy(unattached, |_| Ok(true)).is_err());
    }

    #[test]
    fn nothing_to_trust_asks_nothing() {
        let policy = gn_policy(GnTrust::default(), |_| panic!("asked")).unwrap();
        assert_eq!(policy, PythonPolicy::safe());
    }
}
