"""The names of a run directory's files (docs/store.md, "A run directory"); every layer names them
from here (re-exported by :mod:`collapselab.store`)."""

MANIFEST_FILE = "manifest.json"
METRICS_FILE = "metrics.parquet"
CLAIMS_FILE = "claims.json"
REPORT_FILE = "report.html"
ARRAYS_DIR = "arrays"
FIGURES_DIR = "figures"
CHECKPOINTS_DIR = "checkpoints"
