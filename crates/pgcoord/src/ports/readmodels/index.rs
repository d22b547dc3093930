//! [`IndexDescriptor`]: an index declared on a read model's table.

/// A declared index on a read model's table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexDescriptor {
    /// The index name; `idx_{table}_{columns}` when `None`.
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
}
