#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-2-Clause
#
# A LogGP discrete-event model of tnbc's tree allreduce
# (prov/tnbc/src/coll/tnbc_alg_desc.c) set beside seed 002 (Chang, Xiong,
# Xu: NIC-based offload of reductions), to tell how much of the seed's
# offload speed-up a latency/overhead model explains, and what our own
# measured parameters predict at scales we cannot run.
#
# The schedule replayed is ours, not the seed's: on a k-ary tree counted
# from the root (children of r are k*r+1 .. k*r+k), every member receives
# all its children, folds them in member order once the last has arrived,
# and sends the partial result to its parent; the root's result is sent
# down, each inner member forwarding it to its children one after
# another.  The seed's NIC folds each child as it arrives instead; with
# the fold costs of a few doubles that difference is below the model's
# resolution, and replaying our order keeps the model checkable against
# our own runs.
#
# Assumptions, and why:
# - One engine per node (the NIC engine for "offload", the host process
#   for "software") does every send overhead, receive overhead and fold,
#   first come first served: our engine is one progress context per
#   endpoint, and a host process is one thread.
# - LogGP spacing at both ends: consecutive sends of one node start
#   max(g, o_send) + G*bytes apart, consecutive receives max(g, o_recv) +
#   G*bytes apart (a parent's k children converge on one link).  A
#   message sent at s is at its destination at s + o_send + G*bytes + L.
# - The network has no contention beyond that: the seed's fat tree has
#   full bisection, and the messages are a few tens of bytes.
# - "software" is the same schedule driven by the host: its overheads are
#   o_host, and each step that must notice a receive before acting (fold
#   once all children are in, forward or see the result from the parent)
#   pays d_host, the host's poll/wake delay; "offload" pays none, as the
#   seed's NIC acts on its own counters.  Both start at a common t0 with
#   no cost for the own contribution (a copy of a few bytes), so N = 1
#   completes at 0.
# - Completion time is the latest time any member has the result, the
#   seed's metric (Nupairoj and Ni).
#
# The seed's 16 B software and offload figures are fitted with a
# bounded Gauss-Newton: every completion time is a maximum of sums of the
# parameters, piecewise linear in them, so solving a non-negative least
# squares on the local linear piece and moving there converges in a few
# steps.  The seed does not give the reduction tree's branch degree (the
# k-ary n-tree it names is the switch fabric; its FPGA steps describe a
# flat tree, every leaf sending to the root), so the degree is fitted too
# unless --seed-k fixes it.
#
# Standard library only; matplotlib, if importable, for --png.

import argparse
import csv
import heapq
import itertools
import math
import random
import sys
from collections import namedtuple

# Seed 002, Tables 1-5: double allreduce, microseconds, (software, offload)
# per node count, per message size in bytes.  16 nodes ran on an FPGA,
# 32-256 in the xNetSimPlus simulator.
SEED_US = {
    16: {16: (26.174, 15.286), 32: (35.974, 18.140), 64: (43.860, 20.884),
         128: (58.900, 26.424), 256: (70.110, 31.120)},
    24: {16: (29.252, 15.364), 32: (39.922, 18.326), 64: (48.288, 20.366),
         128: (61.604, 26.532), 256: (77.608, 30.838)},
    32: {16: (29.336, 15.502), 32: (39.982, 18.226), 64: (48.032, 20.686),
         128: (63.270, 26.462), 256: (81.324, 31.492)},
    40: {16: (29.450, 15.324), 32: (39.616, 18.586), 64: (48.138, 20.742),
         128: (63.374, 26.076), 256: (82.074, 30.290)},
    48: {16: (29.274, 15.330), 32: (40.210, 18.132), 64: (48.062, 20.568),
         128: (62.502, 26.014), 256: (78.934, 30.774)},
}
FIT_BYTES = 16
TABLE_BYTES = (16, 48)
FIT_DEGREES = (2, 4, 8, 16)
BEST_K_RANGE = range(2, 17)
MAX_N = 4096
MAX_K = 64

