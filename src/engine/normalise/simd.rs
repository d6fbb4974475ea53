//! Which vector instructions the normaliser's scan (and the highlighter's prefilter) uses: the
//! widest the CPU has, detected once per process, or fewer when [`SIMD_ENV`] asks for fewer. The cap exists to measure and check
//! the narrower forms on a CPU that has wider ones (the AVX2 block pass on an AVX-512 machine,
//! say): every form must give the same text, and each must be timed where it will run.

use std::sync::OnceLock;

/// Environment variable capping the vector instructions the scan uses: `avx512`, `avx2` or
/// `sse2` (the x86-64 baseline). Unset, the widest the CPU has.
const SIMD_ENV: &str = "SPILLWAY_SIMD";

/// A set of vector instructions the scan has a form for. Only made by detection, so holding
/// `Level::AVX512` (say) means the CPU has those instructions: the `unsafe` calls of each
/// form rest on that.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Level(Kind);

/// Narrowest first, so `min` caps a level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    /// SSE2 on x86-64 (every x86-64 CPU has it), plain code elsewhere.
    Baseline,
    /// AVX2 with POPCNT, LZCNT and BMI1: every x86-64 CPU since 2013 (Haswell, Zen).
    Avx2,
    /// AVX-512 BW and VBMI2 besides: Intel since Ice Lake, AMD since Zen 4.
    Avx512,
}

impl Level {
    /// The level this process uses: the widest the CPU has, capped by [`SIMD_ENV`].
    pub fn get() -> Level {
        static LEVEL: OnceLock<Level> = OnceLock::new();
        *LEVEL.get_or_init(|| {
            let best = Level::detected();
            match std::env::var(SIMD_ENV) {
                Err(_) => best,
                Ok(name) => match Level::named(&name) {
                    Some(cap) => best.min(cap),
                    None => {
                        eprintln!(
                            "spillway: {SIMD_ENV}={name:?} is not avx512, avx2 or sse2; \
                             using {}",
                            best.name()
                        );
                        best
                    }
                },
            }
        })
    }

    /// Every level this CPU can run, narrowest first: what the tests hold against each other.
    #[cfg(test)]
    pub fn supported() -> Vec<Level> {
        let best = Level::detected();
        [Kind::Baseline, Kind::Avx2, Kind::Avx512]
            .into_iter()
            .map(Level)
            .filter(|&level| level <= best)
            .collect()
    }

    /// Whether the AVX2 forms may run.
    pub fn avx2(self) -> bool {
        self.0 >= Kind::Avx2
    }

    /// Whether the AVX-512 forms may run.
    pub fn avx512(self) -> bool {
        self.0 >= Kind::Avx512
    }

    /// The name [`SIMD_ENV`] takes for this level.
    pub fn name(self) -> &'static str {
        match self.0 {
            Kind::Baseline => "sse2",
            Kind::Avx2 => "avx2",
            Kind::Avx512 => "avx512",
        }
    }

    fn named(name: &str) -> Option<Level> {
        let kind = match name.trim().to_ascii_lowercase().as_str() {
            "sse2" | "baseline" => Kind::Baseline,
            "avx2" => Kind::Avx2,
            "avx512" => Kind::Avx512,
            _ => return None,
        };
        Some(Level(kind))
    }

    #[cfg(target_arch = "x86_64")]
    fn detected() -> Level {
        use std::arch::is_x86_feature_detected as has;
        let avx2 = has!("avx2") && has!("popcnt") && has!("lzcnt") && has!("bmi1");
        Level(if avx2 && has!("avx512bw") && has!("avx512vbmi2") {
            Kind::Avx512
        } else if avx2 {
            Kind::Avx2
        } else {
            Kind::Baseline
        })
    }

    #[cfg(not(target_arch = "x86_64"))]
    fn detected() -> Level {
        Level(Kind::Baseline)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cap_never_raises_the_level() {
        let best = Level::detected();
        for name in ["sse2", "avx2", "avx512", " AVX2 "] {
            let cap = Level::named(name).expect(name);
            assert!(best.min(cap) <= best);
            assert_eq!(Level::named(cap.name()), Some(cap));
        }
        assert_eq!(Level::named("avx1024"), None);
        assert_eq!(Level::supported().last(), Some(&best));
    }
}
