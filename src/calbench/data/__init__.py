"""Sources of classifier outputs and their HDF5 dumps (ARCHITECTURE.md §3)."""
