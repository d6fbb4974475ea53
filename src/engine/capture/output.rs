//! Where a captured output's text is to be had for counting its tokens, named when the output
//! ends and read later: a run's end should not wait for up to
//! [`crate::engine::tokens::EXACT_MAX_BYTES`] to be read back from its spill before its `exit` is given.

use std::path::PathBuf;

use crate::engine::tokens::{OutputText, Samples};
use crate::storage::spill::read_whole;

/// See [`super::Capture::take_output_source`].
#[derive(Debug)]
pub enum OutputSource {
    /// The head held every byte of the output.
    Head(Vec<u8>),
    /// The spill file holds every byte of an output of `total_bytes`; the samples are for when
    /// it cannot be read back after all (deleted meanwhile, say).
    Spill {
        path: PathBuf,
        total_bytes: u64,
        samples: Samples,
    },
    /// Samples of an output too long to count exactly, or that cannot be had back whole.
    Sampled { samples: Samples, total_bytes: u64 },
}

impl OutputSource {
    /// The text to count: reads the spill when the output is there (a blocking read of up to
    /// [`crate::engine::tokens::EXACT_MAX_BYTES`]).
    pub fn into_text(self) -> OutputText {
        match self {
            OutputSource::Head(head) => {
                OutputText::Whole(String::from_utf8_lossy(&head).into_owned())
            }
            OutputSource::Spill {
                path,
                total_bytes,
                samples,
            } => match read_whole(&path, total_bytes) {
                Some(text) => OutputText::Whole(text),
                None => OutputText::Sampled {
                    samples,
                    total_bytes,
                },
            },
            OutputSource::Sampled {
                samples,
                total_bytes,
            } => OutputText::Sampled {
                samples,
                total_bytes,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spill_that_cannot_be_read_back_gives_its_samples() {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("spill");
        std::fs::write(&path, "one\ntwo\n").unwrap();
        let samples = Samples::default();
        let source = |total_bytes| OutputSource::Spill {
            path: path.clone(),
            total_bytes,
            samples: samples.clone(),
        };
        assert_eq!(
            source(8).into_text(),
            OutputText::Whole("one\ntwo\n".into())
        );
        // Shorter than the output said: not the whole output, so not counted as if it were.
        assert_eq!(
            source(9).into_text(),
            OutputText::Sampled {
                samples: samples.clone(),
                total_bytes: 9
            }
        );
        std::fs::remove_file(&path).unwrap();
        assert!(matches!(source(8).into_text(), OutputText::Sampled { .. }));
    }
}
