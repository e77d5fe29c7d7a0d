"""The statistics of one causal curve: points, fit, intervals, drift.

Pure numpy, arrays in and numbers out; `analysis.py` gathers the arrays
from parsed profiles. `docs/analysis.md` (section 4) explains every step and
gives the figures of the simulation (`tests/python/test_statistics.py`) that
chose it.

One experiment i contributes a pair (x_i, c_i) at line speedup s_i: for a
throughput point x is its effective duration and c the visits of the point;
for a latency point x is 2 * in-flight * duration and c arrivals plus
departures, so that in both cases the period (time per visit, or latency) of
a group of experiments is sum(x) / sum(c). The counts c are the random part;
the statistics are linear in them wherever that is possible.
"""

import functools
import math
from statistics import NormalDist

import numpy as np

CI_LEVEL = 0.95
DRIFT_MIN_BASELINES = 8   # 0% experiments a curve needs before drift is tested for
DRIFT_NEIGHBOURS = 6      # 0% experiments that make the local baseline of an experiment
DRIFT_TEST_Z = 1.645      # von Neumann ratio test of the baselines, one-sided 5%
DRIFT_SPLIT_Z = 3.0       # CUSUM statistic that splits the baselines at a change of speed
PRIOR_NOISE = 0.01        # relative noise of one experiment assumed before any is seen ...
PRIOR_DF = 1              # ... worth this many degrees of freedom
CARRY_MIN = 100           # experiments after one of another speedup that the carry-over needs
CARRY_P = 0.0027          # ... and the chance of a carry-over that large without one (3 sigma)


def carry_over(s, x, c, s_prev):
    """How much an experiment's rate of progress still follows the speedup of
    the experiment before it (any unit's; NaN where none ran before it in
    the run): beta in rate = R(s) * (1 + beta * (s_prev - s)), by least
    squares weighted by x, one level R(s) per speedup (linear in the levels
    and R(s) * beta; R(s) in the last column is the previous pass's levels,
    the first pass's column s_prev - s alone). 0.0 unless it stands out of
    the noise (two-sided Student's t at CARRY_P) on CARRY_MIN or more
    experiments that followed one of another speedup, both after slower and
    after faster ones (docs/analysis.md, "The carry-over between
    experiments")."""
    d = np.asarray(s_prev, dtype=float) - s
    k = np.isfinite(d)
    if (d[k] != 0).sum() < CARRY_MIN or not ((d[k] > 0).any() and (d[k] < 0).any()):
        return 0.0
    uniq, inv = np.unique(s[k], return_inverse=True)
    if uniq[0] != 0.0 or (x[k] <= 0).any():
        return 0.0
    n, p = int(k.sum()), len(uniq) + 1
    if n <= p + 1:
        return 0.0
    w = np.sqrt(x[k])
    b = c[k] / x[k] * w
    levels = np.ones(len(uniq))
    for _ in range(3):
        A = np.zeros((n, p))
        A[np.arange(n), inv] = 1.0
        A[:, -1] = d[k] * levels[inv]
        A *= w[:, None]
        coef, *_ = np.linalg.lstsq(A, b, rcond=None)
        if (coef[:-1] <= 0).any():
            return 0.0
        levels = coef[:-1]
    r = b - A @ coef
    cov = float(r @ r) / (n - p) * np.linalg.pinv(A.T @ A)
    se = math.sqrt(max(float(cov[-1, -1]), 0.0))
    if abs(float(coef[-1])) <= t_quantile(1.0 - CARRY_P / 2, n - p) * se:
        return 0.0
    return float(coef[-1])


