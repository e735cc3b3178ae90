"""The decision log: SQLite and PostgreSQL storage, its schema, group commit and the checks of its fields."""
