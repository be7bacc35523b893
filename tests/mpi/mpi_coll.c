/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * mpi_coll: collectives with checked results, small and large counts.
 *
 * Barrier, Bcast, Reduce, Allreduce (sum/max/min on int and double,
 * MPI_MAXLOC/MPI_MINLOC), Allgather(v), Alltoall(v), Gather(v), Scatter(v),
 * Reduce_scatter(_block), Scan, Exscan, Ibarrier/Iallreduce, run on
 * MPI_COMM_WORLD, on a dup of it and on sub-communicators from
 * MPI_Comm_split (with reversed key order and an MPI_UNDEFINED colour).
 * Values are integers (also in doubles), so every result is exact.
 */
#include "mpitest.h"

#include <stdlib.h>
#include <string.h>

#define LARGE_REDUCE   262147 /* ints: 1 MiB + 12 B */
#define LARGE_PER_PEER 16385 /* ints per rank in (all)gather/alltoall */

struct ctx {
	MPI_Comm comm;
	const char *label;
	int rank, size;
	int wrank; /* rank in MPI_COMM_WORLD */
};

static const int small_counts[] = {1, 7, 1000};

static int ival(int rank, int i)
{
	return (rank + 1) * (i % 1000 + 1) + i % 17;
}

static double dval(int rank, int i)
{
	return (double)((rank + 1) * (i % 97)) + 0.5;
}

/* Distinct, deterministic, with ties across ranks. */
static int mval(int rank, int i)
{
	return (rank * 37 + i * 11) % 23;
}

#define CK(c, ...) MT_CHECK(c, "%s: %s", x->label, mt_fmt(__VA_ARGS__))

static void t_barrier(struct ctx *x)
{
	MPI_Request req;
	int i;

	mt_phase("%s: barrier", x->label);
	for (i = 0; i < 5; i++)
		MT_MPI(MPI_Barrier(x->comm));
	MT_MPI(MPI_Ibarrier(x->comm, &req));
	MT_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
}

static void t_bcast(struct ctx *x)
{
	static const size_t lens[] = {0, 1, 33, 4097, 65537, (1u << 20) + 5};
	uint8_t *buf = mt_malloc((1u << 20) + 5);
	int roots[3] = {0, x->size - 1, x->size / 2}, root, j, k;

	for (j = 0; j < 3; j++) {
		root = roots[j];
		if ((j == 1 && root == 0) ||
		    (j == 2 && (root == 0 || root == x->size - 1)))
			continue;
		for (k = 0; k < 6; k++) {
			mt_phase("%s: bcast root %d %zu B", x->label, root,
				 lens[k]);
			if (x->rank == root)
				mt_fill(buf, lens[k], (uint32_t)(root + k));
			else
				memset(buf, 0, lens[k]);
			MT_MPI(MPI_Bcast(buf, (int)lens[k], MPI_BYTE, root,
					 x->comm));
			MT_VERIFY(buf, lens[k], (uint32_t)(root + k),
				  "%s: bcast root %d %zu B", x->label, root,
				  lens[k]);
		}
	}
	free(buf);
}

