//! The random fault plans of the kill scenarios: pure and seeded, so a run can be repeated with
//! `--seed`.

use rand::rngs::StdRng;
use rand::{Rng as _, SeedableRng as _};

use super::replicas::Signal;

/// Which replica a fault hits; resolved when it is applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// The replica holding the Lease at that moment (per the audit log).
    Leader,
    /// The `n`-th of the other running replicas (modulo their number).
    Follower(usize),
}

/// One fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fault {
    /// Pause before it, in milliseconds.
    pub gap_ms: u64,
    /// Who.
    pub target: Target,
    /// What.
    pub signal: Signal,
    /// For [`Signal::Stop`]: how long the replica stays frozen before CONT, in milliseconds.
    pub frozen_ms: u64,
}

/// Shortest and longest pause between two faults, in milliseconds.
pub const GAP_MS: (u64, u64) = (1_000, 3_000);

/// Shortest and longest freeze, in milliseconds: on both sides of the 4 s lease duration.
pub const FROZEN_MS: (u64, u64) = (1_000, 7_000);

/// Share of faults aimed at the leader (the others hit a follower).
pub const LEADER_SHARE: f64 = 0.7;

/// `events` faults drawn from `seed`, each one of `signals`.
///
/// # Panics
/// If `signals` is empty (the callers pass constants).
pub fn plan(seed: u64, events: usize, signals: &[Signal]) -> Vec<Fault> {
    assert!(
        !signals.is_empty(),
        "a fault plan needs at least one signal"
    );
    let mut rng = StdRng::seed_from_u64(seed);
    (0..events)
        .map(|_| {
            let gap_ms = rng.random_range(GAP_MS.0..=GAP_MS.1);
            let target = if rng.random_bool(LEADER_SHARE) {
                Target::Leader
            } else {
                Target::Follower(rng.random_range(0..8))
            };
            let signal = signals[rng.random_range(0..signals.len())];
            let frozen_ms = if signal == Signal::Stop {
                rng.random_range(FROZEN_MS.0..=FROZEN_MS.1)
            } else {
                0
            };
            Fault {
                gap_ms,
                target,
                signal,
                frozen_ms,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [Signal; 3] = [Signal::Kill, Signal::Term, Signal::Stop];

    #[test]
    fn the_same_seed_gives_the_same_plan() {
        assert_eq!(plan(7, 20, &ALL), plan(7, 20, &ALL));
        assert_ne!(plan(7, 20, &ALL), plan(8, 20, &ALL));
        assert_eq!(plan(7, 20, &ALL).len(), 20);
        assert!(plan(7, 0, &ALL).is_empty());
    }

    #[test]
    fn faults_stay_within_their_bounds_and_use_every_kind() {
        let faults = plan(42, 500, &ALL);
        for fault in &faults {
            assert!((GAP_MS.0..=GAP_MS.1).contains(&fault.gap_ms), "{fault:?}");
            match fault.signal {
                Signal::Stop => {
                    assert!((FROZEN_MS.0..=FROZEN_MS.1).contains(&fault.frozen_ms));
                }
                _ => assert_eq!(fault.frozen_ms, 0),
            }
        }
        for signal in ALL {
            assert!(faults.iter().any(|f| f.signal == signal), "{signal:?}");
        }
        let leader = faults.iter().filter(|f| f.target == Target::Leader).count();
        assert!(
            (250..450).contains(&leader),
            "{leader} of 500 aim at the leader"
        );
        // Freezes both shorter and longer than the lease duration.
        assert!(
            faults
                .iter()
                .any(|f| f.signal == Signal::Stop && f.frozen_ms < 4_000)
        );
        assert!(
            faults
                .iter()
                .any(|f| f.signal == Signal::Stop && f.frozen_ms > 4_000)
        );
    }

    #[test]
    fn only_the_given_signals_are_used() {
        let faults = plan(3, 100, &[Signal::Kill, Signal::Term]);
        assert!(faults.iter().all(|f| f.signal != Signal::Stop));
    }
}
