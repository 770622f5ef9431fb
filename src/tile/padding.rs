//! View padding, memory order and thread scope: the constants that qualify
//! masked and atomic accesses.

use std::fmt;

/// The value a masked load yields for elements outside the tensor span.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Padding {
    /// `0` (the default).
    #[default]
    Zero,
    /// `-0.0`; only for floating-point elements.
    NegZero,
    /// A quiet NaN; only for floating-point elements.
    Nan,
    /// `+inf`; only for floating-point elements.
    PosInf,
    /// `-inf`; only for floating-point elements.
    NegInf,
}

impl Padding {
    /// The padding value as f64.
    pub fn value(self) -> f64 {
        match self {
            Padding::Zero => 0.0,
            Padding::NegZero => -0.0,
            Padding::Nan => f64::NAN,
            Padding::PosInf => f64::INFINITY,
            Padding::NegInf => f64::NEG_INFINITY,
        }
    }

    /// Whether the padding exists only for floating-point elements.
    pub fn needs_float(self) -> bool {
        self != Padding::Zero
    }
}

impl fmt::Display for Padding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Padding::Zero => "zero",
            Padding::NegZero => "neg_zero",
            Padding::Nan => "nan",
            Padding::PosInf => "pos_inf",
            Padding::NegInf => "neg_inf",
        })
    }
}

/// The memory order of an atomic access.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MemoryOrder {
    /// No ordering beyond atomicity of each element.
    Relaxed,
    /// Loads: later accesses are not moved before it.
    Acquire,
    /// Stores: earlier accesses are not moved after it.
    Release,
    /// Both acquire and release (read-modify-write only).
    AcqRel,
    /// Plain accesses with no atomicity; the view's ordinary load and store.
    Weak,
}

impl MemoryOrder {
    /// The lower-case name (`relaxed`, `acquire`, ...).
    pub fn name(self) -> &'static str {
        match self {
            MemoryOrder::Relaxed => "relaxed",
            MemoryOrder::Acquire => "acquire",
            MemoryOrder::Release => "release",
            MemoryOrder::AcqRel => "acq_rel",
            MemoryOrder::Weak => "weak",
        }
    }
}

/// The set of threads an atomic access is atomic with respect to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ThreadScope {
    /// The threads of one block (one CTA on a GPU).
    Block,
    /// Every thread of the device.
    Device,
    /// Every thread of the system, host included.
    System,
}

impl ThreadScope {
    /// The lower-case name (`block`, `device`, `system`).
    pub fn name(self) -> &'static str {
        match self {
            ThreadScope::Block => "block",
            ThreadScope::Device => "device",
            ThreadScope::System => "system",
        }
    }
}