def estimate(s, x, c, factor=1.0, drift_min_baselines=None, s_prev=None):
    """The causal curve of one (line, progress point).

    `s`, `x`, `c`: arrays, one entry per experiment, in the order the
    experiments ran (the timeline drift is looked for along). `factor` is
    the phase correction applied to program speedups. `s_prev`: the speedup
    of the experiment before each in its run (NaN: none); where the rates
    follow it (carry_over), each experiment's x is scaled to the rate it
    would have had after one of its own speedup, the program staying at
    one speedup as a real change would. Returns None when the
    0% experiments made no progress, else a dict:

      speedups   sorted line speedups with progress, 0 first
      y          program speedup at each (0 at 0 by definition)
      ci         (L, 2) array, 95% interval of each point ([0, 0] at 0)
      n          experiments at each speedup
      slope, intercept, slope_ci, r2
      drift      whether the baselines showed drift and local baselines were used
      df         degrees of freedom of the noise estimate (prior included)
      carry_over beta of carry_over, 0.0 where not established or not given
    """
    s = np.asarray(s, dtype=float)
    x = np.asarray(x, dtype=float)
    c = np.asarray(c, dtype=float)
    beta = 0.0
    if s_prev is not None:
        beta = carry_over(s, x, c, s_prev)
        if beta:
            d = np.nan_to_num(np.asarray(s_prev, dtype=float) - s, nan=0.0)
            x = x * np.clip(1.0 + beta * d, 0.5, 2.0)
    if drift_min_baselines is None:
        drift_min_baselines = DRIFT_MIN_BASELINES
    base = np.flatnonzero(s == 0.0)
    XB, CB = float(x[base].sum()), float(c[base].sum())
    if len(base) == 0 or CB <= 0 or XB <= 0:
        return None
    rho = CB / XB                                   # pooled baseline rate (visits per unit x)

    # Speedup levels with progress; level[i] is experiment i's (-1: baseline or none).
    uniq, inv = np.unique(s, return_inverse=True)
    has = (uniq > 0.0) & (np.bincount(inv, weights=c, minlength=len(uniq)) > 0)
    index = np.where(has, np.cumsum(has) - 1, -1)
    level = index[inv]
    speeds = uniq[has]
    L = len(speeds)
    sped = np.flatnonzero(level >= 0)
    lv = level[sped]
    n_lv = np.bincount(lv, minlength=L).astype(float)
    C = np.bincount(lv, weights=c[sped], minlength=L)
    rate = np.full(len(s), rho)                     # baseline rate at each experiment's moment

    # Noise model from the pooled residuals; it decides whether to look for drift.
    resid_mu, resid_r, df = _residuals(x, c, base, rate, sped, lv, C, n_lv, None)
    model = _NoiseModel(resid_mu, resid_r, df)
    mu_base = x[base] * rho
    drift = False
    if len(base) >= drift_min_baselines:
        v = model.interval_var(mu_base)
        if (v > 0).all():
            z = (c[base] - mu_base) / np.sqrt(v)
            drift = _drifts(z)
            if drift:
                bounds = _segments(z)
                near = _Neighbours(base, bounds, x, c)
                local_rate, nbr, wts, fallback = near.local(sped)
                rate[sped] = local_rate
                loo = near.leave_one_out()
                resid_mu, resid_r, df = _residuals(x, c, base, rate, sped, lv, C, n_lv, loo)
                df -= len(bounds) - 1
                model = _NoiseModel(resid_mu, resid_r, max(df, 0))
                mu_base = near.local_mu()

    # Points: y(s) = 1 - U/C, U the visits the baseline rate predicts, C those counted.
    u = x[sped] * rate[sped]
    U = np.bincount(lv, weights=u, minlength=L)
    Q = U / C
    mu_sped = u / Q[lv]
    var_b = model.interval_var(mu_base)
    var_lv = np.bincount(lv, weights=model.interval_var(mu_sped), minlength=L)
    fit_b = model.fit_var(mu_base)
    fit_lv = np.bincount(lv, weights=model.fit_var(mu_sped), minlength=L)

    # G[k, j]: how the predicted visits U of speedup k move with baseline j's count.
    if drift:
        G = np.zeros((L, len(base)))
        contrib = np.where(nbr >= 0, wts * x[sped][:, None], 0.0)
        np.add.at(G, (np.repeat(lv[:, None], nbr.shape[1], 1), np.maximum(nbr, 0)), contrib)
        # experiments whose neighbours made no progress fell back on the pooled rate
        G += np.bincount(lv, weights=np.where(fallback, x[sped], 0.0), minlength=L)[:, None] / XB
    else:
        G = np.outer(np.bincount(lv, weights=x[sped], minlength=L) / XB, np.ones(len(base)))

    var_q = ((G * G) @ var_b + Q * Q * var_lv) / (C * C)

    # Fit: least squares of y on s weighted by counts, i.e. the estimating equations
    # sum_i (1, s_i) (c_i (1 - a - b s_i) - u_i) = 0, linear in the counts.
    sp = np.concatenate([[0.0], speeds])
    w = np.concatenate([[CB], C])
    yr = np.concatenate([[0.0], 1.0 - Q])
    X = np.stack([np.ones(L + 1), sp], axis=1)
    H = (X * w[:, None]).T @ X
    theta = np.linalg.solve(H, (X * (w * yr)[:, None]).sum(axis=0))
    Hi = np.linalg.inv(H)
    yhat = X @ theta
    # Score sensitivities: baseline j moves its own term and every predicted u.
    M = np.outer(np.ones(len(base)), [1.0, 0.0]) + G.T @ X[1:]        # (nB, 2)
    g_base = (1.0 - yhat[0]) * np.array([1.0, 0.0])[None, :] - M
    own = (1.0 - yhat[1:]) ** 2
    v_score = (g_base * var_b[:, None]).T @ g_base + (X[1:] * (own * var_lv)[:, None]).T @ X[1:]
    cov_theta = Hi @ v_score @ Hi
    # Second-order bias of the ratio (E[1/C] > 1/E[C]), removed with the fitted noise.
    lev_lv = np.einsum("ij,jk,ik->i", X[1:], Hi, X[1:])
    bias = (X[1:] * (fit_lv * lev_lv * (1.0 - yhat[1:]))[:, None]).sum(axis=0)
    bias += np.array([1.0, 0.0]) * float((fit_b * (g_base @ Hi[:, 0])).sum())
    theta = theta + Hi @ bias

    t = t_quantile(0.5 + CI_LEVEL / 2, model.df_total)
    y = factor * (1.0 - Q)
    half = t * factor * np.sqrt(np.maximum(var_q, 0.0))
    intercept, slope = factor * float(theta[0]), factor * float(theta[1])
    slope_half = t * factor * math.sqrt(max(float(cov_theta[1, 1]), 0.0))

    yy = np.concatenate([[0.0], y])
    ym = float((w * yy).sum() / w.sum())
    ss_tot = float((w * (yy - ym) ** 2).sum())
    ss_res = float((w * (yy - intercept - slope * sp) ** 2).sum())
    r2 = max(0.0, 1.0 - ss_res / ss_tot) if ss_tot > 0 else 1.0
    return {
        "speedups": sp,
        "y": yy,
        "ci": np.stack([np.concatenate([[0.0], y - half]), np.concatenate([[0.0], y + half])], axis=1),
        "n": np.concatenate([[float(len(base))], n_lv]),
        "slope": slope,
        "intercept": intercept,
        "slope_ci": (slope - slope_half, slope + slope_half),
        "r2": r2,
        "drift": bool(drift),
        "df": model.df_total,
        "carry_over": beta,
    }


