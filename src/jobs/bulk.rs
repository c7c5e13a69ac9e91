//! What a bulk pause or resume takes and what it did.

/// Which jobs a bulk pause or resume takes: the owner's active jobs whose name starts with
/// `name_prefix` and that carry every one of `labels`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selection {
    /// Names starting with this.
    pub name_prefix: String,
    /// Every one of these labels, with these values.
    pub labels: Vec<(String, String)>,
}

impl Selection {
    /// Whether it selects every job of the owner.
    pub fn is_everything(&self) -> bool {
        self.name_prefix.is_empty() && self.labels.is_empty()
    }
}

/// What a bulk pause or resume did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Bulk {
    /// Jobs changed: paused (those paused already are left as they are, note and reason
    /// kept), or resumed (those not paused are left alone).
    pub count: u64,
    /// The first [`MAX_BULK_NAMES`] of them, in name order.
    pub names: Vec<String>,
}

/// Most names a bulk answer lists.
pub const MAX_BULK_NAMES: usize = 100;
