/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * What the network transports share (tnbc_net.h).
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>

#include "tnbc_base.h"
#include "tnbc_net.h"

/* An entry is in its bucket's chain and, unless the application gave
 * it (pinned), in the learned ones' list, oldest first: the first to
 * go when the book is full. */
struct tnbc_net_entry {
	struct tnbc_net_entry *next; /* in its bucket */
	struct tnbc_net_entry *older, *newer; /* learned ones only */
	struct tnbc_name name;
	bool pinned;
	uint8_t addr[TNBC_XADDR_LEN];
};

void tnbc_net_book_init(struct tnbc_net_book *b)
{
	memset(b, 0, sizeof(*b));
	pthread_mutex_init(&b->lock, NULL);
}

void tnbc_net_book_fini(struct tnbc_net_book *b)
{
	for (size_t i = 0; i < TNBC_NET_BOOK_BUCKETS; i++)
		while (b->bucket[i]) {
			struct tnbc_net_entry *e = b->bucket[i];

			b->bucket[i] = e->next;
			free(e);
		}
	pthread_mutex_destroy(&b->lock);
}

/* tnbc_name_same's fields: a service by its number alone */
static size_t tnbc_net_book_slot(const struct tnbc_name *n)
{
	uint64_t h = (uint64_t)n->kind * 0x9e3779b97f4a7c15ull ^ n->uid;

	if (n->kind != TNBC_NAME_SVC)
		h ^= ((uint64_t)n->pid << 32) ^ n->nonce;
	h *= 0xff51afd7ed558ccdull;
	return (size_t)(h >> 40) % TNBC_NET_BOOK_BUCKETS;
}

/* b->lock held. */
static struct tnbc_net_entry **tnbc_net_book_at(struct tnbc_net_book *b,
						const struct tnbc_name *name)
{
	struct tnbc_net_entry **it = &b->bucket[tnbc_net_book_slot(name)];

	while (*it && !tnbc_name_same(&(*it)->name, name))
		it = &(*it)->next;
	return it;
}

static void tnbc_net_learned_unlink(struct tnbc_net_book *b,
				    struct tnbc_net_entry *e)
{
	if (e->older)
		e->older->newer = e->newer;
	else
		b->oldest = e->newer;
	if (e->newer)
		e->newer->older = e->older;
	else
		b->newest = e->older;
	e->older = e->newer = NULL;
	b->learned--;
}

static void tnbc_net_learned_link(struct tnbc_net_book *b,
				  struct tnbc_net_entry *e)
{
	e->older = b->newest;
	e->newer = NULL;
	if (b->newest)
		b->newest->newer = e;
	else
		b->oldest = e;
	b->newest = e;
	b->learned++;
}

bool tnbc_net_book_find(struct tnbc_net_book *b, const struct tnbc_name *name,
			void *addr, size_t len, bool *pinned)
{
	struct tnbc_net_entry *e;

	pthread_mutex_lock(&b->lock);
	e = *tnbc_net_book_at(b, name);
	if (e) {
		memcpy(addr, e->addr, len);
		if (pinned)
			*pinned = e->pinned;
	}
	pthread_mutex_unlock(&b->lock);
	return e != NULL;
}

bool tnbc_net_book_get(struct tnbc_net_book *b, const struct tnbc_name *name,
		       void *addr, size_t len)
{
	return tnbc_net_book_find(b, name, addr, len, NULL);
}