# -- the noise of one experiment's count ------------------------------------

def _residuals(x, c, base, rate, sped, lv, C, n_lv, loo):
    """Expected counts and unbiased squared residuals of every experiment that
    shares its speedup with another, and their degrees of freedom.

    Baselines are compared with the pooled baseline (`loo` None) or, under
    drift, with their neighbours (`loo` = (expected, squared residual))."""
    if loo is None:
        mu_b = x[base] * rate[base]
        lev = x[base] / x[base].sum()
        ok = lev < 1.0
        mu_b, r_b = mu_b[ok], (c[base][ok] - mu_b[ok]) ** 2 / (1.0 - lev[ok])
        df = len(base) - 1
    else:
        mu_b, r_b = loo
        df = len(mu_b)
    u = x[sped] * rate[sped]
    q = np.bincount(lv, weights=u, minlength=len(C)) / C
    mu = u / q[lv]
    lev = mu / C[lv]
    ok = (n_lv[lv] > 1) & (lev < 1.0)
    r = (c[sped][ok] - mu[ok]) ** 2 / (1.0 - lev[ok])
    df += int((n_lv[n_lv > 1] - 1).sum())
    return np.concatenate([mu_b, mu[ok]]), np.concatenate([r_b, r]), df


class _NoiseModel:
    """Variance of an experiment's count c as a function of its expected count mu.

    Two shapes are fitted to the squared residuals: a*mu (counting noise,
    Poisson-like) and b*mu^2 (a relative noise of the machine). Their
    combination a*mu + b*mu^2 (least squares, both non-negative) removes the
    ratio's bias; the intervals use max(a1*mu, b1*mu^2) of the one-shape
    fits, which agree where the residuals are and take the larger shape away
    from them (a singleton speedup far from the baselines' counts), with a
    weak prior of PRIOR_NOISE relative noise worth PRIOR_DF degrees of freedom."""

    def __init__(self, mu, r, df):
        ok = (mu > 0) & np.isfinite(r)
        mu, r = mu[ok], r[ok]
        self.df = int(df)
        self.df_total = max(0, self.df - 1) + PRIOR_DF
        self.a2 = self.b2 = 0.0
        a1 = b1 = 0.0
        center = 1.0
        if len(mu):
            a1 = _one_shape(mu, r, 1)
            b1 = _one_shape(mu, r, 2)
            self.a2, self.b2 = _two_shapes(mu, r)
            center = float(np.exp(np.log(mu).mean()))
        p2 = PRIOR_NOISE ** 2
        wd = max(self.df, 0)
        self.a1 = (wd * a1 + PRIOR_DF * p2 * center) / (wd + PRIOR_DF)
        self.b1 = (wd * b1 + PRIOR_DF * p2) / (wd + PRIOR_DF)

    def interval_var(self, mu):
        return np.maximum(self.a1 * mu, self.b1 * mu * mu)

    def fit_var(self, mu):
        return self.a2 * mu + self.b2 * mu * mu


