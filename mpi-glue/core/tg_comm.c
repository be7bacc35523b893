/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Communicators as tnbc groups.  A group is named when its communicator
 * is made (tg_comm_child_id) and joined at its first collective: the
 * join is posted without waiting, and the collective posted behind it
 * runs after the join's barrier, so no call ever blocks in a join and
 * no collective hides inside another.
 */
#include <stdlib.h>
#include <string.h>

#include <rdma/fi_errno.h>

#include "tg_priv.h"

static uint32_t tg_mix(uint32_t h, uint32_t v)
{
	uint64_t x = ((uint64_t)h << 32 | v) * 0x9e3779b97f4a7c15ULL;

	x ^= x >> 29;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 32;
	return (uint32_t)x;
}

uint32_t tg_comm_child_id(uint32_t parent, uint32_t k)
{
	uint32_t id = tg_mix(parent, k) & 0x7fffffffu;

	return id ? id : 1;
}

struct tg_comm *tg_comm_new(uint32_t id, const int *world_ranks, int n)
{
	struct tg_comm *c;

	if (!tg.ready || n <= 0 || !id)
		return NULL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->world = malloc((size_t)n * sizeof(*c->world));
	if (!c->world) {
		free(c);
		return NULL;
	}
	memcpy(c->world, world_ranks, (size_t)n * sizeof(*c->world));
	c->id = id & 0x7fffffffu;
	c->size = n;
	c->rank = -1;
	for (int i = 0; i < n; i++) {
		if (world_ranks[i] < 0 || world_ranks[i] >= tg.size) {
			free(c->world);
			free(c);
			return NULL;
		}
		if (world_ranks[i] == tg.rank)
			c->rank = i;
	}
	if (c->rank < 0) {
		free(c->world);
		free(c);
		return NULL;
	}
	pthread_mutex_lock(&tg.lock);
	c->all_next = tg.all;
	tg.all = c;
	pthread_mutex_unlock(&tg.lock);
	return c;
}

static void tg_comm_unlist(struct tg_comm *c)
{
	for (struct tg_comm **p = &tg.all; *p; p = &(*p)->all_next)
		if (*p == c) {
			*p = c->all_next;
			return;
		}
}

void tg_comm_close_all(void)
{
	for (struct tg_comm *c = tg.all; c; c = c->all_next) {
		if (c->mc)
			fi_close(&c->mc->fid);
		if (c->set)
			fi_close(&c->set->fid);
		c->mc = NULL;
		c->set = NULL;
	}
	tg.all = NULL; /* their memory goes with their communicators */
}

int tg_comm_size(const struct tg_comm *c)
{
	return c->size;
}

int tg_comm_rank(const struct tg_comm *c)
{
	return c->rank;
}

int tg_comm_join(struct tg_comm *c)
{
	struct fi_av_set_attr attr = {.count = (size_t)c->size,
				      .start_addr = FI_ADDR_NOTAVAIL,
				      .end_addr = FI_ADDR_NOTAVAIL};
	struct fi_collective_addr ca;
	fi_addr_t set_addr;
	int ret;

	if (c->mc)
		return 0;
	ret = fi_av_set(tg.av, &attr, &c->set, NULL);
	if (ret)
		return ret;
	for (int i = 0; i < c->size && !ret; i++)
		ret = fi_av_set_insert(c->set, (fi_addr_t)c->world[i]);
	if (!ret)
		ret = fi_av_set_addr(c->set, &set_addr);
	if (ret)
		goto err;
	ca = (struct fi_collective_addr){.set = c->set, .coll_addr = set_addr};
	ret = tg.coll_ops->join(tg.ep, &ca, c->id, &c->mc, c);
	if (ret)
		goto err;
	c->coll = fi_mc_addr(c->mc);
	c->link = tg.coll_ops->size >=
			  offsetof(struct fi_tnbc_ops_coll, over_link) +
				  sizeof(tg.coll_ops->over_link) &&
		  tg.coll_ops->over_link && tg.coll_ops->over_link(c->mc) == 1;
	return 0;
err:
	fi_close(&c->set->fid);
	c->set = NULL;
	return ret;
}

/* Under tg.lock.  0 once c is closed. */
static int tg_comm_close(struct tg_comm *c)
{
	if (c->mc) {
		if (atomic_load(&c->inflight) || fi_close(&c->mc->fid))
			return -FI_EBUSY;
		c->mc = NULL;
	}
	if (c->set)
		fi_close(&c->set->fid);
	tg_comm_unlist(c);
	tg_tnbc_comm_fini(c);
	free(c->world);
	free(c);
	return 0;
}

void tg_comm_reap(void)
{
	struct tg_comm **p = &tg.closing;

	while (*p) {
		struct tg_comm *c = *p;

		if (!tg.ready || !tg_comm_close(c))
			*p = c->next;
		else
			p = &c->next;
	}
}

void tg_comm_free(struct tg_comm *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&tg.lock);
	/* MPI_Comm_free finishes what T-NBC left outstanding on c */
	if (tg.ready)
		tg_tnbc_reap(c, true);
	if (tg.ready && tg_comm_close(c)) {
		/* MPI lets a communicator go with operations in flight */
		c->closing = true;
		c->next = tg.closing;
		tg.closing = c;
	}
	pthread_mutex_unlock(&tg.lock);
}