# The network and the two engines' costs, in microseconds and bytes.
# fold is the cost of folding one child's data per fold_bytes of it.
Net = namedtuple('Net', 'L o_offload o_host g G fold fold_bytes d_host')
# What one simulation runs with: one variant's view of a Net.
LogGP = namedtuple('LogGP', 'L o_send o_recv g G fold fold_bytes d_host')

# The parameters the seed fit moves, in this order; the rest stay fixed.
FIT_FIELDS = ('L', 'o_offload', 'o_host', 'g', 'd_host')


def variant(net, which):
    """The LogGP costs of the "offload" or "software" variant of net."""
    if which == 'offload':
        return LogGP(net.L, net.o_offload, net.o_offload, net.g, net.G,
                     net.fold, net.fold_bytes, 0.0)
    if which == 'software':
        return LogGP(net.L, net.o_host, net.o_host, net.g, net.G,
                     net.fold, net.fold_bytes, net.d_host)
    raise ValueError('variant is offload or software, not %r' % which)


# --- The tree (tnbc_tree.h), counted from the root ------------------------

def tree_parent(r, k):
    return (r - 1) // k if r else -1


def tree_children(r, k, n):
    return range(min(k * r + 1, n), min(k * r + k + 1, n))


def fold_time(p, nchildren, nbytes):
    return nchildren * p.fold * math.ceil(nbytes / p.fold_bytes)


# --- The simulator --------------------------------------------------------

# Event kinds, in the order ties are taken (then first pushed, first out).
PARTIAL, ARRIVE_UP, FOLD, ARRIVE_DOWN, RESULT = range(5)


class Engines:
    """Per-node engine occupancy and LogGP spacing: when a send or a
    receive can start, and what it keeps busy."""

    def __init__(self, n, p, nbytes):
        self.p = p
        self.wire = p.G * nbytes
        self.send_gap = max(p.g, p.o_send) + self.wire
        self.recv_gap = max(p.g, p.o_recv) + self.wire
        self.free = [0.0] * n
        self.last_send = [-math.inf] * n
        self.last_recv = [-math.inf] * n

    def send(self, node, t):
        """Start a send eligible at t; the time it reaches its peer."""
        start = max(t, self.free[node], self.last_send[node] + self.send_gap)
        self.last_send[node] = start
        self.free[node] = start + self.p.o_send
        return start + self.p.o_send + self.wire + self.p.L

    def receive(self, node, t):
        """Take a message that arrived at t; the time it is in memory."""
        start = max(t, self.free[node], self.last_recv[node] + self.recv_gap)
        self.last_recv[node] = start
        self.free[node] = start + self.p.o_recv
        return self.free[node]

    def busy(self, node, t, duration):
        """Run duration of local work eligible at t; when it is done."""
        self.free[node] = max(t, self.free[node]) + duration
        return self.free[node]


def simulate(n, k, p, nbytes):
    """Completion time of one allreduce of nbytes over n members on a
    k-ary tree with LogGP costs p: when the last member has the result."""
    if not 1 <= n <= MAX_N or not 1 <= k <= MAX_K:
        raise ValueError('need 1 <= n <= %d and 1 <= k <= %d' % (MAX_N, MAX_K))
    eng = Engines(n, p, nbytes)
    nch = [len(tree_children(r, k, n)) for r in range(n)]
    got = [0] * n
    last_in = [0.0] * n
    done = [0.0] * n
    events = []
    seq = itertools.count()

    def push(t, kind, node):
        heapq.heappush(events, (t, kind, next(seq), node))

    for r in range(n):
        if not nch[r]:
            push(0.0, PARTIAL, r)
    while events:
        t, kind, _, r = heapq.heappop(events)
        if kind == PARTIAL:  # r's subtree is folded into r's acc
            if r:
                push(eng.send(r, t), ARRIVE_UP, tree_parent(r, k))
            else:
                push(t, RESULT, r)
        elif kind == ARRIVE_UP:
            last_in[r] = max(last_in[r], eng.receive(r, t))
            got[r] += 1
            if got[r] == nch[r]:
                push(last_in[r] + p.d_host, FOLD, r)
        elif kind == FOLD:
            push(eng.busy(r, t, fold_time(p, nch[r], nbytes)), PARTIAL, r)
        elif kind == ARRIVE_DOWN:
            push(eng.receive(r, t) + p.d_host, RESULT, r)
        else:  # RESULT: r has it; pass it on in child order
            done[r] = t
            for c in tree_children(r, k, n):
                push(eng.send(r, t), ARRIVE_DOWN, c)
    return max(done)