static void tnbc_net_book_set(struct tnbc_net_book *b,
			      const struct tnbc_name *name, const void *addr,
			      size_t len, bool pin)
{
	struct tnbc_net_entry **at, *e;

	pthread_mutex_lock(&b->lock);
	at = tnbc_net_book_at(b, name);
	e = *at;
	if (e && e->pinned && !pin)
		goto out; /* what the application said stands */
	if (!e) {
		if (!pin && b->learned >= TNBC_NET_BOOK_LEARNED) {
			/* full: the oldest learned name goes */
			struct tnbc_net_entry *old = b->oldest, **it;

			tnbc_net_learned_unlink(b, old);
			it = &b->bucket[tnbc_net_book_slot(&old->name)];
			while (*it != old)
				it = &(*it)->next;
			*it = old->next;
			free(old);
			b->evicted++;
			at = tnbc_net_book_at(b, name);
		}
		e = calloc(1, sizeof(*e));
		if (!e)
			goto out; /* the source stays unknown: answers fail */
		*at = e;
		if (!pin)
			tnbc_net_learned_link(b, e);
	} else if (pin && !e->pinned) {
		tnbc_net_learned_unlink(b, e);
	} else if (!pin) {
		/* heard again: the last to go */
		tnbc_net_learned_unlink(b, e);
		tnbc_net_learned_link(b, e);
	}
	e->name = *name;
	e->pinned = e->pinned || pin;
	memset(e->addr, 0, sizeof(e->addr));
	memcpy(e->addr, addr, len);
out:
	pthread_mutex_unlock(&b->lock);
}

void tnbc_net_book_put(struct tnbc_net_book *b, const struct tnbc_name *name,
		       const void *addr, size_t len)
{
	tnbc_net_book_set(b, name, addr, len, false);
}

void tnbc_net_book_pin(struct tnbc_net_book *b, const struct tnbc_name *name,
		       const void *addr, size_t len)
{
	tnbc_net_book_set(b, name, addr, len, true);
}

bool tnbc_net_introduced(const struct tnbc_net_intros *in,
			 const struct tnbc_name *src)
{
	for (unsigned i = 0; i < in->n; i++)
		if (tnbc_name_same(&in->name[i], src))
			return true;
	return false;
}

void tnbc_net_intro_add(struct tnbc_net_intros *in, const struct tnbc_name *src)
{
	if (in->n < TNBC_NET_INTROS)
		in->name[in->n++] = *src;
	else /* introducing it again costs one small message */
		in->name[src->uid % TNBC_NET_INTROS] = *src;
}

void tnbc_net_app_init(struct tnbc_net_app *s)
{
	atomic_init(&s->app_ns, 0);
	atomic_init(&s->window_ns, tnbc_env.app_window_us * 1000u);
}

ssize_t tnbc_net_mem_copy(struct tnbc_xrx *x, size_t off,
			  const struct iovec *iov, size_t iov_count, size_t n)
{
	if (off > x->len || n > x->len - off)
		return -FI_EINVAL;
	tnbc_copy_to_iov(iov, iov_count, 0, x->head + off, n);
	return (ssize_t)n;
}

static struct tnbc_net_app *tnbc_net_app_of(struct tnbc_xdom *xdom)
{
	return (struct tnbc_net_app *)(void *)xdom;
}

void tnbc_net_app_mark(struct tnbc_xdom *xdom, bool active)
{
	struct tnbc_net_app *s = tnbc_net_app_of(xdom);

	atomic_store_explicit(&s->app_ns, active ? tnbc_now_ns() : 0,
			      memory_order_relaxed);
}

bool tnbc_net_app_active(struct tnbc_xdom *xdom)
{
	struct tnbc_net_app *s = tnbc_net_app_of(xdom);
	uint64_t t = atomic_load_explicit(&s->app_ns, memory_order_relaxed);

	return t &&
	       tnbc_now_ns() - t < atomic_load_explicit(&s->window_ns,
							memory_order_relaxed);
}

void tnbc_net_set_window(struct tnbc_xdom *xdom, uint64_t ns)
{
	struct tnbc_net_app *s = tnbc_net_app_of(xdom);

	atomic_store_explicit(&s->window_ns, ns, memory_order_relaxed);
}

void tnbc_net_rx_posted(struct tnbc_xdom *xdom, int delta)
{
	(void)xdom;
	(void)delta;
}