def _one_shape(mu, r, power):
    """phi for Var = phi * mu**power, weighted least squares (weights 1/Var^2)."""
    f = mu ** power
    phi = float((r / f).mean())
    for _ in range(2):
        if phi <= 0:
            return 0.0
        w = 1.0 / (phi * f) ** 2
        phi = float((w * f * r).sum() / (w * f * f).sum())
    return max(phi, 0.0)


def _two_shapes(mu, r):
    """(a, b) >= 0 for Var = a*mu + b*mu^2, iteratively reweighted least squares."""
    w = 1.0 / (mu * mu)
    a = b = 0.0
    mu2 = mu * mu
    for _ in range(3):
        # normal equations of the weighted problem, then the best non-negative face
        s11 = float((w * mu * mu).sum())
        s12 = float((w * mu * mu2).sum())
        s22 = float((w * mu2 * mu2).sum())
        b1 = float((w * mu * r).sum())
        b2 = float((w * mu2 * r).sum())
        a, b = _nonneg_lstsq2(s11, s12, s22, b1, b2)
        v = a * mu + b * mu2
        if not (v > 0).all():
            break
        w = 1.0 / (v * v)
    return a, b


def _nonneg_lstsq2(s11, s12, s22, b1, b2):
    """Minimise |A (a, b) - y|^2 with a, b >= 0, given A'A = [[s11, s12], [s12, s22]]
    and A'y = (b1, b2): the free solution if it is non-negative, else the better
    of the two one-unknown solutions."""
    def loss(a, b):  # |A(a,b) - y|^2 minus the constant |y|^2
        return a * a * s11 + 2 * a * b * s12 + b * b * s22 - 2 * (a * b1 + b * b2)
    cands = [(max(0.0, b1 / s11) if s11 > 0 else 0.0, 0.0),
             (0.0, max(0.0, b2 / s22) if s22 > 0 else 0.0)]
    det = s11 * s22 - s12 * s12
    if det > 1e-12 * s11 * s22:
        a = (b1 * s22 - b2 * s12) / det
        b = (b2 * s11 - b1 * s12) / det
        if a >= 0 and b >= 0:
            cands.append((a, b))
    return min(cands, key=lambda ab: loss(*ab))


# -- drift --------------------------------------------------------------------