def both(net, n, k, nbytes):
    """(software us, offload us) of net at n members, degree k."""
    return (simulate(n, k, variant(net, 'software'), nbytes),
            simulate(n, k, variant(net, 'offload'), nbytes))


# --- Fitting the seed -----------------------------------------------------

def solve(a, b):
    """x with a x = b for a small square a, or None if near singular."""
    m = len(a)
    rows = [list(a[i]) + [b[i]] for i in range(m)]
    scale = max((abs(v) for row in a for v in row), default=0.0) or 1.0
    for col in range(m):
        piv = max(range(col, m), key=lambda i: abs(rows[i][col]))
        if abs(rows[piv][col]) < 1e-12 * scale:
            return None
        rows[col], rows[piv] = rows[piv], rows[col]
        for i in range(col + 1, m):
            f = rows[i][col] / rows[col][col]
            for j in range(col, m + 1):
                rows[i][j] -= f * rows[col][j]
    x = [0.0] * m
    for i in reversed(range(m)):
        x[i] = (rows[i][m] - sum(rows[i][j] * x[j]
                                 for j in range(i + 1, m))) / rows[i][i]
    return x


def nnls(jac, target):
    """min |jac x - target| over x >= 0, by trying every support (the
    optimum is the unconstrained fit on its own support)."""
    ncol = len(jac[0])
    best, best_sse = [0.0] * ncol, sum(v * v for v in target)
    for size in range(1, ncol + 1):
        for support in itertools.combinations(range(ncol), size):
            ata = [[sum(row[i] * row[j] for row in jac) for j in support]
                   for i in support]
            atb = [sum(row[i] * t for row, t in zip(jac, target))
                   for i in support]
            sol = solve(ata, atb)
            if sol is None or min(sol) < 0:
                continue
            x = [0.0] * ncol
            for i, v in zip(support, sol):
                x[i] = v
            sse = sum((sum(r * v for r, v in zip(row, x)) - t) ** 2
                      for row, t in zip(jac, target))
            if sse < best_sse:
                best, best_sse = x, sse
    return best


def seed_points():
    """(nodes, variant index, seed us) of the 16 B table: 0 software,
    1 offload."""
    return [(n, i, pair[i]) for n, pair in sorted(SEED_US[FIT_BYTES].items())
            for i in (0, 1)]


def with_fit(base, x):
    return base._replace(**dict(zip(FIT_FIELDS, x)))


def model_points(base, x, k):
    net = with_fit(base, x)
    cache = {}
    out = []
    for n, i, _ in seed_points():
        if n not in cache:
            cache[n] = both(net, n, k, FIT_BYTES)
        out.append(cache[n][i])
    return out


def sse_of(base, x, k):
    return sum((m - s) ** 2 for m, (_, _, s)
               in zip(model_points(base, x, k), seed_points()))


def gauss_newton(base, x, k, steps=40):
    """Bounded Gauss-Newton from x on the piecewise-linear model."""
    data = [s for _, _, s in seed_points()]
    cur = sse_of(base, x, k)
    for _ in range(steps):
        m0 = model_points(base, x, k)
        jac_cols = []
        for i in range(len(x)):
            h = 1e-4 * max(1.0, x[i])
            xh = list(x)
            xh[i] += h
            jac_cols.append([(a - b) / h for a, b
                             in zip(model_points(base, xh, k), m0)])
        jac = [list(row) for row in zip(*jac_cols)]
        # on this linear piece model(y) = m0 + jac (y - x)
        target = [d - m + sum(j * v for j, v in zip(row, x))
                  for d, m, row in zip(data, m0, jac)]
        goal = nnls(jac, target)
        for frac in (1.0, 0.5, 0.25, 0.125, 0.0625):
            y = [a + frac * (b - a) for a, b in zip(x, goal)]
            s = sse_of(base, y, k)
            if s < cur - 1e-12:
                break
        else:
            return x, cur
        x, cur = y, s
    return x, cur


