"""Datasets: session groups -> validated, versioned Parquet datasets and their splits (DESIGN section 9)."""
