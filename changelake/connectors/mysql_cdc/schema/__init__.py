"""Table schemas: the schema tracker, MySQL column types, DDL statements."""