def compass(base, x, sse, k, step=0.2, tol=1e-3):
    """Pattern search from x: where Gauss-Newton stops on a kink of the
    piecewise-linear model, moving one parameter at a time still can."""
    while step > tol:
        moved = False
        for i in range(len(x)):
            for sign in (1.0, -1.0):
                y = list(x)
                y[i] = max(0.0, y[i] + sign * step)
                s = sse_of(base, y, k)
                if s < sse - 1e-12:
                    x, sse, moved = y, s, True
        if not moved:
            step /= 2
    return x, sse


def rms_by_variant(base, x, k):
    """rms error (software, offload) of x against the seed's points."""
    out = []
    for which in (0, 1):
        errs = [(m - s) ** 2 for m, (_, i, s)
                in zip(model_points(base, x, k), seed_points()) if i == which]
        out.append(math.sqrt(sum(errs) / len(errs)))
    return tuple(out)


Fit = namedtuple('Fit', 'net rms rms_software rms_offload')


def fit_seed(base, degrees):
    """{k: Fit} for every k in degrees."""
    starts = ([1.0, 0.5, 1.0, 0.1, 1.0], [0.5, 0.2, 2.0, 0.5, 3.0],
              [2.0, 1.0, 2.0, 0.0, 0.0], [0.2, 1.0, 1.0, 1.0, 5.0])
    npts = len(seed_points())
    fits = {}
    for k in degrees:
        best = min((gauss_newton(base, list(s), k) for s in starts),
                   key=lambda r: r[1])
        best = gauss_newton(base, compass(base, best[0], best[1], k)[0], k)
        fits[k] = Fit(with_fit(base, best[0]), math.sqrt(best[1] / npts),
                      *rms_by_variant(base, best[0], k))
    return fits


# --- Tables ---------------------------------------------------------------

Row = namedtuple('Row', 'set nodes bytes k software_us offload_us speedup '
                 'seed_software_us seed_offload_us')


def node_counts(max_nodes):
    return [n for n in (16 * 2 ** i for i in range(9)) if n <= max_nodes]


def table_rows(name, net, k, nodes):
    rows = []
    for n in nodes:
        for b in TABLE_BYTES:
            sw, off = both(net, n, k, b)
            seed = SEED_US.get(b, {}).get(n) if name == 'seed' else None
            rows.append(Row(name, n, b, k, sw, off, sw / off if off else
                            math.inf, seed[0] if seed else None,
                            seed[1] if seed else None))
    return rows


def fmt(v, width=8, prec=2):
    return ('%*.*f' % (width, prec, v)) if v is not None else '%*s' % (
        width, '-')


def print_main_table(rows, with_seed):
    by = {(r.nodes, r.bytes): r for r in rows}
    nodes = sorted({r.nodes for r in rows})
    groups = ['%d B model' % b for b in TABLE_BYTES]
    if with_seed:
        groups += ['%d B seed 002' % b for b in TABLE_BYTES]
    print(('nodes |' + '|'.join(' %-27s' % g for g in groups)).rstrip())
    print('      |' + '|'.join('  soft_us  offl_us  speedup '
                               for _ in groups).rstrip())
    for n in nodes:
        cells = []
        for b in TABLE_BYTES:
            r = by[(n, b)]
            cells.append(' %s %s %7.2fx ' % (fmt(r.software_us),
                                            fmt(r.offload_us), r.speedup))
        if with_seed:
            for b in TABLE_BYTES:
                r = by[(n, b)]
                sp = (r.seed_software_us / r.seed_offload_us
                      if r.seed_offload_us else None)
                cells.append(' %s %s %s%s ' % (
                    fmt(r.seed_software_us), fmt(r.seed_offload_us),
                    fmt(sp, 7), 'x' if sp else ' '))
        print(('%5d |' % n + '|'.join(cells)).rstrip())