static void reduce_ops(struct ctx *x, int count, int root)
{
	int *in = mt_malloc(sizeof(int) * (size_t)count);
	int *out = mt_malloc(sizeof(int) * (size_t)count);
	double *din = mt_malloc(sizeof(double) * (size_t)count);
	double *dout = mt_malloc(sizeof(double) * (size_t)count);
	int i, r, e, emax, emin, all = root < 0;
	double de;

	mt_phase("%s: %s count %d root %d", x->label,
		 all ? "allreduce" : "reduce", count, root);
	for (i = 0; i < count; i++) {
		in[i] = ival(x->rank, i);
		din[i] = dval(x->rank, i);
	}
	/* int sum */
	memset(out, 0, sizeof(int) * (size_t)count);
	if (all)
		MT_MPI(MPI_Allreduce(in, out, count, MPI_INT, MPI_SUM,
				     x->comm));
	else
		MT_MPI(MPI_Reduce(in, out, count, MPI_INT, MPI_SUM, root,
				  x->comm));
	if (all || x->rank == root) {
		for (i = 0; i < count; i++) {
			for (e = 0, r = 0; r < x->size; r++)
				e += ival(r, i);
			CK(out[i] == e, "int sum [%d] = %d, expected %d", i,
			   out[i], e);
		}
	}
	/* double sum */
	if (all)
		MT_MPI(MPI_Allreduce(din, dout, count, MPI_DOUBLE, MPI_SUM,
				     x->comm));
	else
		MT_MPI(MPI_Reduce(din, dout, count, MPI_DOUBLE, MPI_SUM, root,
				  x->comm));
	if (all || x->rank == root) {
		for (i = 0; i < count; i++) {
			for (de = 0, r = 0; r < x->size; r++)
				de += dval(r, i);
			CK(dout[i] == de, "double sum [%d] = %f, expected %f",
			   i, dout[i], de);
		}
	}
	/* int max / min (the rooted variant only does sums and doubles) */
	for (i = 0; i < count; i++)
		in[i] = mval(x->rank, i);
	for (int op = 0; op < 2 * all; op++) {
		MPI_Op mop = op ? MPI_MIN : MPI_MAX;

		if (all)
			MT_MPI(MPI_Allreduce(in, out, count, MPI_INT, mop,
					     x->comm));
		else
			MT_MPI(MPI_Reduce(in, out, count, MPI_INT, mop, root,
					  x->comm));
		if (!all && x->rank != root)
			continue;
		for (i = 0; i < count; i++) {
			emax = -1;
			emin = 1 << 30;
			for (r = 0; r < x->size; r++) {
				emax = mval(r, i) > emax ? mval(r, i) : emax;
				emin = mval(r, i) < emin ? mval(r, i) : emin;
			}
			CK(out[i] == (op ? emin : emax),
			   "int %s [%d] = %d, expected %d", op ? "min" : "max",
			   i, out[i], op ? emin : emax);
		}
	}
	/* double max / min */
	for (i = 0; i < count; i++)
		din[i] = (double)mval(x->rank, i) - 0.25;
	for (int op = 0; op < 2; op++) {
		MPI_Op mop = op ? MPI_MIN : MPI_MAX;

		if (all)
			MT_MPI(MPI_Allreduce(din, dout, count, MPI_DOUBLE, mop,
					     x->comm));
		else
			MT_MPI(MPI_Reduce(din, dout, count, MPI_DOUBLE, mop,
					  root, x->comm));
		if (!all && x->rank != root)
			continue;
		for (i = 0; i < count; i++) {
			de = op ? 1e30 : -1e30;
			for (r = 0; r < x->size; r++) {
				double v = (double)mval(r, i) - 0.25;

				de = op ? (v < de ? v : de) : (v > de ? v : de);
			}
			CK(dout[i] == de, "double %s [%d] = %f, expected %f",
			   op ? "min" : "max", i, dout[i], de);
		}
	}
	free(in);
	free(out);
	free(din);
	free(dout);
}

