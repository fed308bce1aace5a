"""`kind: benchmark`: each trial times and measures one configuration of the `benchmark:` section
(mixer x regime x resolution x backend) over seeds: images/s, latency, peak memory, FLOPs. Nothing
trains, stops early or is searched, so none of that is in its summaries."""

from __future__ import annotations

from vitscale.kinds.registry import KindData, register_kind

BENCHMARK = register_kind(
    KindData(
        name="benchmark",
        title="Benchmark",
        trial_section="benchmark",
        default_objective=("images_per_second", "max"),
        analysis_steps=(
            "aggregate_configurations",
            "benchmark_fronts",
            "cost_exponents",
            "crossovers",
            "fits_json",
            "benchmark_figures",
        ),
        report_sections=("benchmark", "exponents", "importance", "failures", "figures"),
        series_label="series",
        report_counts="{used} measured, {failed} failed, {killed} killed, {other} other",
        report_statistics=(
            "Statistics use the configurations that were measured (status FINISHED); failed and killed "
            "trials are counted beside them. `±` is the 95 % Student-t interval over seeds."
        ),
        cli_counts="{runs} trial runs: {used} measured, {failed} failed, {killed_or_other} killed/other",
        failures=(
            "Failed trials",
            "None: every configuration was measured.",
            (
                ("trial_id", "trial"),
                ("series", "series"),
                ("regime", "regime"),
                ("resolution", "resolution"),
                ("seed", "seed"),
                ("status", "status"),
                ("failure_reason", "reason"),
            ),
        ),
        summary_title="benchmark",
        points_noun="configuration",
    )
)
