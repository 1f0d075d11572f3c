"""Sources of classifier outputs and their HDF5 dumps (docs/architecture.md §3)."""