static void t_loc(struct ctx *x, int count)
{
	struct {
		double v;
		int loc;
	} *din = mt_malloc(sizeof(*din) * (size_t)count),
	  *dout = mt_malloc(sizeof(*dout) * (size_t)count);
	int(*iin)[2] = mt_malloc(sizeof(*iin) * (size_t)count);
	int(*iout)[2] = mt_malloc(sizeof(*iout) * (size_t)count);
	int i, r, bestr, bestv;

	mt_phase("%s: maxloc/minloc count %d", x->label, count);
	for (i = 0; i < count; i++) {
		din[i].v = (double)mval(x->rank, i);
		din[i].loc = x->rank;
		iin[i][0] = mval(x->rank, i);
		iin[i][1] = x->rank;
	}
	MT_MPI(MPI_Allreduce(din, dout, count, MPI_DOUBLE_INT, MPI_MAXLOC,
			     x->comm));
	MT_MPI(MPI_Allreduce(iin, iout, count, MPI_2INT, MPI_MINLOC, x->comm));
	for (i = 0; i < count; i++) {
		/* Ties resolve to the lowest rank. */
		for (bestr = 0, r = 1; r < x->size; r++)
			if (mval(r, i) > mval(bestr, i))
				bestr = r;
		CK(dout[i].v == (double)mval(bestr, i) && dout[i].loc == bestr,
		   "MAXLOC [%d] = (%f, %d), expected (%d, %d)", i, dout[i].v,
		   dout[i].loc, mval(bestr, i), bestr);
		for (bestr = 0, r = 1; r < x->size; r++)
			if (mval(r, i) < mval(bestr, i))
				bestr = r;
		bestv = mval(bestr, i);
		CK(iout[i][0] == bestv && iout[i][1] == bestr,
		   "MINLOC [%d] = (%d, %d), expected (%d, %d)", i, iout[i][0],
		   iout[i][1], bestv, bestr);
	}
	free(din);
	free(dout);
	free(iin);
	free(iout);
}

static void t_iallreduce(struct ctx *x)
{
	MPI_Request req;
	int in[3] = {x->rank, 1, x->rank * x->rank}, out[3], e = 0;
	int r;

	mt_phase("%s: iallreduce", x->label);
	MT_MPI(MPI_Iallreduce(in, out, 3, MPI_INT, MPI_SUM, x->comm, &req));
	MT_MPI(MPI_Wait(&req, MPI_STATUS_IGNORE));
	for (r = 0; r < x->size; r++)
		e += r * r;
	CK(out[0] == x->size * (x->size - 1) / 2 && out[1] == x->size &&
		   out[2] == e,
	   "iallreduce = {%d, %d, %d}", out[0], out[1], out[2]);
}

/* Element i of the block that rank src contributes for rank dst. */
static int blk(int src, int dst, int i)
{
	return src * 1000000 + dst * 10000 + i % 10000;
}

static void t_gather_family(struct ctx *x, int n)
{
	int *sb = mt_malloc(sizeof(int) * (size_t)n * (size_t)x->size);
	int *rb = mt_malloc(sizeof(int) * (size_t)n * (size_t)x->size);
	int root = 1 % x->size, r, i;

	mt_phase("%s: allgather %d", x->label, n);
	for (i = 0; i < n; i++)
		sb[i] = blk(x->rank, 0, i);
	memset(rb, 0xff, sizeof(int) * (size_t)n * (size_t)x->size);
	MT_MPI(MPI_Allgather(sb, n, MPI_INT, rb, n, MPI_INT, x->comm));
	for (r = 0; r < x->size; r++)
		for (i = 0; i < n; i++)
			CK(rb[r * n + i] == blk(r, 0, i),
			   "allgather block %d [%d] = %d", r, i, rb[r * n + i]);

	mt_phase("%s: gather %d root %d", x->label, n, root);
	memset(rb, 0xff, sizeof(int) * (size_t)n * (size_t)x->size);
	MT_MPI(MPI_Gather(sb, n, MPI_INT, rb, n, MPI_INT, root, x->comm));
	if (x->rank == root)
		for (r = 0; r < x->size; r++)
			for (i = 0; i < n; i++)
				CK(rb[r * n + i] == blk(r, 0, i),
				   "gather block %d [%d] = %d", r, i,
				   rb[r * n + i]);

	mt_phase("%s: scatter %d root %d", x->label, n, root);
	if (x->rank == root)
		for (r = 0; r < x->size; r++)
			for (i = 0; i < n; i++)
				rb[r * n + i] = blk(root, r, i);
	memset(sb, 0xff, sizeof(int) * (size_t)n);
	MT_MPI(MPI_Scatter(rb, n, MPI_INT, sb, n, MPI_INT, root, x->comm));
	for (i = 0; i < n; i++)
		CK(sb[i] == blk(root, x->rank, i), "scatter [%d] = %d", i,
		   sb[i]);

	mt_phase("%s: alltoall %d", x->label, n);
	for (r = 0; r < x->size; r++)
		for (i = 0; i < n; i++)
			sb[r * n + i] = blk(x->rank, r, i);
	memset(rb, 0xff, sizeof(int) * (size_t)n * (size_t)x->size);
	MT_MPI(MPI_Alltoall(sb, n, MPI_INT, rb, n, MPI_INT, x->comm));
	for (r = 0; r < x->size; r++)
		for (i = 0; i < n; i++)
			CK(rb[r * n + i] == blk(r, x->rank, i),
			   "alltoall block from %d [%d] = %d", r, i,
			   rb[r * n + i]);
	free(sb);
	free(rb);
}

