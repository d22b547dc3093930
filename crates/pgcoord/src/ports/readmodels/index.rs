//! [`IndexDescriptor`]: an index declared on a read model's table.

/// A declared index on a read model's table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexDescriptor {
    /// The index name; when `None`, [`IndexDescriptor::name_on`] makes one.
    pub name: Option<String>,
    /// The indexed columns, in order.
    pub columns: Vec<String>,
    /// True for a unique index.
    pub unique: bool,
    /// A predicate making the index partial, applied on PostgreSQL only
    /// (SQLite gets the full index).
    pub postgres_where: Option<String>,
}

impl IndexDescriptor {
    /// A plain index on `columns`.
    pub fn on<I, S>(columns: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self {
            name: None,
            columns: columns.into_iter().map(Into::into).collect(),
            unique: false,
            postgres_where: None,
        }
    }

    /// Makes the index unique.
    pub fn unique(mut self) -> Self {
        self.unique = true;
        self
    }

    /// Names the index.
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Makes the index partial on PostgreSQL.
    pub fn postgres_where(mut self, predicate: impl Into<String>) -> Self {
        self.postgres_where = Some(predicate.into());
        self
    }

    /// The index's name on `table`: its own name when it has one, otherwise
    /// `idx_{table}_{columns joined by _}` cut to fit, then `_` and a hash of
    /// the table, the exact column list and whether the index is unique.
    /// Two indexes differing in any of those never share a name, and the
    /// name stays within 52 bytes, so PostgreSQL (63
    /// bytes) never truncates it, even with a `_v{N}` version suffix.
    pub fn name_on(&self, table: &str) -> String {
        match &self.name {
            Some(name) => name.clone(),
            None => generated_name(table, &self.columns, self.unique),
        }
    }

    /// The name earlier releases gave an unnamed index,
    /// `idx_{table}_{columns joined by _}` (ambiguous, and truncated by
    /// PostgreSQL past 63 bytes); `None` for a named index.
    pub fn legacy_name_on(&self, table: &str) -> Option<String> {
        self.name
            .is_none()
            .then(|| format!("idx_{table}_{}", self.columns.join("_")))
    }
}

/// The longest name [`IndexDescriptor::name_on`] generates, in bytes: 52,
/// leaving room for a `_v{u32}` suffix within PostgreSQL's 63.
pub(crate) const MAX_GENERATED_NAME: usize = 52;

/// Hex digits of the hash ending a generated name (40 bits).
const HASH_HEX: usize = 10;

fn generated_name(table: &str, columns: &[String], unique: bool) -> String {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    // Lengths first, so no two lists of names hash the same bytes.
    hasher.update((table.len() as u64).to_be_bytes());
    hasher.update(table.as_bytes());
    for column in columns {
        hasher.update((column.len() as u64).to_be_bytes());
        hasher.update(column.as_bytes());
    }
    hasher.update([u8::from(unique)]);
    let digest = hasher.finalize();
    let hash: String = digest
        .iter()
        .take(HASH_HEX / 2)
        .map(|b| format!("{b:02x}"))
        .collect();
    let mut readable = format!("idx_{table}_{}", columns.join("_"));
    let room = MAX_GENERATED_NAME - HASH_HEX - 1;
    if readable.len() > room {
        let mut cut = room;
        while !readable.is_char_boundary(cut) {
            cut -= 1;
        }
        readable.truncate(cut);
    }
    format!("{readable}_{hash}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_names_tell_apart_columns_uniqueness_and_tables() {
        let joined = IndexDescriptor::on(["order_date"]).name_on("t");
        let split = IndexDescriptor::on(["order", "date"]).unique().name_on("t");
        let split_plain = IndexDescriptor::on(["order", "date"]).name_on("t");
        assert_ne!(joined, split);
        assert_ne!(split, split_plain);
        assert_ne!(
            IndexDescriptor::on(["b_c"]).name_on("a"),
            IndexDescriptor::on(["c"]).name_on("a_b")
        );
        assert!(joined.starts_with("idx_t_order_date_"), "{joined}");
        assert_eq!(joined, IndexDescriptor::on(["order_date"]).name_on("t"));
        let named = IndexDescriptor::on(["x"]).named("mine");
        assert_eq!(named.name_on("t"), "mine");
        assert_eq!(named.legacy_name_on("t"), None);
    }

    #[test]
    fn long_generated_names_fit_and_stay_distinct() {
        let table = "p5_customer_loyalty_program_membership_snapshots_é_long";
        let a = IndexDescriptor::on(["region_code_primary"]).name_on(table);
        let b = IndexDescriptor::on(["region_code_secondary"])
            .unique()
            .name_on(table);
        assert_ne!(a, b);
        assert!(a.len() <= MAX_GENERATED_NAME && b.len() <= MAX_GENERATED_NAME);
        assert!(a.starts_with("idx_p5_customer_loyalty"), "{a}");
    }
}
