//! Sweeps spread over a CI matrix: `--shard I/N` runs unit k of the plan (0-based, plan order; see
//! [`super::unit`]) when k mod N = I − 1, so N processes on N hosts run every cell exactly once and
//! no phone is in two shards. A shard's `sweep.json` records the cut (`shard`: every unit, its
//! shard, the runtimes of its cells and — for the shard's own units — the devices they resolved
//! to), which is what `npugate sweep merge` needs to put the shards back together in the order an
//! unsharded run has, and to name the cells of a shard that is missing.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::unit::Unit;

/// `--shard I/N`: the I-th of N shards, 1 ≤ I ≤ N.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Shard {
    /// I, from 1.
    pub index: u32,
    /// N, the number of shards.
    pub count: u32,
}

impl Shard {
    /// The shard unit `position` (0-based, plan order) belongs to.
    pub fn of_unit(position: usize, count: u32) -> u32 {
        (position % count as usize) as u32 + 1
    }

    /// True when unit `position` belongs to this shard.
    pub fn takes(&self, position: usize) -> bool {
        Shard::of_unit(position, self.count) == self.index
    }

    /// `shard-2-of-3`: this shard's default folder name.
    pub fn folder(&self) -> String {
        format!("shard-{}-of-{}", self.index, self.count)
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl FromStr for Shard {
    type Err = String;

    fn from_str(text: &str) -> Result<Shard, String> {
        let wrong = || format!("{text:?} is not a shard; write I/N with 1 ≤ I ≤ N, e.g. 2/3");
        let (index, count) = text.split_once('/').ok_or_else(wrong)?;
        let (index, count): (u32, u32) =
            (index.trim().parse().map_err(|_| wrong())?, count.trim().parse().map_err(|_| wrong())?);
        if index == 0 || index > count {
            return Err(wrong());
        }
        Ok(Shard { index, count })
    }
}

/// The units of a sweep and which of them this process runs (all of them without `--shard`).
#[derive(Debug, Clone)]
pub struct Cut {
    /// Every unit of the plan, in plan order.
    pub units: Vec<Unit>,
    /// The shard this process runs, if any.
    pub shard: Option<Shard>,
}

impl Cut {
    /// The units this process runs, with their positions in the plan.
    pub fn taken(&self) -> impl Iterator<Item = (usize, &Unit)> {
        self.units.iter().enumerate().filter(|(position, _)| self.shard.is_none_or(|shard| shard.takes(*position)))
    }
}

/// `shard` of a shard's `sweep.json`: how the plan was cut, and which part this is.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ShardInfo {
    /// This shard.
    pub shard: Shard,
    /// sha256 of the plan file: every shard of one sweep runs the same plan.
    pub plan_sha256: String,
    /// Every unit of the plan, in plan order.
    pub units: Vec<ShardUnit>,
}

/// One unit of the plan as a shard records it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ShardUnit {
    /// The shard it belongs to.
    pub shard: u32,
    /// What it is.
    pub unit: Unit,
    /// The runtimes of its cells.
    pub runtimes: Vec<String>,
    /// The serials it resolved to, in order; filled for the recording shard's own units only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub devices: Vec<String>,
}

impl ShardInfo {
    /// The cut without what only this shard knows (its units' devices): equal for every shard of one sweep.
    pub fn plan_cut(&self) -> Vec<(u32, &Unit, &[String])> {
        self.units.iter().map(|u| (u.shard, &u.unit, u.runtimes.as_slice())).collect()
    }

    /// Why a sweep directory holding this shard cannot be resumed as `other`, and the fix, if it cannot.
    pub fn differs_from(&self, other: &ShardInfo) -> Option<String> {
        if self.shard != other.shard {
            return Some(format!(
                "holds shard {} of its sweep, not {}; resume it with --shard {}",
                self.shard, other.shard, self.shard
            ));
        }
        if self.plan_sha256 != other.plan_sha256 {
            return Some(format!(
                "holds shard {} of another version of the plan (sha256 {}); resume it with that plan",
                self.shard, self.plan_sha256
            ));
        }
        if self.plan_cut() != other.plan_cut() {
            let units: Vec<String> = self.units.iter().map(|u| u.unit.label()).collect();
            return Some(format!(
                "holds shard {} of a plan cut into other units ({}); resume it with those devices",
                self.shard,
                units.join(", ")
            ));
        }
        None
    }
}

/// `merged` of a merged `sweep.json`: which shards it was put together from, and which are missing.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MergeInfo {
    /// How many shards the plan was cut into.
    pub count: u32,
    /// sha256 of the plan file the shards ran.
    pub plan_sha256: String,
    /// The shards merged, by index.
    pub shards: Vec<MergedShard>,
    /// The shards that were not among the merged directories: their cells are absent.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<MissingShard>,
}

/// A shard that was merged.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MergedShard {
    /// Its index (I of I/N).
    pub index: u32,
    /// The directory it was merged from, as given.
    pub dir: String,
    /// When it first started (RFC 3339, UTC).
    pub started_at: String,
    /// When its last invocation ended; absent when it was killed and not resumed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
}

/// A shard no merged directory held.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MissingShard {
    /// Its index (I of I/N).
    pub index: u32,
    /// Its units, whose cells are absent.
    pub units: Vec<Unit>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shard_is_i_of_n_with_i_from_1_to_n() {
        assert_eq!("2/3".parse::<Shard>(), Ok(Shard { index: 2, count: 3 }));
        assert_eq!("1/1".parse::<Shard>().unwrap().to_string(), "1/1");
        for wrong in ["0/3", "4/3", "3", "a/3", "1/0", "-1/3", "1/3/4", ""] {
            let error = wrong.parse::<Shard>().unwrap_err();
            assert!(error.contains("write I/N with 1 ≤ I ≤ N"), "{wrong}: {error}");
        }
        assert_eq!(Shard { index: 2, count: 3 }.folder(), "shard-2-of-3");
    }

    #[test]
    fn every_unit_is_in_exactly_one_shard_round_robin_in_plan_order() {
        let units: Vec<Unit> = (0..7).map(|n| Unit::Serial(format!("d{n}"))).collect();
        let taken = |index: u32| -> Vec<String> {
            let cut = Cut { units: units.clone(), shard: Some(Shard { index, count: 3 }) };
            cut.taken().map(|(_, unit)| unit.label()).collect()
        };
        assert_eq!(taken(1), ["device d0", "device d3", "device d6"]);
        assert_eq!(taken(2), ["device d1", "device d4"]);
        assert_eq!(taken(3), ["device d2", "device d5"]);
        assert_eq!(Cut { units: units.clone(), shard: None }.taken().count(), 7);
        let five = Cut { units: units[..2].to_vec(), shard: Some(Shard { index: 3, count: 5 }) };
        assert_eq!(five.taken().count(), 0, "more shards than units: some shards run nothing");
    }
}