def _drifts(z):
    """Von Neumann's ratio test: successive baselines that resemble each other more
    than the baselines as a whole do mean that the machine's speed moved."""
    n = len(z)
    den = float(((z - z.mean()) ** 2).sum())
    if n < 3 or den <= 0:
        return False
    ratio = float((np.diff(z) ** 2).sum()) / den
    sd = 2.0 * math.sqrt((n - 2) / ((n - 1) * (n + 1)))
    return ratio < 2.0 - DRIFT_TEST_Z * sd


def _segments(z):
    """Split the baselines where their level jumps (binary segmentation, CUSUM);
    returns (start, end) index ranges into the baselines."""
    n = len(z)
    s2 = float((np.diff(z) ** 2).sum()) / (2.0 * max(1, n - 1))  # noise, robust to jumps
    out = []
    todo = [(0, n)]
    while todo:
        lo, hi = todo.pop()
        m = hi - lo
        if m < 4 or s2 <= 0:
            out.append((lo, hi))
            continue
        seg = z[lo:hi]
        cs = np.cumsum(seg - seg.mean())[:-1]
        k = np.arange(1, m)
        stat = np.abs(cs) / np.sqrt(s2 * k * (m - k) / m)
        stat[:1] = 0.0           # each side keeps at least two baselines
        stat[m - 2:] = 0.0
        best = int(np.argmax(stat))
        if stat[best] > DRIFT_SPLIT_Z:
            todo.append((lo, lo + best + 1))
            todo.append((lo + best + 1, hi))
        else:
            out.append((lo, hi))
    return sorted(out)


