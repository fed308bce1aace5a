"""vitscale: hyperparameter searches and scaling studies of ViT token mixers (SSoG vs attention)."""

__version__ = "0.1.0"
