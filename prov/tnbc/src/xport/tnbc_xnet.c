/*
 * What the network transports share (tnbc_xnet.h).
 */
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>

#include "tnbc_base.h"
#include "tnbc_xnet.h"

struct tnbc_xnet_entry {
	struct tnbc_xnet_entry *next;
	struct tnbc_name name;
	uint8_t addr[TNBC_XADDR_LEN];
};

void tnbc_xnet_book_init(struct tnbc_xnet_book *b)
{
	pthread_mutex_init(&b->lock, NULL);
	b->head = NULL;
}

void tnbc_xnet_book_fini(struct tnbc_xnet_book *b)
{
	while (b->head) {
		struct tnbc_xnet_entry *e = b->head;

		b->head = e->next;
		free(e);
	}
	pthread_mutex_destroy(&b->lock);
}

bool tnbc_xnet_book_get(struct tnbc_xnet_book *b, const struct tnbc_name *name,
			void *addr, size_t len)
{
	bool found = false;

	pthread_mutex_lock(&b->lock);
	for (struct tnbc_xnet_entry *e = b->head; e; e = e->next)
		if (tnbc_name_same(&e->name, name)) {
			memcpy(addr, e->addr, len);
			found = true;
			break;
		}
	pthread_mutex_unlock(&b->lock);
	return found;
}

void tnbc_xnet_book_put(struct tnbc_xnet_book *b, const struct tnbc_name *name,
			const void *addr, size_t len)
{
	struct tnbc_xnet_entry *e;

	pthread_mutex_lock(&b->lock);
	for (e = b->head; e; e = e->next)
		if (tnbc_name_same(&e->name, name))
			break;
	if (!e) {
		e = calloc(1, sizeof(*e));
		if (e) {
			e->next = b->head;
			b->head = e;
		}
	}
	if (e) { /* else the source stays unknown: its answers fail */
		e->name = *name;
		memcpy(e->addr, addr, len);
	}
	pthread_mutex_unlock(&b->lock);
}

bool tnbc_xnet_introduced(const struct tnbc_xnet_intros *in,
			  const struct tnbc_name *src)
{
	for (unsigned i = 0; i < in->n; i++)
		if (tnbc_name_same(&in->name[i], src))
			return true;
	return false;
}

void tnbc_xnet_intro_add(struct tnbc_xnet_intros *in,
			 const struct tnbc_name *src)
{
	if (in->n < TNBC_XNET_INTROS)
		in->name[in->n++] = *src;
	else /* introducing it again costs one small message */
		in->name[src->uid % TNBC_XNET_INTROS] = *src;
}

void tnbc_xnet_app_init(struct tnbc_xnet_app *s)
{
	atomic_init(&s->app_ns, 0);
	atomic_init(&s->window_ns, tnbc_env.app_window_us * 1000u);
}

ssize_t tnbc_xnet_mem_copy(struct tnbc_xrx *x, size_t off,
			   const struct iovec *iov, size_t iov_count, size_t n)
{
	if (off > x->len || n > x->len - off)
		return -FI_EINVAL;
	tnbc_copy_to_iov(iov, iov_count, 0, x->head + off, n);
	return (ssize_t)n;
}

void tnbc_xnet_app_mark(struct tnbc_xnet_app *s, bool active)
{
	atomic_store_explicit(&s->app_ns, active ? tnbc_now_ns() : 0,
			      memory_order_relaxed);
}

bool tnbc_xnet_app_active(struct tnbc_xnet_app *s)
{
	uint64_t t = atomic_load_explicit(&s->app_ns, memory_order_relaxed);

	return t &&
	       tnbc_now_ns() - t < atomic_load_explicit(&s->window_ns,
							memory_order_relaxed);
}

void tnbc_xnet_set_window(struct tnbc_xnet_app *s, uint64_t ns)
{
	atomic_store_explicit(&s->window_ns, ns, memory_order_relaxed);
}

void tnbc_xnet_rx_posted(struct tnbc_xdom *xdom, int delta)
{
	(void)xdom;
	(void)delta;
}
