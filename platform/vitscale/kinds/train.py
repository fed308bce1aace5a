"""`kind: train`: Tune searches the study's space (grid or an Optuna sampler) over seeds; every trial
trains one model, is scored on validation and, when it ran all its epochs, once on test."""

from __future__ import annotations

from vitscale.kinds.registry import KindData, register_kind

TRAIN = register_kind(
    KindData(
        name="train",
        title="Training",
        trial_section="trial.train",
        default_objective=("val_top1", "max"),
        analysis_steps=(
            "aggregate_replicates",
            "training_fronts",
            "arms_and_verdicts",
            "learning_curves",
            "search_progress",
            "arms_tables",
            "scaling_fits",
            "compute_optimal",
            "axes",
            "cost_exponents",
            "fits_json",
            "training_figures",
            "importance",
        ),
        report_sections=(
            "paper_table",
            "deltas",
            "arms",
            "curves",
            "search_progress",
            "resolution",
            "axes",
            "configurations",
            "fronts",
            "fits",
            "compute",
            "exponents",
            "importance",
            "failures",
            "figures",
        ),
        series_label="mixer",
        report_counts=(
            "{used} used ({did_not_train} of them did not train), {failed} failed, "
            "{stopped_early} stopped early, {killed} killed, {other} other"
        ),
        report_statistics=(
            "Configuration statistics, fronts and fits use runs that finished their schedule (status "
            "FINISHED, not stopped early); failed, killed and stopped-early trials are counted beside them. "
            "Did-not-train runs (finished within 2 points of chance) stay in and are counted. Arm means and "
            "Δ: incomplete runs **{incomplete}** (`--incomplete {policy}`). `±` is the 95 % Student-t "
            "interval over seeds."
        ),
        cli_counts=(
            "{runs} trial runs{phases}: {used} used ({did_not_train} did not train), "
            "{failed} failed, {stopped_early} stopped early, {killed_or_other} killed/other"
        ),
        failures=(
            "Failed, stopped-early and did-not-train trials",
            "None: every trial finished its schedule and trained.",
            (
                ("trial_id", "trial"),
                ("mixer", "mixer"),
                ("regime", "regime"),
                ("width", "width"),
                ("resolution", "resolution"),
                ("seed", "seed"),
                ("status", "status"),
                ("stopped_early", "stopped early"),
                ("did_not_train", "did not train"),
                ("failure_reason", "reason"),
            ),
        ),
        summary_title="training",
        points_noun="grid point",
    )
)