def best_k(net, n, nbytes):
    """(k, offload us) of the fastest offload degree in BEST_K_RANGE."""
    return min(((k, simulate(n, k, variant(net, 'offload'), nbytes))
                for k in BEST_K_RANGE), key=lambda kt: (kt[1], kt[0]))


def print_best_k(sets, nodes, degree):
    print('best branch degree for offload, %d B, k in %d..%d '
          '(us at the best k; us at k=%d)' % (FIT_BYTES, BEST_K_RANGE[0],
                                               BEST_K_RANGE[-1], degree))
    lines = []
    for n in nodes:
        cells = []
        for _, net in sets:
            k, t = best_k(net, n, FIT_BYTES)
            at = simulate(n, degree, variant(net, 'offload'), FIT_BYTES)
            cells.append(' k=%-3d %s  (k=%d: %s) ' % (k, fmt(t, 7), degree,
                                                    fmt(at, 7)))
        lines.append(('%5d |' % n + '|'.join(cells)).rstrip())
    width = len(cells[0]) - 1
    print(('nodes |' + '|'.join(' %-*s' % (width, name)
                                for name, _ in sets)).rstrip())
    print('\n'.join(lines))


def describe(net, fold_unit):
    return ('L=%.4g o_offload=%.4g o_host=%.4g g=%.4g G=%.4g/B '
            'fold=%.4g per %s d_host=%.4g (us)' % (
                net.L, net.o_offload, net.o_host, net.g, net.G, net.fold,
                fold_unit, net.d_host))


def seed_best_published():
    """(speed-up, nodes, bytes) of the seed's largest published ratio."""
    return max((sw / off, n, b) for b, tab in SEED_US.items()
               for n, (sw, off) in tab.items())


def print_fit(fits, seed_k, unit):
    net = fits[seed_k].net
    print('== set "seed": fitted to seed 002\'s %d B software and offload '
          'figures, k=%d ==' % (FIT_BYTES, seed_k))
    print('fitted: ' + describe(net, unit))
    print('(G and fold are not fitted: they are the "here" values)')
    # L and o trade against each other; what the data pins down is a hop
    print('one hop (o + L + o): offload %.3f us, software %.3f us + d_host'
          % (2 * net.o_offload + net.L, 2 * net.o_host + net.L))
    print('rms error over %d points (software, offload):' % len(
        seed_points()))
    for k in sorted(fits):
        f = fits[k]
        print('  k=%-2d %5.2f us  (%5.2f, %5.2f)%s' % (
            k, f.rms, f.rms_software, f.rms_offload,
            '  <- used' if k == seed_k else ''))


def write_csv(path, rows):
    with open(path, 'w', newline='') as f:
        w = csv.writer(f)
        w.writerow(Row._fields)
        for r in rows:
            w.writerow([r.set, r.nodes, r.bytes, r.k, '%.4f' % r.software_us,
                        '%.4f' % r.offload_us, '%.4f' % r.speedup,
                        '' if r.seed_software_us is None else
                        r.seed_software_us,
                        '' if r.seed_offload_us is None else
                        r.seed_offload_us])


def write_png(path, rows):
    try:
        import matplotlib
        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
    except ImportError:
        print('note: matplotlib is not importable; no %s drawn' % path)
        return
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name in sorted({r.set for r in rows}):
        for b in TABLE_BYTES:
            pts = [(r.nodes, r.speedup) for r in rows
                   if r.set == name and r.bytes == b]
            k = next(r.k for r in rows if r.set == name)
            ax.plot(*zip(*pts), marker='o',
                    label='%s model, %d B (k=%d)' % (name, b, k))
    for b in TABLE_BYTES:
        pts = sorted((n, sw / off) for n, (sw, off) in SEED_US[b].items())
        ax.plot(*zip(*pts), linestyle='none', marker='x', markersize=9,
                label='seed 002 published, %d B' % b)
    ax.set_xscale('log', base=2)
    ax.set_xlabel('nodes')
    ax.set_ylabel('speed-up (software / offload)')
    ax.grid(True, which='both', alpha=0.3)
    ax.legend(fontsize='small')
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print('wrote %s' % path)