/* Count that rank src sends to rank dst in the v-variants. */
static int vcount(int src, int dst, int scale)
{
	return ((src * 3 + dst * 5) % 7) * scale + (src + dst) % 2;
}

static void t_vfamily(struct ctx *x, int scale)
{
	int n = x->size, r, i, tot_s = 0, tot_r = 0, root = n - 1;
	int *scnt = mt_malloc(sizeof(int) * (size_t)n);
	int *sdsp = mt_malloc(sizeof(int) * (size_t)n);
	int *rcnt = mt_malloc(sizeof(int) * (size_t)n);
	int *rdsp = mt_malloc(sizeof(int) * (size_t)n);
	int *sb, *rb;

	/* Displacements leave a 3-element gap between blocks. */
	for (r = 0; r < n; r++) {
		scnt[r] = vcount(x->rank, r, scale);
		sdsp[r] = tot_s;
		tot_s += scnt[r] + 3;
		rcnt[r] = vcount(r, x->rank, scale);
		rdsp[r] = tot_r;
		tot_r += rcnt[r] + 3;
	}
	sb = mt_malloc(sizeof(int) * (size_t)(tot_s + 1));
	rb = mt_malloc(sizeof(int) * (size_t)(tot_r + 1));

	mt_phase("%s: alltoallv scale %d", x->label, scale);
	for (r = 0; r < n; r++)
		for (i = 0; i < scnt[r]; i++)
			sb[sdsp[r] + i] = blk(x->rank, r, i);
	memset(rb, 0xff, sizeof(int) * (size_t)(tot_r + 1));
	MT_MPI(MPI_Alltoallv(sb, scnt, sdsp, MPI_INT, rb, rcnt, rdsp, MPI_INT,
			     x->comm));
	for (r = 0; r < n; r++) {
		for (i = 0; i < rcnt[r]; i++)
			CK(rb[rdsp[r] + i] == blk(r, x->rank, i),
			   "alltoallv from %d [%d] = %d", r, i,
			   rb[rdsp[r] + i]);
		for (i = rcnt[r]; i < rcnt[r] + 3; i++)
			CK(rb[rdsp[r] + i] == -1,
			   "alltoallv wrote into the gap after block %d", r);
	}

	/* Allgatherv/Gatherv: rank r contributes vcount(r, 0) elements. */
	mt_phase("%s: allgatherv scale %d", x->label, scale);
	for (tot_r = 0, r = 0; r < n; r++) {
		rcnt[r] = vcount(r, 0, scale);
		rdsp[r] = tot_r;
		tot_r += rcnt[r] + 3;
	}
	free(rb);
	rb = mt_malloc(sizeof(int) * (size_t)(tot_r + 1));
	for (i = 0; i < rcnt[x->rank]; i++)
		sb[i] = blk(x->rank, 0, i);
	for (int g = 0; g < 2; g++) {
		memset(rb, 0xff, sizeof(int) * (size_t)(tot_r + 1));
		if (g)
			MT_MPI(MPI_Gatherv(sb, rcnt[x->rank], MPI_INT, rb, rcnt,
					   rdsp, MPI_INT, root, x->comm));
		else
			MT_MPI(MPI_Allgatherv(sb, rcnt[x->rank], MPI_INT, rb,
					      rcnt, rdsp, MPI_INT, x->comm));
		if (g && x->rank != root)
			continue;
		for (r = 0; r < n; r++)
			for (i = 0; i < rcnt[r]; i++)
				CK(rb[rdsp[r] + i] == blk(r, 0, i),
				   "%s block %d [%d] = %d",
				   g ? "gatherv" : "allgatherv", r, i,
				   rb[rdsp[r] + i]);
	}

	/* Scatterv: root sends vcount(root, r) elements to r. */
	mt_phase("%s: scatterv scale %d", x->label, scale);
	for (tot_s = 0, r = 0; r < n; r++) {
		scnt[r] = vcount(root, r, scale);
		sdsp[r] = tot_s;
		tot_s += scnt[r] + 3;
	}
	free(sb);
	sb = mt_malloc(sizeof(int) * (size_t)(tot_s + 1));
	if (x->rank == root)
		for (r = 0; r < n; r++)
			for (i = 0; i < scnt[r]; i++)
				sb[sdsp[r] + i] = blk(root, r, i);
	memset(rb, 0xff, sizeof(int) * (size_t)(scnt[x->rank] + 1));
	MT_MPI(MPI_Scatterv(sb, scnt, sdsp, MPI_INT, rb, scnt[x->rank], MPI_INT,
			    root, x->comm));
	for (i = 0; i < scnt[x->rank]; i++)
		CK(rb[i] == blk(root, x->rank, i), "scatterv [%d] = %d", i,
		   rb[i]);
	free(scnt);
	free(sdsp);
	free(rcnt);
	free(rdsp);
	free(sb);
	free(rb);
}

