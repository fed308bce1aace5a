"""report.md: markdown building blocks and one module per family of sections."""
