//! No code: this crate exists for its dependencies' features (see its
//! Cargo.toml). Every tsjoin member depends on it so that every cargo
//! command (and maturin) builds arrow, parquet and DataFusion with the same
//! features, once.