static void t_reduce_scatter(struct ctx *x, int scale)
{
	int n = x->size, r, i, tot = 0, off = 0, e;
	int *cnt = mt_malloc(sizeof(int) * (size_t)n);
	int *sb, *rb;

	mt_phase("%s: reduce_scatter scale %d", x->label, scale);
	for (r = 0; r < n; r++) {
		cnt[r] = (r + 1) * scale;
		tot += cnt[r];
	}
	for (r = 0; r < x->rank; r++)
		off += cnt[r];
	sb = mt_malloc(sizeof(int) * (size_t)tot);
	rb = mt_malloc(sizeof(int) * (size_t)tot);
	for (i = 0; i < tot; i++)
		sb[i] = ival(x->rank, i);
	MT_MPI(MPI_Reduce_scatter(sb, rb, cnt, MPI_INT, MPI_SUM, x->comm));
	for (i = 0; i < cnt[x->rank]; i++) {
		for (e = 0, r = 0; r < n; r++)
			e += ival(r, off + i);
		CK(rb[i] == e, "reduce_scatter [%d] = %d, expected %d", i,
		   rb[i], e);
	}

	mt_phase("%s: reduce_scatter_block scale %d", x->label, scale);
	MT_MPI(MPI_Reduce_scatter_block(sb, rb, scale, MPI_INT, MPI_MAX,
					x->comm));
	for (i = 0; i < scale; i++) {
		for (e = 0, r = 0; r < n; r++)
			if (ival(r, x->rank * scale + i) > e)
				e = ival(r, x->rank * scale + i);
		CK(rb[i] == e, "reduce_scatter_block [%d] = %d, expected %d", i,
		   rb[i], e);
	}
	free(cnt);
	free(sb);
	free(rb);
}

static void t_scan(struct ctx *x, int count)
{
	int *in = mt_malloc(sizeof(int) * (size_t)count);
	int *out = mt_malloc(sizeof(int) * (size_t)count);
	int i, r, e;

	mt_phase("%s: scan/exscan count %d", x->label, count);
	for (i = 0; i < count; i++)
		in[i] = ival(x->rank, i);
	MT_MPI(MPI_Scan(in, out, count, MPI_INT, MPI_SUM, x->comm));
	for (i = 0; i < count; i++) {
		for (e = 0, r = 0; r <= x->rank; r++)
			e += ival(r, i);
		CK(out[i] == e, "scan [%d] = %d, expected %d", i, out[i], e);
	}
	MT_MPI(MPI_Exscan(in, out, count, MPI_INT, MPI_SUM, x->comm));
	if (x->rank > 0) {
		for (i = 0; i < count; i++) {
			for (e = 0, r = 0; r < x->rank; r++)
				e += ival(r, i);
			CK(out[i] == e, "exscan [%d] = %d, expected %d", i,
			   out[i], e);
		}
	}
	free(in);
	free(out);
}

