"""What the runs say: seed aggregates, paired Δ and verdicts, fronts, scaling-law fits, compute-optimal frontiers, axes, exponents, importance."""
