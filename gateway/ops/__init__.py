"""Operations: state database, versioning, backup/restore, health, metrics, logs."""