/* large: also run the large counts (slow to verify with many ranks). */
static void run_suite(MPI_Comm comm, const char *label, int large)
{
	struct ctx x = {.comm = comm, .label = label, .wrank = mt_rank};
	int k, c;

	MT_MPI(MPI_Comm_rank(comm, &x.rank));
	MT_MPI(MPI_Comm_size(comm, &x.size));

	t_barrier(&x);
	t_bcast(&x);
	for (k = 0; k < 3 + large; k++) {
		c = k < 3 ? small_counts[k] : LARGE_REDUCE;
		reduce_ops(&x, c, -1);
		reduce_ops(&x, c, 0);
		reduce_ops(&x, c, x.size - 1);
		t_loc(&x, c);
		t_scan(&x, c);
	}
	t_iallreduce(&x);
	for (k = 0; k < 3 + large; k++) {
		c = k < 3 ? small_counts[k] : LARGE_PER_PEER;
		t_gather_family(&x, c);
	}
	t_vfamily(&x, 1);
	if (large)
		t_vfamily(&x, 3001);
	t_reduce_scatter(&x, 1);
	if (large)
		t_reduce_scatter(&x, 20011);
	t_barrier(&x);
}

int main(int argc, char **argv)
{
	MPI_Comm dup, split, odd;
	int srank, ssize, color, exp_rank, exp_size, r;

	mt_init(&argc, &argv, "mpi_coll");

	run_suite(MPI_COMM_WORLD, "world", 1);

	mt_phase("comm_dup");
	MT_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &dup));
	run_suite(dup, "dup", 0);

	/* Two halves by parity; the key reverses the rank order. */
	mt_phase("comm_split");
	color = mt_rank % 2;
	MT_MPI(MPI_Comm_split(MPI_COMM_WORLD, color, -mt_rank, &split));
	MT_MPI(MPI_Comm_rank(split, &srank));
	MT_MPI(MPI_Comm_size(split, &ssize));
	for (exp_size = 0, exp_rank = 0, r = 0; r < mt_size; r++) {
		if (r % 2 != color)
			continue;
		exp_size++;
		if (r > mt_rank)
			exp_rank++;
	}
	MT_CHECK(ssize == exp_size && srank == exp_rank,
		 "split: rank %d of %d, expected %d of %d", srank, ssize,
		 exp_rank, exp_size);
	run_suite(split, color ? "split-odd" : "split-even", 1);

	/* Rank 0 opts out; the others form one communicator. */
	mt_phase("comm_split undefined");
	MT_MPI(MPI_Comm_split(MPI_COMM_WORLD, mt_rank ? 1 : MPI_UNDEFINED,
			      mt_rank, &odd));
	if (mt_rank == 0) {
		MT_CHECK(odd == MPI_COMM_NULL,
			 "MPI_UNDEFINED colour did not give MPI_COMM_NULL");
	} else {
		MT_MPI(MPI_Comm_size(odd, &ssize));
		MT_CHECK(ssize == mt_size - 1, "split without rank 0: size %d",
			 ssize);
		run_suite(odd, "split-no-0", 0);
		MT_MPI(MPI_Comm_free(&odd));
	}

	MT_MPI(MPI_Comm_free(&split));
	MT_MPI(MPI_Comm_free(&dup));
	mt_finish("on world and split (reversed keys) with counts 1..%d "
		  "ints, on dup and split without rank 0 with counts 1..1000",
		  LARGE_REDUCE);
	return 0;
}