# --- Self-test ------------------------------------------------------------

def selftest():
    """Basic properties of the simulator; the number of failures."""
    failures = []

    def check(ok, what):
        if not ok:
            failures.append(what)
            print('FAIL: ' + what)

    rng = random.Random(2)

    def random_net():
        o_off = rng.uniform(0.05, 2.0)
        return Net(L=rng.uniform(0.05, 3.0), o_offload=o_off,
                   o_host=o_off + rng.uniform(0.0, 2.0),
                   g=rng.uniform(0.0, 2.0), G=rng.uniform(0.0, 0.01),
                   fold=rng.uniform(0.0, 0.05), fold_bytes=8,
                   d_host=rng.uniform(0.0, 3.0))

    nets = [random_net() for _ in range(6)]
    for net in nets:
        for which in ('offload', 'software'):
            p = variant(net, which)
            for k in (1, 2, 7, 64):
                check(simulate(1, k, p, 48) == 0.0,
                      'N=1 %s k=%d is not 0' % (which, k))
        p = variant(net, 'offload')
        hop = p.o_send + p.G * 48 + p.L + p.o_recv
        for k in (1, 2, 16):
            want = 2 * hop + fold_time(p, 1, 48)
            got = simulate(2, k, p, 48)
            check(abs(got - want) < 1e-9,
                  'N=2 offload k=%d: %.6f, want one up + one down %.6f'
                  % (k, got, want))
    for net in nets[:3]:
        for which in ('offload', 'software'):
            p = variant(net, which)
            for k in (1, 2, 3, 4, 8, 16, 64):
                limit = 200 if k > 1 else 120
                prev = 0.0
                for n in list(range(1, limit)) + [512, 1024, 4096]:
                    t = simulate(n, k, p, 16)
                    check(t >= prev - 1e-9,
                          '%s k=%d: N=%d (%.4f) faster than a smaller N '
                          '(%.4f)' % (which, k, n, t, prev))
                    prev = t
    for net in nets:
        for n in (2, 3, 16, 100, 256, 1000):
            for k in (2, 4, 8):
                sw, off = both(net, n, k, 16)
                check(sw >= off - 1e-9, 'software %.4f < offload %.4f at '
                      'N=%d k=%d' % (sw, off, n, k))
    # a chain's exact time: every hop in turn, one fold per inner member
    p = variant(nets[0], 'software')
    hop = p.o_send + p.G * 16 + p.L + p.o_recv
    n = 50
    want = ((n - 1) * (hop + p.d_host + fold_time(p, 1, 16)) +
            (n - 1) * (hop + p.d_host))
    check(abs(simulate(n, 1, p, 16) - want) < 1e-6, 'chain of 50 is not '
          '%.4f' % want)
    for bad in ((0, 2), (MAX_N + 1, 2), (4, 0), (4, MAX_K + 1)):
        try:
            simulate(bad[0], bad[1], p, 16)
            check(False, 'simulate%r did not refuse' % (bad,))
        except ValueError:
            pass
    print('selftest: %s' % ('%d failure(s)' % len(failures) if failures
                            else 'all passed'))
    return len(failures)


# --- Command line ---------------------------------------------------------

