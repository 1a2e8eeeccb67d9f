//! CPU lists as the kernel writes them.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// A set of CPUs written the way the kernel writes them: `0`, `0-3,6`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(try_from = "String", into = "String")]
#[schemars(extend("pattern" = "^[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*$"))]
pub struct CpuList(Vec<u32>);

impl CpuList {
    pub fn new(mut cpus: Vec<u32>) -> Self {
        cpus.sort_unstable();
        cpus.dedup();
        CpuList(cpus)
    }
    pub fn cpus(&self) -> &[u32] {
        &self.0
    }
    pub fn contains(&self, cpu: u32) -> bool {
        self.0.binary_search(&cpu).is_ok()
    }
    pub fn len(&self) -> usize {
        self.0.len()
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Why a CPU list did not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuListError(pub String);

impl fmt::Display for CpuListError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for CpuListError {}

// A bound on list size keeps "0-4294967295" from allocating gigabytes.
const MAX_CPU: u32 = 1 << 16;

impl FromStr for CpuList {
    type Err = CpuListError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        if s.is_empty() {
            return Err(CpuListError("empty CPU list".into()));
        }
        let mut cpus = Vec::new();
        for part in s.split(',') {
            let part = part.trim();
            let num = |t: &str| -> Result<u32, CpuListError> {
                let n: u32 = t
                    .parse()
                    .map_err(|_| CpuListError(format!("'{t}' is not a CPU number")))?;
                if n >= MAX_CPU {
                    return Err(CpuListError(format!("CPU {n} is out of range")));
                }
                Ok(n)
            };
            match part.split_once('-') {
                Some((a, b)) => {
                    let (a, b) = (num(a)?, num(b)?);
                    if a > b {
                        return Err(CpuListError(format!("range '{part}' runs backwards")));
                    }
                    cpus.extend(a..=b);
                }
                None => cpus.push(num(part)?),
            }
        }
        Ok(CpuList::new(cpus))
    }
}

impl fmt::Display for CpuList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        let mut i = 0;
        while i < self.0.len() {
            let start = self.0[i];
            let mut end = start;
            while i + 1 < self.0.len() && self.0[i + 1] == end + 1 {
                i += 1;
                end = self.0[i];
            }
            if !first {
                f.write_str(",")?;
            }
            first = false;
            if start == end {
                write!(f, "{start}")?;
            } else {
                write!(f, "{start}-{end}")?;
            }
            i += 1;
        }
        Ok(())
    }
}

impl TryFrom<String> for CpuList {
    type Error = CpuListError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<CpuList> for String {
    fn from(c: CpuList) -> String {
        c.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_list_round_trips() {
        let l: CpuList = "0-3,6".parse().unwrap();
        assert_eq!(l.cpus(), &[0, 1, 2, 3, 6]);
        assert_eq!(l.to_string(), "0-3,6");
        assert_eq!("5".parse::<CpuList>().unwrap().to_string(), "5");
        assert_eq!("3,1,2".parse::<CpuList>().unwrap().to_string(), "1-3");
    }

    #[test]
    fn cpu_list_rejects_nonsense() {
        assert!("".parse::<CpuList>().is_err());
        assert!("a".parse::<CpuList>().is_err());
        assert!("3-1".parse::<CpuList>().is_err());
        assert!("0-99999999".parse::<CpuList>().is_err());
    }
}
