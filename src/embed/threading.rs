//! ONNX Runtime's thread settings for the model's session: how many intra-op threads,
//! and whether idle workers spin ([`Spin`]), from a command's flags or the environment.

/// Environment variable: ONNX Runtime intra-op threads (default: every core).
pub(crate) const ENV_THREADS: &str = "CAIRN_EMBED_THREADS";
/// Environment variable: whether ONNX Runtime spins, `on`, `off` or `auto`
/// (default: off, except for `cairn reindex`, where it is `auto`).
pub(crate) const ENV_SPIN: &str = "CAIRN_EMBED_SPIN";

/// ONNX Runtime's thread settings for one session.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Threading {
    /// Intra-op threads; `None` or 0 uses every available core.
    pub(crate) threads: Option<usize>,
    /// Whether idle workers spin (`session.intra_op.allow_spinning`). Spinning
    /// wins throughput when the cores are free and loses it (and burns CPU)
    /// when other processes need them.
    pub(crate) spin: bool,
}

impl Threading {
    /// The thread count this setting gives on this machine.
    pub(crate) fn thread_count(&self) -> usize {
        self.threads
            .filter(|&n| n > 0)
            .unwrap_or_else(available_cores)
    }

    /// `threads` (`None` or 0: every core) with `spin` resolved for them.
    pub(crate) fn resolve(threads: Option<usize>, spin: Spin) -> Threading {
        let threads = threads.filter(|&n| n > 0);
        let count = Threading {
            threads,
            spin: false,
        }
        .thread_count();
        Threading {
            threads,
            spin: spin.resolve(count),
        }
    }

    /// The settings of [`ENV_THREADS`] and [`ENV_SPIN`], with `spin` where
    /// [`ENV_SPIN`] is unset (an invalid value is ignored with a warning).
    pub(crate) fn from_env(spin: Spin) -> Threading {
        fn var<T: std::str::FromStr>(name: &str) -> Option<T> {
            let value = std::env::var(name).ok().filter(|v| !v.trim().is_empty())?;
            let parsed = value.trim().parse().ok();
            if parsed.is_none() {
                tracing::warn!(name, value, "ignored an invalid setting");
            }
            parsed
        }
        Threading::resolve(var(ENV_THREADS), var(ENV_SPIN).unwrap_or(spin))
    }
}

/// The cores this process may use (1 if unknown).
pub(crate) fn available_cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Whether ONNX Runtime's idle workers spin.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Spin {
    /// Spin when the 1-minute load average plus the model's threads fit in
    /// the machine's cores (the cores are otherwise free).
    #[default]
    Auto,
    /// Always spin: fastest on a machine the model has to itself.
    On,
    /// Never spin: kinder to a machine shared with other work.
    Off,
}

impl std::str::FromStr for Spin {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Spin, String> {
        match s.to_ascii_lowercase().as_str() {
            "auto" => Ok(Spin::Auto),
            "on" | "1" | "true" | "yes" => Ok(Spin::On),
            "off" | "0" | "false" | "no" => Ok(Spin::Off),
            _ => Err(format!("{s:?} is not one of auto, on, off")),
        }
    }
}

impl Spin {
    /// Whether to spin with `threads` intra-op threads on this machine now.
    pub(crate) fn resolve(self, threads: usize) -> bool {
        match self {
            Spin::On => true,
            Spin::Off => false,
            Spin::Auto => load_average()
                .is_some_and(|load| load + threads as f64 <= available_cores() as f64 + 0.5),
        }
    }
}

/// The 1-minute load average (Linux), if readable.
fn load_average() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    text.split_whitespace().next()?.parse().ok()
}
