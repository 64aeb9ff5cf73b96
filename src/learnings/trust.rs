//! How far a reader may trust a learning, derived from its provenance and evidence
//! (docs/learnings.md, "Trust"). Every hit, resource and page shows it; a search can ask
//! for `min_trust`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Distinct issues, other than the learning's own, that must have recorded the same
/// lesson or found it helpful before it counts as `confirmed`.
pub(crate) const CONFIRMED_MIN: u32 = 2;

/// A learning's trust level, lowest first (`min_trust` keeps this level and above).
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Trust {
    /// Its text directs the reader to act dangerously: held for a person, served to no
    /// other agent until released.
    Held,
    /// Issues said it is wrong (or a person flagged it): a person should review it.
    Flagged,
    /// One agent's word: nobody else has confirmed it yet.
    #[default]
    Agent,
    /// Confirmed by independent evidence: at least 2 issues other than its own
    /// recorded the same lesson or found it helpful.
    Confirmed,
    /// Verified by a person.
    Verified,
}

impl Trust {
    pub(crate) const ALL: [Trust; 5] = [
        Trust::Held,
        Trust::Flagged,
        Trust::Agent,
        Trust::Confirmed,
        Trust::Verified,
    ];

    /// The level of a learning: held and flagged first (whatever else it has), then a
    /// person's verification, then independent evidence.
    pub(crate) fn of(held: bool, flagged: bool, verified: bool, independent: u32) -> Trust {
        if held {
            Trust::Held
        } else if flagged {
            Trust::Flagged
        } else if verified {
            Trust::Verified
        } else if independent >= CONFIRMED_MIN {
            Trust::Confirmed
        } else {
            Trust::Agent
        }
    }

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Trust::Held => "held",
            Trust::Flagged => "flagged",
            Trust::Agent => "agent",
            Trust::Confirmed => "confirmed",
            Trust::Verified => "verified",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<Trust> {
        Trust::ALL.into_iter().find(|t| t.as_str() == s)
    }
}

/// SQL: the distinct issues other than the learning's own (`l` in scope) that recorded
/// the same lesson (a confirmation) or said `helped`. An issue confirms a learning at
/// most once and has one verdict on it (both tables are unique by learning and issue), so
/// the count is the confirmations plus the `helped` verdicts of issues that did not
/// confirm it: two index lookups per learning, where a `UNION` built a temporary
/// B-tree for each learning read (a third of reading a search's hits, issue 59).
pub(crate) const INDEPENDENT: &str = "((SELECT count(*) FROM learning_confirmations c
        WHERE c.learning_id = l.id)
    + (SELECT count(*) FROM learning_feedback f
        WHERE f.learning_id = l.id AND f.outcome = 'helped' AND f.issue_id <> l.issue_id
        AND NOT EXISTS (SELECT 1 FROM learning_confirmations c
            WHERE c.learning_id = l.id AND c.issue_id = f.issue_id)))";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_are_ordered_and_derived() {
        assert!(Trust::Held < Trust::Flagged && Trust::Flagged < Trust::Agent);
        assert!(Trust::Agent < Trust::Confirmed && Trust::Confirmed < Trust::Verified);
        assert_eq!(Trust::of(true, false, true, 9), Trust::Held);
        assert_eq!(Trust::of(false, true, false, 9), Trust::Flagged);
        assert_eq!(Trust::of(false, false, true, 0), Trust::Verified);
        assert_eq!(
            Trust::of(false, false, false, CONFIRMED_MIN),
            Trust::Confirmed
        );
        assert_eq!(
            Trust::of(false, false, false, CONFIRMED_MIN - 1),
            Trust::Agent
        );
        for t in Trust::ALL {
            assert_eq!(Trust::parse(t.as_str()), Some(t));
        }
    }
}
