//! What the search may move: the program's literals less the pinned ones (a `# viga: keep`
//! line, or lines not chosen), gathered into parameters. Equal numbers of one tuple or call
//! (a cube's three equal sides, a grey's three channels) are tied into one parameter first,
//! so that what was alike stays alike unless the picture demands otherwise: a tied parameter
//! the search can no longer improve is untied into its members.

use super::literals::Literal;

/// Which of a program's numbers a search may move.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Selection {
    /// Every number not pinned by a `# viga: keep` comment.
    #[default]
    All,
    /// Only the numbers on these lines (from 1), less the pinned ones.
    Lines(Vec<usize>),
}

impl Selection {
    fn allows(&self, literal: &Literal) -> bool {
        if literal.pinned {
            return false;
        }
        match self {
            Selection::All => true,
            Selection::Lines(lines) => lines.contains(&literal.line),
        }
    }
}

/// One thing the search moves: a single literal, or literals tied to move together.
#[derive(Debug, Clone, PartialEq)]
pub struct Parameter {
    /// Indices into the program's literals, all of one value and kind at the start.
    pub members: Vec<usize>,
    pub integer: bool,
}

impl Parameter {
    pub fn is_tied(&self) -> bool {
        self.members.len() > 1
    }

    /// Its members, each a parameter of its own.
    pub fn untied(&self) -> Vec<Parameter> {
        self.members
            .iter()
            .map(|&member| Parameter {
                members: vec![member],
                integer: self.integer,
            })
            .collect()
    }
}

/// The parameters of `literals` that `selection` lets move, in program order (a tie sits where
/// its first member does). Zeros are never tied: a zero offset beside another is seldom the
/// same quantity.
pub fn parameters(literals: &[Literal], selection: &Selection) -> Vec<Parameter> {
    let mut parameters: Vec<Parameter> = Vec::new();
    for (index, literal) in literals.iter().enumerate() {
        if !selection.allows(literal) {
            continue;
        }
        let tie = parameters.iter_mut().find(|parameter| {
            let first = &literals[parameter.members[0]];
            literal.bracket.is_some()
                && first.bracket == literal.bracket
                && first.integer == literal.integer
                && first.value == literal.value
                && literal.value != 0.0
        });
        match tie {
            Some(parameter) => parameter.members.push(index),
            None => parameters.push(Parameter {
                members: vec![index],
                integer: literal.integer,
            }),
        }
    }
    parameters
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::refine::literals::numeric_literals;

    #[test]
    fn equal_numbers_of_one_tuple_are_tied_and_pinned_lines_left_out() {
        let code = "size = (0.5, 0.5, 0.5)\nloc = (0.0, 0.0, 0.5)  # viga: keep\nc = (0.2, 0.2, 1)\nn = 3\n";
        let literals = numeric_literals(code);
        let members: Vec<Vec<usize>> = parameters(&literals, &Selection::All)
            .into_iter()
            .map(|p| p.members)
            .collect();
        assert_eq!(members, [vec![0, 1, 2], vec![6, 7], vec![8], vec![9]]);
        let chosen: Vec<Vec<usize>> = parameters(&literals, &Selection::Lines(vec![2, 4]))
            .into_iter()
            .map(|p| p.members)
            .collect();
        assert_eq!(chosen, [vec![9]], "line 2 is pinned, line 4 chosen");
    }

    #[test]
    fn a_tie_unties_into_its_members() {
        let tie = Parameter {
            members: vec![3, 5],
            integer: false,
        };
        assert!(tie.is_tied());
        assert_eq!(
            tie.untied(),
            [
                Parameter {
                    members: vec![3],
                    integer: false
                },
                Parameter {
                    members: vec![5],
                    integer: false
                }
            ]
        );
    }
}