class _Neighbours:
    """Local baselines: the DRIFT_NEIGHBOURS 0% experiments nearest in time within
    the same stretch of machine speed; an experiment that ran between two
    stretches gets the mean of both stretches' local rates."""

    def __init__(self, base, bounds, x, c):
        self.pos = base                      # timeline positions of the baselines
        self.x = x[base]
        self.c = c[base]
        self.bounds = bounds
        self.seg = np.empty(len(base), dtype=int)
        for k, (lo, hi) in enumerate(bounds):
            self.seg[lo:hi] = k
        self.lo = np.array([b[0] for b in bounds])[self.seg]
        self.hi = np.array([b[1] for b in bounds])[self.seg]

    def _nearest(self, p, anchor, lo, hi, exclude=None):
        """(m, K) indices into the baselines (-1 = none) nearest to positions p,
        searched among baselines [lo, hi) around index `anchor`."""
        K = DRIFT_NEIGHBOURS
        off = np.arange(-K, K + 1)
        cand = anchor[:, None] + off[None, :]
        valid = (cand >= lo[:, None]) & (cand < hi[:, None])
        if exclude is not None:
            valid &= cand != exclude[:, None]
        safe = np.clip(cand, 0, len(self.pos) - 1)
        dist = np.where(valid, np.abs(self.pos[safe] - p[:, None]), np.inf)
        order = np.argsort(dist, axis=1, kind="stable")[:, :K]
        pick = np.take_along_axis(safe, order, axis=1)
        ok = np.take_along_axis(valid, order, axis=1)
        return np.where(ok, pick, -1)

    def _weights(self, idx):
        """(rates, weights) of neighbour sets: rate = sum c / sum x, weight = 1 / sum x."""
        m = idx >= 0
        xs = np.where(m, self.x[np.maximum(idx, 0)], 0.0).sum(axis=1)
        cs = np.where(m, self.c[np.maximum(idx, 0)], 0.0).sum(axis=1)
        with np.errstate(divide="ignore", invalid="ignore"):
            return cs / xs, np.where(xs > 0, 1.0 / xs, 0.0)

    def local(self, idx):
        """Local baseline rates of the experiments at timeline positions `idx`, and
        their gradients: (rate, neighbour indices (m, 2K), weights (m, 2K), mask of the
        experiments left on the pooled rate), where rate_i = sum_j weight_ij * c_j
        over its neighbours j."""
        p = idx.astype(float)
        nb = len(self.pos)
        after = np.searchsorted(self.pos, idx)           # first baseline after
        before = after - 1
        has_b, has_a = before >= 0, after < nb
        cb, ca = np.clip(before, 0, nb - 1), np.clip(after, 0, nb - 1)
        between = has_b & has_a & (self.seg[cb] != self.seg[ca])
        # the stretch of the nearer existing neighbour (the earlier one on a tie)
        nearer_after = ~has_b | (has_a & (self.pos[ca] - p < p - self.pos[cb]))
        anchor = np.where(nearer_after, ca, cb)
        first = self._nearest(p, anchor, self.lo[anchor], self.hi[anchor])
        r1, w1 = self._weights(first)
        # between two stretches: the other side too, each counting half
        other = np.where(nearer_after, cb, ca)
        second = self._nearest(p, other, self.lo[other], self.hi[other])
        r2, w2 = self._weights(second)
        rate = np.where(between, (r1 + r2) / 2.0, r1)
        w1 = np.where(between, 0.5 * w1, w1)
        w2 = np.where(between, 0.5 * w2, 0.0)
        nbr = np.concatenate([first, np.where(between[:, None], second, -1)], axis=1)
        wts = np.concatenate([np.repeat(w1[:, None], first.shape[1], 1),
                              np.repeat(w2[:, None], second.shape[1], 1)], axis=1)
        wts = np.where(nbr >= 0, wts, 0.0)
        # no progress among the neighbours: the pooled baseline instead
        bad = ~np.isfinite(rate) | (rate <= 0)
        if bad.any():
            rate = np.where(bad, self.c.sum() / self.x.sum(), rate)
            nbr[bad] = -1
            wts[bad] = 0.0
        return rate, nbr, wts, bad

    def leave_one_out(self):
        """Expected counts of the baselines from their neighbours (themselves left
        out), and unbiased squared residuals (the neighbours' noise taken out)."""
        nb = len(self.pos)
        j = np.arange(nb)
        nbr = self._nearest(self.pos.astype(float), j, self.lo, self.hi, exclude=j)
        rate, _ = self._weights(nbr)
        m = nbr >= 0
        xs = np.where(m, self.x[np.maximum(nbr, 0)], 0.0)
        sx = xs.sum(axis=1)
        ok = np.isfinite(rate) & (rate > 0) & (sx > 0)
        mu = self.x[ok] * rate[ok]
        infl = 1.0 + (xs[ok] ** 2).sum(axis=1) / sx[ok] ** 2
        return mu, (self.c[ok] - mu) ** 2 / infl

    def local_mu(self):
        """Expected count of each baseline at its own moment (for its variance)."""
        nb = len(self.pos)
        j = np.arange(nb)
        nbr = self._nearest(self.pos.astype(float), j, self.lo, self.hi)
        rate, _ = self._weights(nbr)
        pooled = self.c.sum() / self.x.sum()
        return self.x * np.where(np.isfinite(rate) & (rate > 0), rate, pooled)


# -- Student's t ----------------------------------------------------------------

@functools.lru_cache(maxsize=256)
def t_quantile(p, df):
    """Quantile p (> 0.5) of Student's t with integer df degrees of freedom."""
    df = int(df)
    if df > 400:
        return NormalDist().inv_cdf(p)
    target = 2.0 * p - 1.0            # P(|T| < t)
    lo, hi = 0.0, 1.0
    while _t_central(hi, df) < target:
        hi *= 2.0
    for _ in range(100):
        mid = (lo + hi) / 2.0
        if _t_central(mid, df) < target:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2.0


def _t_central(t, df):
    """P(|T| < t) for integer df, by the finite series in cos(theta) (A&S 26.7.3-4)."""
    theta = math.atan(t / math.sqrt(df))
    cs2 = math.cos(theta) ** 2
    if df % 2 == 1:
        total, term = 0.0, 1.0
        if df > 1:
            total = term
            for k in range(1, (df - 1) // 2):
                term *= cs2 * (2 * k) / (2 * k + 1)
                total += term
        return 2.0 / math.pi * (theta + math.sin(theta) * math.cos(theta) * total) if df > 1 \
            else 2.0 / math.pi * theta
    total, term = 1.0, 1.0
    for k in range(1, df // 2):
        term *= cs2 * (2 * k - 1) / (2 * k)
        total += term
    return math.sin(theta) * total