def parse_args(argv):
    ap = argparse.ArgumentParser(
        description='LogGP discrete-event model of tnbc\'s k-ary tree '
        'allreduce, software (host-driven) vs offload (engine-driven), '
        'fitted to seed 002 and run with parameters given here.',
        epilog='The "here" defaults are placeholders, not measurements: '
        'pass the values measured on this machine (pingpong half '
        'round trip for L, per-message engine and host costs for the '
        'overheads, the message rate for g).')
    here = ap.add_argument_group(
        '"here" parameters (microseconds, bytes; the defaults are '
        'placeholders unless measured)')
    here.add_argument('--L', type=float, default=0.3, help='latency')
    here.add_argument('--o-offload', type=float, default=0.3,
                      help='engine overhead per message, each end')
    here.add_argument('--o-host', type=float, default=0.5,
                      help='host overhead per message, each end')
    here.add_argument('--g', type=float, default=0.1,
                      help='gap between injections of one node')
    here.add_argument('--G', type=float, default=0.0001, help='gap per byte')
    here.add_argument('--fold', type=float, default=0.001,
                      help='fold of one child per --fold-unit')
    here.add_argument('--fold-unit', choices=('elem', 'byte'),
                      default='elem', help='elem: per 8 B element')
    here.add_argument('--d-host', type=float, default=1.0,
                      help='host poll/wake delay per receive-then-act step')
    ap.add_argument('--degree', type=int, default=8,
                    help='branch degree k of the "here" tables (default 8, '
                    'tnbc\'s default)')
    ap.add_argument('--seed-k', default='fit',
                    help='branch degree of the seed fit: "fit" tries %s'
                    % ', '.join(map(str, FIT_DEGREES)))
    ap.add_argument('--max-nodes', type=int, default=1024,
                    help='largest node count in the tables (16..%d)' % MAX_N)
    ap.add_argument('--csv', metavar='FILE', help='also write every row')
    ap.add_argument('--png', metavar='FILE',
                    help='draw speed-up vs nodes (needs matplotlib)')
    ap.add_argument('--selftest', action='store_true',
                    help='check the simulator and exit')
    args = ap.parse_args(argv)
    if not 1 <= args.degree <= MAX_K:
        ap.error('--degree must be in 1..%d' % MAX_K)
    if not 16 <= args.max_nodes <= MAX_N:
        ap.error('--max-nodes must be in 16..%d' % MAX_N)
    if args.seed_k != 'fit':
        try:
            args.seed_k = int(args.seed_k)
        except ValueError:
            ap.error('--seed-k is "fit" or a degree')
        if not 1 <= args.seed_k <= MAX_K:
            ap.error('--seed-k must be in 1..%d' % MAX_K)
    costs = (args.L, args.o_offload, args.o_host, args.g, args.G, args.fold,
             args.d_host)
    if min(costs) < 0:
        ap.error('costs must not be negative')
    return args


def main(argv):
    args = parse_args(argv)
    if args.selftest:
        return 1 if selftest() else 0
    fold_bytes = 8 if args.fold_unit == 'elem' else 1
    unit = '8 B' if fold_bytes == 8 else 'B'
    here = Net(args.L, args.o_offload, args.o_host, args.g, args.G,
               args.fold, fold_bytes, args.d_host)
    nodes = node_counts(args.max_nodes)

    degrees = FIT_DEGREES if args.seed_k == 'fit' else (args.seed_k,)
    fits = fit_seed(here, degrees)
    seed_k = min(fits, key=lambda k: fits[k].rms)
    seed_net = fits[seed_k].net

    print_fit(fits, seed_k, unit)
    seed_rows = table_rows('seed', seed_net, seed_k, nodes)
    print_main_table(seed_rows, with_seed=True)
    sp, n, b = seed_best_published()
    print('seed\'s largest published speed-up: %.2fx at %d nodes, %d B'
          % (sp, n, b))
    print()
    print('== set "here": command-line parameters, k=%d ==' % args.degree)
    print('given:  ' + describe(here, unit))
    here_rows = table_rows('here', here, args.degree, nodes)
    print_main_table(here_rows, with_seed=False)
    print()
    print_best_k([('seed', seed_net), ('here', here)], nodes, args.degree)

    rows = seed_rows + here_rows
    if args.csv:
        write_csv(args.csv, rows)
        print('wrote %s' % args.csv)
    if args.png:
        write_png(args.png, rows)
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
