"""The verdict between two arms on test: better / worse / equivalent within ±m / undecided, with
its uncertainty taken over seeds and over test images, Holm-adjusted across a report's comparisons.

Why each piece:
- Test, not validation: validation chose every configuration, so a Δ read there is biased toward
  the arm whose search fitted its noise best; test was read by nothing.
- Seeds and images: a test set of N images is itself a sample, so the seed-paired t-interval alone
  leaves out image noise and a per-image test alone leaves out seed-to-seed variation. The paired
  hierarchical bootstrap resamples, per replicate, the seeds (the pairs) with replacement and the
  test images with replacement, one image draw shared by both arms (pairing) and by every seed of
  the replicate: every run scored the same images, so an image that favours one arm does so in
  each seed, and drawing images anew per seed would average that effect away as if each seed had
  its own test set. Δ* = mean over the resampled seeds of acc(candidate) − acc(reference).
- TOST: "no significant difference" is no evidence of none; "equivalent within ±m" needs both
  one-sided tests (Δ ≤ −m, Δ ≥ +m) rejected at α, i.e. the (1 − 2α) interval inside (−m, +m).
- One claim per comparison: equivalence when its TOST p is ≤ α or below its two-sided p (a Δ
  inside the margin is, by the margin's definition, none that matters, even where it differs
  from 0), else a difference. The nulls "Δ = 0" and "|Δ| ≥ m" cannot both be true, so one claim
  errs at most at α; the k claims of a report are Holm-adjusted, so calling k comparisons does
  not multiply the chance of a false verdict by k.
- Both tests must pass where both exist: the percentile bootstrap over a handful of seeds
  understates their variation (it divides by n, not n − 1, and uses normal-like quantiles where the
  t uses t_{n-1}: with 3 seeds its interval is about 2.5× narrower than the t-interval), while the
  t-interval leaves out image noise. A claim's p is the larger of the two (bootstrap and t).
- Fewer than MIN_VERDICT_SEEDS seeds: the seed-to-seed variation is not measured and one seed's
  luck (0.3-1 point in our runs) would pass any per-image test on 10,000 images, so the image
  evidence (a bootstrap over images with the seeds held fixed; one seed: McNemar's exact test) is
  shown, but the verdict stays undecided.
Margins and Δ are accuracies as fractions (0.01 = 1 point). Pure numpy/scipy and seeded.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

from vitscale.analysis.statistics.paired import MIN_VERDICT_SEEDS, PairedDelta, paired_delta

ALPHA = 0.05  # per one-sided test of TOST, and the two-sided test of a difference
LEVEL = 0.95  # the intervals shown
N_RESAMPLES = 2000
NO_SPREAD = 1e-9  # a spread below this (1e-7 points) is float noise on identical differences
DIFFERENCE, EQUIVALENCE = "difference", "equivalence"  # what a comparison's p tests
BOOTSTRAP, T_TEST, BOTH = "bootstrap", "t", "bootstrap and t"  # where its p comes from


@dataclass
class Pair:
    """One comparison's test data: per seed each arm's top-1 and, where every paired seed has
    per-image predictions, seed -> (candidate, reference) correctness on the same images in the
    same order (1/0, or the mean over a seed's runs)."""

    candidate: dict
    reference: dict
    images: dict | None = None


@dataclass
class ImageBootstrap:
    """Δ on the common test images with the bootstrap's percentile interval."""

    mean: float
    low: float
    high: float
    n_seeds: int
    n_images: int
    over: str  # "seeds × images", or "images" (fewer than MIN_VERDICT_SEEDS seeds: held fixed)
    draws: np.ndarray = field(repr=False)


@dataclass
class Judgement:
    """A comparison's evidence, its claim's raw and Holm-adjusted p, and the verdict."""

    t: PairedDelta
    boot: ImageBootstrap | None = None
    mcnemar_p: float = math.nan  # one paired seed with predictions only
    route: str = ""  # BOTH | BOOTSTRAP | T_TEST; "" when no verdict is possible
    claim: str = ""  # DIFFERENCE | EQUIVALENCE
    p: float = math.nan
    p_holm: float = math.nan
    family: int = 0  # k: the comparisons the Holm adjustment ran over
    verdict: str = "undecided"

    @property
    def mean(self) -> float:
        """The Δ the verdict reads: the bootstrap's where it decided, else the seed-paired mean."""
        return self.boot.mean if self.boot is not None and self.route != T_TEST else self.t.mean


def hierarchical_bootstrap(
    candidate: np.ndarray,
    reference: np.ndarray,
    n_resamples: int,
    rng: np.random.Generator,
    seeds: bool = True,
) -> np.ndarray:
    """Δ* per replicate from (seeds, images) correctness arrays: seeds resampled with replacement
    (unless `seeds` is False) and one resample of the images shared by both arms and every seed.

    Images with the same per-seed differences are interchangeable, so a replicate draws how many of
    each such pattern it holds (a multinomial over a few hundred patterns, not B × N indices).
    """
    d = np.asarray(candidate, dtype=float) - np.asarray(reference, dtype=float)
    n_seeds, n_images = d.shape
    patterns, counts = _patterns(d)
    drawn = rng.multinomial(n_images, counts / counts.sum(), size=n_resamples)  # (B, patterns)
    per_seed = drawn @ patterns / n_images  # (B, seeds): each seed's Δ on the replicate's images
    if not seeds:
        return per_seed.mean(axis=1)
    picks = rng.integers(0, n_seeds, size=(n_resamples, n_seeds))
    weight = (picks[:, :, None] == np.arange(n_seeds)).sum(axis=1) / n_seeds
    return (per_seed * weight).sum(axis=1)


def _patterns(d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct columns of d (one per image: its Δ in each seed) and how many images have each;
    with 1/0 correctness a base-3 code per image finds them ~50x faster than np.unique(axis=0)."""
    if d.shape[0] <= 39 and np.isin(d, (-1.0, 0.0, 1.0)).all():
        codes = ((d + 1).astype(np.int64) * 3 ** np.arange(d.shape[0], dtype=np.int64)[:, None]).sum(axis=0)
        _, first, counts = np.unique(codes, return_index=True, return_counts=True)
        return d[:, first].T, counts
    return np.unique(d.T, axis=0, return_counts=True)


def bootstrap_p(draws: np.ndarray, margin: float) -> tuple[float, float]:
    """(two-sided p of Δ = 0, TOST p of |Δ| ≥ margin) from bootstrap draws (percentile method,
    (1 + count) / (B + 1) so no p is 0)."""
    b = draws.size

    def tail(mask: np.ndarray) -> float:
        return (1 + int(mask.sum())) / (b + 1)

    p_diff = min(1.0, 2 * min(tail(draws <= 0), tail(draws >= 0)))
    return p_diff, max(tail(draws <= -margin), tail(draws >= margin))


def t_p(delta: PairedDelta, margin: float) -> tuple[float, float]:
    """(two-sided p of Δ = 0, TOST p of |Δ| ≥ margin) from the seed-paired t statistic."""
    df, se = delta.n - 1, delta.se
    p_diff = float(2 * stats.t.sf(abs(delta.mean) / se, df))
    p_low = stats.t.sf((delta.mean + margin) / se, df)  # H0: Δ ≤ −margin
    p_high = stats.t.sf((margin - delta.mean) / se, df)  # H0: Δ ≥ +margin
    return p_diff, float(max(p_low, p_high))


def mcnemar_p(candidate: np.ndarray, reference: np.ndarray) -> float:
    """McNemar's exact test: two-sided binomial p of the discordant images (one right, one wrong)
    under 'either arm is as likely to be the right one'."""
    c, r = np.asarray(candidate, dtype=bool), np.asarray(reference, dtype=bool)
    wins, losses = int(np.sum(c & ~r)), int(np.sum(~c & r))
    n = wins + losses
    return 1.0 if n == 0 else float(min(1.0, 2 * stats.binom.cdf(min(wins, losses), n, 0.5)))


def holm(pvalues) -> np.ndarray:
    """Holm–Bonferroni adjusted p-values (step-down, monotone, capped at 1), in the input order."""
    p = np.asarray(pvalues, dtype=float)
    k = p.size
    order = np.argsort(p, kind="stable")
    adjusted = np.minimum(1.0, np.maximum.accumulate((k - np.arange(k)) * p[order]))
    out = np.empty(k)
    out[order] = adjusted
    return out


def equivalent_text(margin: float) -> str:
    """'equivalent within ±1' (the margin in points)."""
    return f"equivalent within ±{100 * margin:g}"


def judge(
    pairs: list[Pair],
    margin: float,
    alpha: float = ALPHA,
    n_resamples: int = N_RESAMPLES,
    seed: int = 0,
) -> list[Judgement]:
    """The verdict of each comparison of one report, Holm-adjusted across those that can be decided."""
    out = [
        _evidence(p, margin, alpha, n_resamples, np.random.default_rng([seed, i]))
        for i, p in enumerate(pairs)
    ]
    decided = [j for j in out if j.claim]
    for j, q in zip(decided, holm([j.p for j in decided]), strict=True):
        j.p_holm, j.family = float(q), len(decided)
        if q > alpha:
            j.verdict = "undecided"
        elif j.claim == EQUIVALENCE:
            j.verdict = equivalent_text(margin)
        else:
            j.verdict = "better" if j.mean > 0 else "worse"
    return out


def _evidence(
    pair: Pair, margin: float, alpha: float, n_resamples: int, rng: np.random.Generator
) -> Judgement:
    """Intervals, p-values and the claim of one comparison (its verdict waits for Holm)."""
    t = paired_delta(pair.candidate, pair.reference)
    j = Judgement(t)
    images = _stack(pair.images, t.seeds)
    if images is not None and n_resamples > 0:
        cand, ref = images
        over = t.n >= MIN_VERDICT_SEEDS
        draws = hierarchical_bootstrap(cand, ref, n_resamples, rng, seeds=over)
        low, high = np.percentile(draws, [50 * (1 - LEVEL), 50 * (1 + LEVEL)])
        j.boot = ImageBootstrap(
            float((cand - ref).mean()),
            float(low),
            float(high),
            t.n,
            cand.shape[1],
            "seeds × images" if over else "images",
            draws,
        )
        if t.n == 1 and np.isin(cand, (0, 1)).all() and np.isin(ref, (0, 1)).all():
            j.mcnemar_p = mcnemar_p(cand[0], ref[0])
    if t.n == 0:
        j.verdict = (
            "undecided (no paired seeds)"
            if pair.candidate and pair.reference
            else "undecided (no test top-1)"
        )
    elif t.n < MIN_VERDICT_SEEDS:
        j.verdict = _too_few_seeds(j)
    elif j.boot is not None and np.ptp(j.boot.draws) > NO_SPREAD:
        j.route = BOOTSTRAP
        p_diff, p_tost = bootstrap_p(j.boot.draws, margin)
        if math.isfinite(t.se) and t.se > NO_SPREAD:  # a claim must pass both: see the module doc
            j.route = BOTH
            t_diff, t_tost = t_p(t, margin)
            p_diff, p_tost = max(p_diff, t_diff), max(p_tost, t_tost)
    elif math.isfinite(t.se) and t.se > NO_SPREAD:
        j.route = T_TEST
        p_diff, p_tost = t_p(t, margin)
    else:
        j.verdict = f"undecided (n={t.n}: every seed gives the same Δ, so the interval says nothing)"
    if j.route:
        j.claim, j.p = (EQUIVALENCE, p_tost) if p_tost <= max(alpha, p_diff) else (DIFFERENCE, p_diff)
    return j


def _too_few_seeds(j: Judgement) -> str:
    why = f"n={j.t.n} seed{'s' if j.t.n > 1 else ''}: seed-to-seed variation not measured"
    if math.isfinite(j.mcnemar_p):
        why += f"; McNemar p={j.mcnemar_p:.2g} over {j.boot.n_images} images"
    return f"undecided ({why}; a verdict needs {MIN_VERDICT_SEEDS} seeds)"


def _stack(images: dict | None, seeds: list) -> tuple[np.ndarray, np.ndarray] | None:
    """(candidate, reference) as (seeds, images) arrays in the order of `seeds`; None unless every
    seed has both arms' correctness on the same number of images (at least one)."""
    if not images or not seeds or any(s not in images for s in seeds):
        return None
    cand = [np.asarray(images[s][0], dtype=float) for s in seeds]
    ref = [np.asarray(images[s][1], dtype=float) for s in seeds]
    sizes = {a.size for a in cand + ref}
    if len(sizes) != 1 or 0 in sizes:
        return None
    return np.stack(cand), np.stack(ref)
