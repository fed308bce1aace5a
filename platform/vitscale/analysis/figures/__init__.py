"""The figures, headless: one canvas and style for all, one module per family of figures."""
