/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Wire format, iovec helpers, the shm ring (wrap-around and a full
 * queue), and robustness against malformed packets.
 */
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "tnbc_unit.h"
#include "xport/shm/tnbc_shm_region.h"

#define R	   0
#define A	   1
#define RNDV_LEN_P (64 * 1024)

static int ctx[8];

START_TEST(proto_wire_format)
{
	ck_assert_uint_eq(TNBC_PROTO_VERSION, 8);
	ck_assert_uint_eq(sizeof(struct tnbc_hdr_short), 32);
	ck_assert_uint_eq(sizeof(struct tnbc_rma_req), 8);
	ck_assert_uint_eq(offsetof(struct tnbc_rma_req, flags), 3);
	ck_assert_uint_eq(sizeof(struct tnbc_rma_direct), 8);
	ck_assert_uint_eq(sizeof(struct tnbc_rma_seg), 24);
	ck_assert_uint_eq(sizeof(struct tnbc_hdr), 88);
	ck_assert_uint_eq(sizeof(struct tnbc_name), 32);
	ck_assert_uint_eq(TNBC_NAME_LEN, 32);
	ck_assert_uint_eq(sizeof(struct tnbc_rts_iov), 24);
	ck_assert_uint_eq(offsetof(struct tnbc_rts_iov, key), 16);

	/* field offsets are part of the wire format */
	ck_assert_uint_eq(offsetof(struct tnbc_hdr, version), 0);
	ck_assert_uint_eq(offsetof(struct tnbc_hdr, type), 1);
	ck_assert_uint_eq(offsetof(struct tnbc_hdr, flags), 2);
	ck_assert_uint_eq(offsetof(struct tnbc_hdr, payload_len), 4);
	ck_assert_uint_eq(offsetof(struct tnbc_hdr, tag), 8);
	ck_assert_uint_eq(offsetof(struct tnbc_hdr, cq_data), 16);
	ck_assert_uint_eq(offsetof(struct tnbc_hdr, size), 24);
	ck_assert_uint_eq(offsetof(struct tnbc_hdr, msg_id), 32);
	ck_assert_uint_eq(offsetof(struct tnbc_hdr, token), 40);
	ck_assert_uint_eq(offsetof(struct tnbc_hdr, offset), 48);
	ck_assert_uint_eq(offsetof(struct tnbc_hdr, src), 56);
	ck_assert_uint_eq(offsetof(struct tnbc_name, version), 0);
	ck_assert_uint_eq(offsetof(struct tnbc_name, xports), 2);
	ck_assert_uint_eq(offsetof(struct tnbc_name, kind), 4);
	ck_assert_uint_eq(offsetof(struct tnbc_name, pid), 8);
	ck_assert_uint_eq(offsetof(struct tnbc_name, uid), 12);
	ck_assert_uint_eq(offsetof(struct tnbc_name, host), 16);
	ck_assert_uint_eq(offsetof(struct tnbc_name, nonce), 24);
	ck_assert_uint_eq(sizeof(struct tnbc_red_hdr), 24);
	ck_assert_uint_eq(sizeof(struct tnbc_red_pkt), 72);
	ck_assert_uint_eq(offsetof(struct tnbc_red_hdr, op), 5);
	ck_assert_uint_eq(offsetof(struct tnbc_red_hdr, datatype), 6);
	ck_assert_uint_eq(offsetof(struct tnbc_red_hdr, count), 8);
	ck_assert_uint_eq(offsetof(struct tnbc_red_hdr, errvec), 20);

	ck_assert_int_eq(TNBC_PKT_EAGER, 1);
	ck_assert_int_eq(TNBC_PKT_RTS, 2);
	ck_assert_int_eq(TNBC_PKT_ACK, 3);
	ck_assert_int_eq(TNBC_PKT_CTS, 4);
	ck_assert_int_eq(TNBC_PKT_DATA, 5);
	ck_assert_uint_eq(TNBC_HDR_TAGGED, 1);
	ck_assert_uint_eq(TNBC_HDR_CQ_DATA, 2);
	ck_assert_uint_eq(TNBC_HDR_SHORT, 64);
	ck_assert_uint_eq(TNBC_HDR_SHORT_SVC, 128);
	ck_assert_uint_eq(offsetof(struct tnbc_hdr_short, flags), 2);
	ck_assert_uint_eq(offsetof(struct tnbc_hdr_short, payload_len), 4);
	ck_assert_uint_eq(offsetof(struct tnbc_hdr_short, tag), 8);
	ck_assert_uint_eq(offsetof(struct tnbc_hdr_short, pid), 16);
	ck_assert_uint_eq(offsetof(struct tnbc_hdr_short, nonce), 24);
	ck_assert_int_eq(TNBC_NAME_PID, 1);
	ck_assert_int_eq(TNBC_NAME_SVC, 2);
	ck_assert_int_eq(TNBC_XPORT_SHM, 1);
}
END_TEST

/* Two transports as the protocol sees them, for its frames alone: one
 * that reaches this host only, one that reaches others too. */
static const struct tnbc_xport_ops frame_local = {
	.name = "local",
	.id = TNBC_XPORT_SHM,
	.flags = TNBC_XPORT_LOCAL,
};
static const struct tnbc_xport_ops frame_remote = {
	.name = "remote",
	.id = TNBC_XPORT_SHM,
};

/* Packs hdr for x, checks the frame's length, unpacks it at self and
 * compares with what the protocol must see. */
static void frame_trip(const struct tnbc_xport_ops *x,
		       const struct tnbc_name *self, const struct tnbc_hdr *hdr,
		       size_t want_len)
{
	_Alignas(16) uint8_t frame[TNBC_XPKT_FRAME_MAX];
	uint8_t pkt[TNBC_XPKT_FRAME_MAX + 16];
	struct tnbc_hdr out;
	size_t n = tnbc_frame_pack(x, hdr, frame);

	ck_assert_uint_eq(n, want_len);
	memcpy(pkt, frame, n);
	memset(pkt + n, 0xab, hdr->payload_len);
	ck_assert_uint_eq(
		tnbc_frame_unpack(x, self, pkt, n + hdr->payload_len, &out), n);
	ck_assert_mem_eq(&out, hdr, sizeof(out));
	/* one byte more or less than the frame says is a malformed packet */
	ck_assert_uint_eq(
		tnbc_frame_unpack(x, self, pkt, n + hdr->payload_len + 1, &out),
		0);
	if (n + hdr->payload_len)
		ck_assert_uint_eq(tnbc_frame_unpack(x, self, pkt,
						    n + hdr->payload_len - 1,
						    &out),
				  0);
}

/*
 * The protocol's frames, with no transport under them: a small eager
 * message to a peer on this host travels as the short frame (32 B, 40
 * with CQ data), anything else as the full header, and either comes
 * back as the header that was sent; a short frame is refused from a
 * transport that reaches other hosts, and a frame of another version or
 * with the short bit in a full header is malformed.
 */
START_TEST(proto_frames)
{
	struct tnbc_name self = {.version = TNBC_PROTO_VERSION,
				 .xports = TNBC_XPORT_BIT(TNBC_XPORT_SHM),
				 .kind = TNBC_NAME_PID,
				 .pid = 4242,
				 .uid = 3,
				 .host = 0x1234abcdull,
				 .nonce = 77};
	_Alignas(16) uint8_t frame[TNBC_XPKT_FRAME_MAX];
	struct tnbc_hdr h = {.version = TNBC_PROTO_VERSION,
			     .type = TNBC_PKT_EAGER,
			     .flags = TNBC_HDR_TAGGED,
			     .payload_len = 8,
			     .size = 8,
			     .tag = 0x99,
			     .src = self},
			out;

	h.src.pid = 4343;
	h.src.nonce = 0xfeedull;
	frame_trip(&frame_local, &self, &h, 32);
	h.flags |= TNBC_HDR_CQ_DATA;
	h.cq_data = 0x5151;
	frame_trip(&frame_local, &self, &h, 40);
	h.src.kind = TNBC_NAME_SVC;
	frame_trip(&frame_local, &self, &h, 40);
	h.src.kind = TNBC_NAME_PID;
	frame_trip(&frame_remote, &self, &h, sizeof(h));
	/* not implied by a short frame: the full header */
	h.payload_len = h.size = 0;
	h.type = TNBC_PKT_RTS;
	h.msg_id = 5;
	frame_trip(&frame_local, &self, &h, sizeof(h));
	h.type = TNBC_PKT_EAGER;
	h.msg_id = 0;
	/* a short frame implies the receiver's host */
	h.src.host = 0x999;
	ck_assert_uint_eq(tnbc_frame_pack(&frame_local, &h, frame), 40);
	ck_assert_uint_eq(
		tnbc_frame_unpack(&frame_local, &self, frame, 40, &out), 40);
	ck_assert_uint_eq(out.src.host, self.host);
	h.src.host = self.host;

	/* a short frame through a transport that reaches other hosts */
	ck_assert_uint_eq(tnbc_frame_pack(&frame_local, &h, frame), 40);
	ck_assert_uint_eq(
		tnbc_frame_unpack(&frame_remote, &self, frame, 40, &out), 0);
	/* another version, short and full */
	frame[0] = TNBC_PROTO_VERSION + 1;
	ck_assert_uint_eq(
		tnbc_frame_unpack(&frame_local, &self, frame, 40, &out), 0);
	h.type = TNBC_PKT_ACK;
	ck_assert_uint_eq(tnbc_frame_pack(&frame_local, &h, frame), sizeof(h));
	ck_assert_uint_eq(
		tnbc_frame_unpack(&frame_local, &self, frame, sizeof(h), &out),
		sizeof(h));
	frame[0] = 0;
	ck_assert_uint_eq(
		tnbc_frame_unpack(&frame_local, &self, frame, sizeof(h), &out),
		0);
	/* a short frame's bits in a full header: no frame the protocol
	 * makes (with the short bit it reads as a short frame, and an ACK
	 * is none) */
	h.flags |= TNBC_HDR_SHORT_SVC;
	memcpy(frame, &h, sizeof(h));
	ck_assert_uint_eq(
		tnbc_frame_unpack(&frame_local, &self, frame, sizeof(h), &out),
		0);
	h.flags |= TNBC_HDR_SHORT;
	memcpy(frame, &h, sizeof(h));
	ck_assert_uint_eq(
		tnbc_frame_unpack(&frame_local, &self, frame, sizeof(h), &out),
		0);
}
END_TEST

/* An endpoint's name is well formed and unique. */
START_TEST(proto_ep_names)
{
	struct tu_world w;

	tu_world_open(&w, 3, NULL);
	for (int i = 0; i < 3; i++) {
		const struct tnbc_name *n = &w.ep[i].name;

		ck_assert_int_eq(n->version, TNBC_PROTO_VERSION);
		ck_assert_int_eq(n->xports, tu_xmask());
		ck_assert_int_eq(n->kind, TNBC_NAME_PID);
		ck_assert_uint_eq(n->pid, (uint32_t)getpid());
		ck_assert_uint_ne(n->uid, TNBC_UID_ANY);
		for (int j = 0; j < i; j++)
			ck_assert_uint_ne(n->uid, w.ep[j].name.uid);
	}
	/* a too-small buffer is refused, with the size needed */
	{
		uint8_t small[8];
		size_t len = sizeof(small);

		ck_assert_int_eq(fi_getname(&w.ep[0].ep->fid, small, &len),
				 -FI_ETOOSMALL);
		ck_assert_uint_eq(len, sizeof(struct tnbc_addr));
	}
	tu_world_close(&w);
}
END_TEST

START_TEST(proto_iov_slice)
{
	char a[10], c[20], e[5];
	struct iovec iov[5] = {{a, 10}, {NULL, 0}, {c, 20}, {NULL, 0}, {e, 5}};
	struct iovec out[8];
	size_t n;

	ck_assert_uint_eq(tnbc_iov_len(iov, 5), 35);
	ck_assert_uint_eq(tnbc_iov_len(iov, 0), 0);

	/* offset inside the 2nd non-empty iovec */
	n = tnbc_iov_slice(iov, 5, 12, 15, out, 8);
	ck_assert_uint_eq(n, 1);
	ck_assert_ptr_eq(out[0].iov_base, c + 2);
	ck_assert_uint_eq(out[0].iov_len, 15);

	/* starting exactly at an iovec boundary, running past the end */
	n = tnbc_iov_slice(iov, 5, 10, 100, out, 8);
	ck_assert_uint_eq(n, 2);
	ck_assert_ptr_eq(out[0].iov_base, c);
	ck_assert_uint_eq(out[0].iov_len, 20);
	ck_assert_ptr_eq(out[1].iov_base, e);
	ck_assert_uint_eq(out[1].iov_len, 5);

	/* straddling a boundary and a zero-length iovec */
	n = tnbc_iov_slice(iov, 5, 9, 3, out, 8);
	ck_assert_uint_eq(n, 2);
	ck_assert_ptr_eq(out[0].iov_base, a + 9);
	ck_assert_uint_eq(out[0].iov_len, 1);
	ck_assert_ptr_eq(out[1].iov_base, c);
	ck_assert_uint_eq(out[1].iov_len, 2);

	n = tnbc_iov_slice(iov, 5, 29, 6, out, 8);
	ck_assert_uint_eq(n, 2);
	ck_assert_ptr_eq(out[0].iov_base, c + 19);
	ck_assert_uint_eq(out[0].iov_len, 1);
	ck_assert_ptr_eq(out[1].iov_base, e);
	ck_assert_uint_eq(out[1].iov_len, 5);

	/* everything: zero-length iovecs are never emitted */
	n = tnbc_iov_slice(iov, 5, 0, 35, out, 8);
	ck_assert_uint_eq(n, 3);
	for (size_t i = 0; i < n; i++)
		ck_assert_uint_gt(out[i].iov_len, 0);

	/* out_max bounds the result */
	n = tnbc_iov_slice(iov, 5, 0, 35, out, 2);
	ck_assert_uint_eq(n, 2);
	ck_assert_ptr_eq(out[1].iov_base, c);

	/* empty slices */
	ck_assert_uint_eq(tnbc_iov_slice(iov, 5, 35, 10, out, 8), 0);
	ck_assert_uint_eq(tnbc_iov_slice(iov, 5, 1000, 1, out, 8), 0);
	ck_assert_uint_eq(tnbc_iov_slice(iov, 5, 5, 0, out, 8), 0);
	ck_assert_uint_eq(tnbc_iov_slice(iov, 0, 0, 10, out, 8), 0);
	ck_assert_uint_eq(tnbc_iov_slice(iov, 5, 0, 10, out, 0), 0);
	{
		struct iovec z[3] = {{NULL, 0}, {NULL, 0}, {NULL, 0}};

		ck_assert_uint_eq(tnbc_iov_slice(z, 3, 0, 10, out, 8), 0);
	}
}
END_TEST

/* The host-load reading behind the engine's oversubscribed mode. */
START_TEST(proto_loadavg)
{
	ck_assert(
		!tnbc_loadavg_oversubscribed("0.50 0.40 0.30 3/120 4567\n", 2));
	ck_assert(
		tnbc_loadavg_oversubscribed("7.01 6.00 5.00 4/130 4567\n", 2));
	ck_assert(tnbc_loadavg_oversubscribed("9.0 9.0 9.0 17/300 1\n", 8));
	ck_assert(!tnbc_loadavg_oversubscribed("9.0 9.0 9.0 9/300 1\n", 8));
	/* anything else says nothing */
	ck_assert(!tnbc_loadavg_oversubscribed("", 2));
	ck_assert(!tnbc_loadavg_oversubscribed("1.0 1.0 1.0", 2));
	ck_assert(!tnbc_loadavg_oversubscribed("1.0 1.0 1.0 x/120 1", 2));
	ck_assert(!tnbc_loadavg_oversubscribed("1.0 1.0 1.0 99 1", 2));
	ck_assert(!tnbc_loadavg_oversubscribed("1.0 1.0 1.0 0/120 1", 2));
	ck_assert(!tnbc_loadavg_oversubscribed("1.0 1.0 1.0 9/120 1", 0));
	ck_assert(!tnbc_loadavg_oversubscribed(NULL, 2));
}
END_TEST

/* The free list behind the trigger unit's requests and the schedules:
 * last in, first out; full at its cap; drained through fini.  Sanitizer
 * builds keep nothing. */
static int freelist_fini_calls;

static void freelist_fini(void *obj)
{
	freelist_fini_calls++;
	free(obj);
}

START_TEST(proto_freelist)
{
	struct tnbc_freelist fl = TNBC_FREELIST_INIT(3);
	void *obj[4];
	bool keeps;

	for (int i = 0; i < 4; i++) {
		obj[i] = malloc(64);
		ck_assert_ptr_nonnull(obj[i]);
		memset(obj[i], 0xa5, 64);
	}
	ck_assert_ptr_null(tnbc_freelist_get(&fl));
	keeps = tnbc_freelist_put(&fl, obj[0]);
	ck_assert_int_eq(keeps, TNBC_FREELIST_KEEPS);
	if (!keeps) { /* a sanitizer build */
		for (int i = 0; i < 4; i++)
			free(obj[i]);
		return;
	}
	ck_assert(tnbc_freelist_put(&fl, obj[1]));
	ck_assert(tnbc_freelist_put(&fl, obj[2]));
	ck_assert(!tnbc_freelist_put(&fl, obj[3])); /* full: still ours */
	ck_assert_ptr_eq(tnbc_freelist_get(&fl), obj[2]);
	/* only the link's bytes were written */
	ck_assert_uint_eq(((unsigned char *)obj[2])[sizeof(void *)], 0xa5);
	ck_assert(tnbc_freelist_put(&fl, obj[3]));
	freelist_fini_calls = 0;
	tnbc_freelist_drain(&fl, freelist_fini);
	ck_assert_int_eq(freelist_fini_calls, 3);
	ck_assert_ptr_null(tnbc_freelist_get(&fl));
	free(obj[2]);
}
END_TEST

START_TEST(proto_iov_copy)
{
	uint8_t a[10], c[20], e[5], src[40], dst[40];
	struct iovec iov[5] = {{a, 10}, {NULL, 0}, {c, 20}, {NULL, 0}, {e, 5}};

	tu_fill(src, sizeof(src), 3);
	memset(a, 0, sizeof(a));
	memset(c, 0, sizeof(c));
	memset(e, 0, sizeof(e));

	/* into the middle of the 2nd iovec, asking for more than fits */
	ck_assert_uint_eq(tnbc_copy_to_iov(iov, 5, 12, src, 40), 23);
	for (int i = 0; i < 10; i++)
		ck_assert_uint_eq(a[i], 0);
	ck_assert_uint_eq(c[0], 0);
	ck_assert_uint_eq(c[1], 0);
	ck_assert_mem_eq(c + 2, src, 18);
	ck_assert_mem_eq(e, src + 18, 5);

	/* across a boundary */
	ck_assert_uint_eq(tnbc_copy_to_iov(iov, 5, 8, src + 30, 4), 4);
	ck_assert_uint_eq(a[8], src[30]);
	ck_assert_uint_eq(a[9], src[31]);
	ck_assert_uint_eq(c[0], src[32]);
	ck_assert_uint_eq(c[1], src[33]);
	ck_assert_mem_eq(c + 2, src, 18); /* untouched beyond */

	/* and back */
	memset(dst, 0xaa, sizeof(dst));
	ck_assert_uint_eq(tnbc_copy_from_iov(dst, iov, 5, 8, 5), 5);
	ck_assert_mem_eq(dst, src + 30, 4);
	ck_assert_uint_eq(dst[4], src[0]);
	ck_assert_uint_eq(dst[5], 0xaa);

	memset(dst, 0xaa, sizeof(dst));
	ck_assert_uint_eq(tnbc_copy_from_iov(dst, iov, 5, 12, 100), 23);
	ck_assert_mem_eq(dst, src, 23);
	ck_assert_uint_eq(dst[23], 0xaa);

	/* nothing to copy */
	ck_assert_uint_eq(tnbc_copy_from_iov(dst, iov, 5, 35, 10), 0);
	ck_assert_uint_eq(tnbc_copy_from_iov(dst, iov, 5, 3, 0), 0);
	ck_assert_uint_eq(tnbc_copy_to_iov(iov, 5, 36, src, 1), 0);
	ck_assert_uint_eq(tnbc_copy_to_iov(iov, 0, 0, src, 1), 0);
	{
		struct iovec z[2] = {{NULL, 0}, {NULL, 0}};

		ck_assert_uint_eq(tnbc_copy_to_iov(z, 2, 0, src, 10), 0);
		ck_assert_uint_eq(tnbc_copy_from_iov(dst, z, 2, 0, 10), 0);
	}
}
END_TEST

/* Message i carries its index and a pattern; returns its length. */
static size_t mkmsg(uint8_t *buf, uint32_t i)
{
	size_t len = 8 + (i * 37) % 500;

	memcpy(buf, &i, sizeof(i));
	tu_fill(buf + 4, len - 4, i);
	return len;
}

static void checkmsg(const uint8_t *buf, size_t len, uint32_t i)
{
	uint32_t got;

	ck_assert_uint_eq(len, 8 + (i * 37) % 500);
	memcpy(&got, buf, sizeof(got));
	ck_assert_msg(got == i, "got message %u, want %u", got, i);
	ck_assert_uint_eq(tu_check(buf + 4, len - 4, i, 0), (size_t)-1);
}

/* Cells in a receive queue of rx_slots largest packets (tnbc_shm.c). */
static uint32_t ring_cells(void)
{
	return (uint32_t)(tnbc_env.rx_slots * tnbc_env.slot_size / 64);
}

/* Twice as many messages as a small queue has cells, one at a time, in
 * lengths that do not divide it: the ring wraps about ten times, and a
 * packet that would cross its end is padded over. */
START_TEST(proto_ring_wrap)
{
	const size_t old_slots = tnbc_env.rx_slots;
	struct tu_world w;
	uint8_t s[512], r[512];
	uint32_t n;
	struct fi_cq_tagged_entry e;

	tnbc_env.rx_slots = 8;
	n = 2 * ring_cells();
	tu_world_open(&w, 2, NULL);
	for (uint32_t i = 0; i < n; i++) {
		size_t len = mkmsg(s, i);
		bool posted_first = i % 3 != 0;

		if (posted_first)
			ck_assert_int_eq(fi_trecv(w.ep[R].ep, r, sizeof(r),
						  NULL, FI_ADDR_UNSPEC, i, 0,
						  &ctx[0]),
					 0);
		ck_assert_int_eq(fi_tsend(w.ep[A].ep, s, len, NULL, w.addr[R],
					  i, &ctx[1]),
				 0);
		if (!posted_first)
			ck_assert_int_eq(fi_trecv(w.ep[R].ep, r, sizeof(r),
						  NULL, FI_ADDR_UNSPEC, i, 0,
						  &ctx[0]),
					 0);
		tu_cq_expect(w.ep[R].rx_cq, &e, NULL);
		ck_assert_uint_eq(e.tag, i);
		checkmsg(r, e.len, i);
		tu_cq_expect(w.ep[A].tx_cq, &e, NULL);
		ck_assert_ptr_eq(e.op_context, &ctx[1]);
	}
	tu_world_close(&w);
	tnbc_env.rx_slots = old_slots;
}
END_TEST

/* Every fifth message of a burst is injected from a scratch buffer that
 * is scribbled over at once: the provider must have taken a copy, also
 * when the message has to wait for queue space. */
static bool burst_inject(uint32_t i)
{
	return i % 5 == 0;
}

static void burst_send(struct tu_world *w, const uint8_t *buf, size_t len,
		       uint32_t i, void *context)
{
	static uint8_t scratch[512];
	ssize_t ret;

	if (burst_inject(i)) {
		memcpy(scratch, buf, len);
		ret = fi_tinject(w->ep[A].ep, scratch, len, w->addr[R], 0x42);
		memset(scratch, 0xdd, sizeof(scratch));
	} else {
		ret = fi_tsend(w->ep[A].ep, buf, len, NULL, w->addr[R], 0x42,
			       context);
	}
	ck_assert_msg(ret == 0, "send %u: %zd", i, ret);
}

/*
 * A burst larger than the receive queue while the receiver posts late.
 * _i = 0: with the engine thread (it drains the queue into the
 * unexpected list as it fills).  _i = 1: without it, so the queue really
 * fills and the rest of the burst waits on the sender's tx queue until
 * the receiver polls.
 */
START_TEST(proto_ring_burst)
{
	const int old_engine = tnbc_env.engine;
	const size_t old_slots = tnbc_env.rx_slots;
	/* more messages than the queue has cells: it fills */
	const uint32_t n1 = (tnbc_env.rx_slots = 8, ring_cells() + 7);
	const uint32_t n = n1 + 50;
	struct tu_world w;
	uint8_t(*s)[512] = malloc(n * sizeof(*s));
	uint8_t(*r)[512] = malloc(n * sizeof(*r));
	size_t *lens = malloc(n * sizeof(*lens));
	uint32_t *rctx = malloc(n * sizeof(*rctx));
	struct fi_cq_tagged_entry e;
	struct fi_tnbc_engine_stats st;
	uint32_t txdone = 0;

	tnbc_env.engine = _i ? 0 : 1;
	tu_world_open(&w, 2, NULL);
	tu_engine_stats(w.d.domain, &st);
	ck_assert_int_eq(st.engine_running, _i ? 0 : 1);

	for (uint32_t i = 0; i < n; i++) {
		lens[i] = mkmsg(s[i], i);
		rctx[i] = i;
	}
	for (uint32_t i = 0; i < n1; i++)
		burst_send(&w, s[i], lens[i], i, &rctx[i]);
	if (_i) {
		struct tnbc_ep *ea =
			tnbc_container_of(w.ep[A].ep, struct tnbc_ep, ep_fid);
		struct tnbc_ep *er =
			tnbc_container_of(w.ep[R].ep, struct tnbc_ep, ep_fid);

		/* nobody progressed: the queue is full and the rest waits */
		pthread_mutex_lock(&ea->lock);
		ck_assert(!tnbc_list_empty(&ea->tx_queue));
		pthread_mutex_unlock(&ea->lock);
		/* the receiver alone drains part of its queue: new sends
		 * must still line up behind the waiting ones, not jump into
		 * the freed slots */
		ck_assert_int_gt(tnbc_ep_progress(er, false), 0);
	}
	for (uint32_t i = n1; i < n; i++)
		burst_send(&w, s[i], lens[i], i, &rctx[i]);
	if (!_i)
		tu_sleep_ms(20);
	for (uint32_t i = 0; i < n; i++)
		ck_assert_int_eq(fi_trecv(w.ep[R].ep, r[i], sizeof(r[i]), NULL,
					  FI_ADDR_UNSPEC, 0x42, 0, &ctx[2]),
				 0);
	/* same tag: receive i must get message i */
	for (uint32_t i = 0; i < n; i++) {
		tu_cq_expect(w.ep[R].rx_cq, &e, NULL);
		ck_assert_ptr_eq(e.buf, r[i]);
		checkmsg(r[i], e.len, i);
	}
	/* in order, and none for the injected ones */
	for (uint32_t i = 0; i < n; i++) {
		if (burst_inject(i))
			continue;
		tu_cq_expect(w.ep[A].tx_cq, &e, NULL);
		ck_assert_ptr_eq(e.op_context, &rctx[i]);
		txdone++;
	}
	ck_assert(tu_cq_quiet(w.ep[A].tx_cq, 5));
	ck_assert_uint_eq(txdone, n - (n + 4) / 5);
	ck_assert(tu_cq_quiet(w.ep[R].rx_cq, 5));
	if (_i) {
		tu_engine_stats(w.d.domain, &st);
		ck_assert_uint_eq(st.engine_pkts, 0);
		ck_assert_uint_ge(st.app_pkts, n);
	}
	tu_world_close(&w);
	free(s);
	free(r);
	free(lens);
	free(rctx);
	tnbc_env.engine = old_engine;
	tnbc_env.rx_slots = old_slots;
}
END_TEST

/* Sends a hand-built packet to ep[to] straight through the transport. */
static void raw_send(struct tu_world *w, int to, const struct tnbc_hdr *h,
		     const void *payload)
{
	struct tnbc_domain *dom = tu_tnbc_domain(&w->d);
	struct tnbc_xpeer *peer = NULL;
	struct iovec iov = {.iov_base = (void *)payload,
			    .iov_len = h->payload_len};

	ck_assert_ptr_eq(dom->xops, &tnbc_shm_ops);
	ck_assert_int_eq(
		tnbc_shm_ops.peer_get(dom->xdom, &w->ep[to].name, NULL, &peer),
		0);
	ck_assert_ptr_nonnull(peer);
	/* the full header as its frame, whatever tnbc_frame_pack would
	 * make of it */
	ck_assert_int_eq(
		tnbc_shm_ops.send(peer,
				  &(struct tnbc_xpkt){
					  .frame = h,
					  .frame_len = sizeof(*h),
					  .payload_len = h->payload_len,
					  .iov = payload ? &iov : NULL,
					  .iov_count = payload ? 1 : 0,
				  }),
		0);
}

static struct tnbc_hdr eager_hdr(struct tu_world *w, uint64_t tag, uint32_t len)
{
	struct tnbc_hdr h;

	memset(&h, 0, sizeof(h));
	h.version = TNBC_PROTO_VERSION;
	h.type = TNBC_PKT_EAGER;
	h.flags = TNBC_HDR_TAGGED;
	h.tag = tag;
	h.size = len;
	h.payload_len = len;
	h.src = w->ep[A].name;
	return h;
}

/* A message from ep[from] to ep[to], received whole: the pair works. */
static void round_trip(struct tu_world *w, int from, int to, uint64_t tag)
{
	struct fi_cq_tagged_entry e;
	char r[16] = {0};

	ck_assert_int_eq(fi_trecv(w->ep[to].ep, r, sizeof(r), NULL,
				  FI_ADDR_UNSPEC, tag, 0, &ctx[6]),
			 0);
	ck_assert_int_eq(fi_tsend(w->ep[from].ep, "works", 6, NULL, w->addr[to],
				  tag, &ctx[7]),
			 0);
	tu_cq_expect(w->ep[to].rx_cq, &e, NULL);
	ck_assert_ptr_eq(e.op_context, &ctx[6]);
	ck_assert_str_eq(r, "works");
	tu_cq_expect(w->ep[from].tx_cq, &e, NULL);
	ck_assert_ptr_eq(e.op_context, &ctx[7]);
}

START_TEST(proto_bad_packets)
{
	struct tu_world w;
	struct tnbc_hdr h;
	char r[16];
	struct fi_cq_tagged_entry e;
	fi_addr_t src;

	tu_world_open(&w, 2, NULL);

	/* control: a hand-built packet of the right version is a message
	 * from A like any other */
	h = eager_hdr(&w, 0x78, 5);
	raw_send(&w, R, &h, "good");
	ck_assert_int_eq(fi_trecv(w.ep[R].ep, r, sizeof(r), NULL,
				  FI_ADDR_UNSPEC, 0x78, 0, &ctx[0]),
			 0);
	tu_cq_expect(w.ep[R].rx_cq, &e, &src);
	ck_assert_uint_eq(e.len, 5);
	ck_assert_str_eq(r, "good");
	ck_assert_uint_eq(src, w.addr[A]);

	ck_assert_int_eq(fi_trecv(w.ep[R].ep, r, sizeof(r), NULL,
				  FI_ADDR_UNSPEC, 0x77, 0, &ctx[1]),
			 0);
	/* wrong version */
	h = eager_hdr(&w, 0x77, 5);
	h.version = TNBC_PROTO_VERSION + 1;
	raw_send(&w, R, &h, "bad1");
	h.version = 0;
	raw_send(&w, R, &h, "bad2");
	/* eager whose length disagrees with its payload */
	h = eager_hdr(&w, 0x77, 5);
	h.size = 100;
	raw_send(&w, R, &h, "bad3");
	/* unknown packet types */
	h = eager_hdr(&w, 0x77, 5);
	h.type = 0;
	raw_send(&w, R, &h, "bad4");
	h.type = 99;
	raw_send(&w, R, &h, "bad5");
	/* control packets for transfers that do not exist */
	h = eager_hdr(&w, 0, 0);
	h.type = TNBC_PKT_ACK;
	h.msg_id = 0x500000003ULL;
	raw_send(&w, R, &h, NULL);
	h.type = TNBC_PKT_CTS;
	h.size = 1000;
	raw_send(&w, R, &h, NULL);
	h = eager_hdr(&w, 0x77, 5);
	h.type = TNBC_PKT_DATA;
	h.token = 12345;
	raw_send(&w, R, &h, "bad6");
	ck_assert(tu_cq_quiet(w.ep[R].rx_cq, TU_QUIET_MS));
	ck_assert_str_eq(r, "good"); /* the buffer was never written */

	/* the endpoint still works, both ways */
	ck_assert_int_eq(
		fi_tsend(w.ep[A].ep, "fine", 5, NULL, w.addr[R], 0x77, &ctx[2]),
		0);
	tu_cq_expect(w.ep[R].rx_cq, &e, NULL);
	ck_assert_ptr_eq(e.op_context, &ctx[1]);
	ck_assert_str_eq(r, "fine");
	tu_cq_expect(w.ep[A].tx_cq, &e, NULL);
	round_trip(&w, R, A, 0x79);
	tu_world_close(&w);
}
END_TEST

/* A direct read request (TNBC_RMA_REQ_DIRECT) as a peer chose to write
 * it: nseg segments of 64 bytes from addr under key, the request saying
 * it covers size bytes; nloc and kind as given. */
static void raw_direct(struct tu_world *w, uint32_t nseg, uint32_t nloc,
		       uint8_t kind, uint64_t addr, uint64_t key, uint64_t size,
		       size_t cut)
{
	uint8_t buf[sizeof(struct tnbc_rma_req) +
		    sizeof(struct tnbc_rma_direct) +
		    16 * sizeof(struct tnbc_rma_seg)];
	struct tnbc_rma_req req = {.kind = kind, .flags = TNBC_RMA_REQ_DIRECT};
	struct tnbc_rma_direct d = {.nseg = nseg, .nloc = nloc};
	size_t n = sizeof(req) + sizeof(d), segs = nseg < 16 ? nseg : 16;
	struct tnbc_hdr h = eager_hdr(w, 0, 0);

	memcpy(buf, &req, sizeof(req));
	memcpy(buf + sizeof(req), &d, sizeof(d));
	for (size_t i = 0; i < segs; i++) {
		struct tnbc_rma_seg sg = {
			.addr = addr + 64 * i, .len = 64, .key = key};

		memcpy(buf + n, &sg, sizeof(sg));
		n += sizeof(sg);
	}
	h.type = TNBC_PKT_RMA_REQ;
	h.tag = 0;
	h.msg_id = 0x700000001ULL;
	h.flags = TNBC_HDR_RMA_LAST;
	h.size = size;
	h.payload_len = (uint32_t)(n - cut);
	raw_send(w, R, &h, buf);
}

/*
 * Direct read requests that do not hold together: no segment, more than
 * one request may carry, buffers of a writer, a write, lengths that
 * disagree with the packet or with the size, a range past the region,
 * an unknown key.  The target answers each with an error (an answer to
 * nothing at the sender: dropped there and counted), lends nothing, and
 * both endpoints go on working; a well-formed one is answered with where
 * the data lies.
 */
START_TEST(proto_bad_direct_reads)
{
	struct fi_tnbc_engine_stats st0, st;
	uint8_t tb[4096], snap[4096];
	struct fid_mr *mr;
	struct tu_world w;
	uint64_t base, key;

	tu_world_open(&w, 2, NULL);
	tu_fill(tb, sizeof(tb), 5);
	memcpy(snap, tb, sizeof(tb));
	ck_assert_int_eq(fi_mr_reg(w.d.domain, tb, sizeof(tb),
				   FI_REMOTE_READ | FI_REMOTE_WRITE, 0, 0x4242,
				   0, &mr, NULL),
			 0);
	key = fi_mr_key(mr);
	base = 0; /* offsets into the region: no FI_MR_VIRT_ADDR */
	tu_engine_stats(w.d.domain, &st0);
	raw_direct(&w, 0, 0, TNBC_RMA_READ, base, key, 0, 0);
	raw_direct(&w, 9, 0, TNBC_RMA_READ, base, key, 9 * 64, 0);
	raw_direct(&w, 2, 1, TNBC_RMA_READ, base, key, 128, 0);
	raw_direct(&w, 2, 0, TNBC_RMA_WRITE, base, key, 128, 0);
	raw_direct(&w, 2, 0, TNBC_RMA_READ, base, key, 128, 4);
	raw_direct(&w, 2, 0, TNBC_RMA_READ, base, key, 100, 0);
	raw_direct(&w, 2, 0, TNBC_RMA_READ, base + 4096 - 64, key, 128, 0);
	raw_direct(&w, 2, 0, TNBC_RMA_READ, base, key + 1, 128, 0);
	/* well formed: answered with the target memory, which the sender,
	 * having asked nothing, drops too */
	raw_direct(&w, 2, 0, TNBC_RMA_READ, base, key, 128, 0);
	for (uint64_t t0 = tu_now_ms(); tu_now_ms() - t0 < 10000;) {
		fi_cq_read(w.ep[R].rx_cq, NULL, 0);
		fi_cq_read(w.ep[A].rx_cq, NULL, 0);
		tu_engine_stats(w.d.domain, &st);
		if (st.stray_pkts - st0.stray_pkts >= 9)
			break;
	}
	ck_assert_uint_eq(st.stray_pkts - st0.stray_pkts, 9);
	ck_assert_uint_eq(st.bad_pkts, st0.bad_pkts);
	ck_assert_mem_eq(tb, snap, sizeof(tb));

	/* both still work */
	round_trip(&w, A, R, 0x81);
	round_trip(&w, R, A, 0x82);
	ck_assert_int_eq(fi_close(&mr->fid), 0);
	tu_world_close(&w);
}
END_TEST

/* A rendezvous request whose data cannot be read fails that receive
 * (and only it); so does one from a sender that does not exist. */
START_TEST(proto_bad_rts)
{
	struct tu_world w;
	struct tnbc_hdr h;
	struct tnbc_rts_iov riov = {.addr = 0x10, .len = 100000};
	uint8_t *r = calloc(1, 100000);
	struct fi_cq_err_entry err;
	struct fi_cq_tagged_entry e;

	tu_world_open(&w, 2, NULL);
	ck_assert_int_eq(fi_trecv(w.ep[R].ep, r, 100000, NULL, FI_ADDR_UNSPEC,
				  0x81, 0, &ctx[1]),
			 0);
	h = eager_hdr(&w, 0x81, 0);
	h.type = TNBC_PKT_RTS;
	h.size = riov.len;
	h.payload_len = sizeof(riov);
	h.msg_id = 0x700000001ULL; /* A has no such send: it drops the ACK */
	raw_send(&w, R, &h, &riov);
	tu_cq_expect_err(w.ep[R].rx_cq, &err);
	ck_assert_ptr_eq(err.op_context, &ctx[1]);
	ck_assert_int_gt(err.err, 0);

	/* a sender nobody can reach */
	ck_assert_int_eq(fi_trecv(w.ep[R].ep, r, 100000, NULL, FI_ADDR_UNSPEC,
				  0x82, 0, &ctx[2]),
			 0);
	h.tag = 0x82;
	h.src.uid = 0x7fffffff;
	raw_send(&w, R, &h, &riov);
	tu_cq_expect_err(w.ep[R].rx_cq, &err);
	ck_assert_ptr_eq(err.op_context, &ctx[2]);
	ck_assert_int_gt(err.err, 0);

	/* both endpoints carry on */
	tu_fill(r, 100000, 8);
	ck_assert_int_eq(fi_trecv(w.ep[A].ep, r + 50000, 50000, NULL,
				  FI_ADDR_UNSPEC, 0x83, 0, &ctx[3]),
			 0);
	ck_assert_int_eq(
		fi_tsend(w.ep[R].ep, r, 50000, NULL, w.addr[A], 0x83, &ctx[4]),
		0);
	tu_cq_expect(w.ep[A].rx_cq, &e, NULL);
	ck_assert_ptr_eq(e.op_context, &ctx[3]);
	tu_cq_expect(w.ep[R].tx_cq, &e, NULL);
	ck_assert_uint_eq(tu_check(r + 50000, 50000, 8, 0), (size_t)-1);
	tu_world_close(&w);
	free(r);
}
END_TEST

/* Opens an enabled endpoint named by service svc (or a fresh name when
 * svc is NULL) with its own CQs, bound to av. */
static int svc_ep_open(struct tu_dom *d, struct fid_av *av, const char *svc,
		       struct tu_ep *e)
{
	struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_TAGGED};
	struct fi_info *info = NULL;
	size_t len = sizeof(e->addr);
	int ret;

	memset(e, 0, sizeof(*e));
	ck_assert_int_eq(tnbc_getinfo(FI_VERSION(1, 17), NULL, svc,
				      svc ? FI_SOURCE : 0, NULL, &info),
			 0);
	ret = fi_endpoint(d->domain, info, &e->ep, NULL);
	fi_freeinfo(info);
	if (ret)
		return ret;
	ck_assert_int_eq(fi_getname(&e->ep->fid, &e->addr, &len), 0);
	e->name = e->addr.name;
	ck_assert_int_eq(fi_cq_open(d->domain, &cq_attr, &e->tx_cq, NULL), 0);
	ck_assert_int_eq(fi_cq_open(d->domain, &cq_attr, &e->rx_cq, NULL), 0);
	ck_assert_int_eq(fi_ep_bind(e->ep, &av->fid, 0), 0);
	ck_assert_int_eq(fi_ep_bind(e->ep, &e->tx_cq->fid, FI_TRANSMIT), 0);
	ck_assert_int_eq(fi_ep_bind(e->ep, &e->rx_cq->fid, FI_RECV), 0);
	ck_assert_int_eq(fi_enable(e->ep), 0);
	return 0;
}

/* Opens e under a service number nobody holds: its TCP port is free now
 * (the default transports bind it too), and one another process takes
 * before us, an outgoing connection's ephemeral port say, is passed by. */
static void svc_ep_open_free(struct tu_dom *d, struct fid_av *av, char *svc,
			     size_t len, struct tu_ep *e)
{
	int ret = -FI_EADDRINUSE;

	for (int tries = 0; ret == -FI_EADDRINUSE && tries < 8; tries++) {
		snprintf(svc, len, "%u", tu_tcp_free_port());
		ret = svc_ep_open(d, av, svc, e);
	}
	ck_assert_int_eq(ret, 0);
}

static void svc_ep_close(struct tu_ep *e)
{
	ck_assert_int_eq(fi_close(&e->ep->fid), 0);
	ck_assert_int_eq(fi_close(&e->tx_cq->fid), 0);
	ck_assert_int_eq(fi_close(&e->rx_cq->fid), 0);
}

/* A service number names one live endpoint at a time. */
START_TEST(proto_svc_in_use)
{
	struct fi_av_attr attr = {.type = FI_AV_TABLE};
	struct tu_dom d;
	struct fid_av *av;
	struct tu_ep s1, s2;
	char svc[16];

	tu_dom_open(&d, NULL);
	ck_assert_int_eq(fi_av_open(d.domain, &attr, &av, NULL), 0);
	svc_ep_open_free(&d, av, svc, sizeof(svc), &s1);
	ck_assert_int_eq(s1.name.kind, TNBC_NAME_SVC);
	ck_assert_int_eq(svc_ep_open(&d, av, svc, &s2), -FI_EADDRINUSE);
	svc_ep_close(&s1);
	/* free again once closed */
	ck_assert_int_eq(svc_ep_open(&d, av, svc, &s2), 0);
	svc_ep_close(&s2);
	ck_assert_int_eq(fi_close(&av->fid), 0);
	tu_dom_close(&d);
}
END_TEST

/*
 * A service endpoint that closes and opens again under the same service
 * number (a restarted server) must be reachable by a client that
 * already talked to the old one, at least once the client removed the
 * old address and inserted the service again.
 */
START_TEST(proto_svc_reopen)
{
	struct fi_av_attr attr = {.type = FI_AV_TABLE};
	struct tu_dom d;
	struct fid_av *av;
	struct tu_ep srv, cli;
	fi_addr_t to_srv;
	char svc[16], r[8];
	struct fi_cq_tagged_entry e;

	tu_dom_open(&d, NULL);
	ck_assert_int_eq(fi_av_open(d.domain, &attr, &av, NULL), 0);
	svc_ep_open_free(&d, av, svc, sizeof(svc), &srv);
	ck_assert_int_eq(svc_ep_open(&d, av, NULL, &cli), 0);
	ck_assert_int_eq(fi_av_insertsvc(av, NULL, svc, &to_srv, 0, NULL), 1);

	ck_assert_int_eq(fi_trecv(srv.ep, r, sizeof(r), NULL, FI_ADDR_UNSPEC, 1,
				  0, &ctx[0]),
			 0);
	ck_assert_int_eq(fi_tsend(cli.ep, "first", 6, NULL, to_srv, 1, &ctx[1]),
			 0);
	tu_cq_expect(srv.rx_cq, &e, NULL);
	ck_assert_str_eq(r, "first");
	tu_cq_expect(cli.tx_cq, &e, NULL);

	/* the server restarts */
	svc_ep_close(&srv);
	ck_assert_int_eq(svc_ep_open(&d, av, svc, &srv), 0);
	ck_assert_int_eq(fi_av_remove(av, &to_srv, 1, 0), 0);
	ck_assert_int_eq(fi_av_insertsvc(av, NULL, svc, &to_srv, 0, NULL), 1);

	memset(r, 0, sizeof(r));
	ck_assert_int_eq(fi_trecv(srv.ep, r, sizeof(r), NULL, FI_ADDR_UNSPEC, 2,
				  0, &ctx[2]),
			 0);
	ck_assert_int_eq(
		fi_tsend(cli.ep, "second", 7, NULL, to_srv, 2, &ctx[3]), 0);
	ck_assert_msg(tu_cq_wait(srv.rx_cq, &e, NULL, NULL, 2000) == 1,
		      "the restarted service endpoint never received the "
		      "client's message");
	ck_assert_str_eq(r, "second");
	tu_cq_expect(cli.tx_cq, &e, NULL);
	svc_ep_close(&srv);
	svc_ep_close(&cli);
	ck_assert_int_eq(fi_close(&av->fid), 0);
	tu_dom_close(&d);
}
END_TEST

/* An endpoint with FI_WAIT_FD CQs in its own domain, whose AV holds the
 * peer's name at address 0. */
struct xdom_side {
	struct fid_domain *domain;
	struct fid_av *av;
	struct tu_ep e;
	int rx_fd, tx_fd;
	fi_addr_t peer;
};

static void xdom_open(struct tu_dom *d, struct xdom_side *x)
{
	struct fi_cq_attr cq_attr = {.format = FI_CQ_FORMAT_TAGGED,
				     .wait_obj = FI_WAIT_FD};
	struct fi_av_attr av_attr = {.type = FI_AV_TABLE};
	size_t len = sizeof(x->e.addr);

	memset(x, 0, sizeof(*x));
	ck_assert_int_eq(fi_domain(d->fabric, d->info, &x->domain, NULL), 0);
	ck_assert_int_eq(fi_av_open(x->domain, &av_attr, &x->av, NULL), 0);
	ck_assert_int_eq(fi_endpoint(x->domain, d->info, &x->e.ep, NULL), 0);
	ck_assert_int_eq(fi_getname(&x->e.ep->fid, &x->e.addr, &len), 0);
	x->e.name = x->e.addr.name;
	ck_assert_int_eq(fi_cq_open(x->domain, &cq_attr, &x->e.tx_cq, NULL), 0);
	ck_assert_int_eq(fi_cq_open(x->domain, &cq_attr, &x->e.rx_cq, NULL), 0);
	ck_assert_int_eq(fi_ep_bind(x->e.ep, &x->av->fid, 0), 0);
	ck_assert_int_eq(fi_ep_bind(x->e.ep, &x->e.tx_cq->fid, FI_TRANSMIT), 0);
	ck_assert_int_eq(fi_ep_bind(x->e.ep, &x->e.rx_cq->fid, FI_RECV), 0);
	ck_assert_int_eq(fi_enable(x->e.ep), 0);
	ck_assert_int_eq(fi_control(&x->e.rx_cq->fid, FI_GETWAIT, &x->rx_fd),
			 0);
	ck_assert_int_eq(fi_control(&x->e.tx_cq->fid, FI_GETWAIT, &x->tx_fd),
			 0);
}

static void xdom_close(struct xdom_side *x)
{
	svc_ep_close(&x->e);
	ck_assert_int_eq(fi_close(&x->av->fid), 0);
	ck_assert_int_eq(fi_close(&x->domain->fid), 0);
}

/* Blocks in poll(2) alone, with no provider call, until fd is readable;
 * then reads the one completion. */
static void xdom_wait(struct fid_cq *cq, int fd, void *ctx_want,
		      const char *what, int iter)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	struct fi_cq_tagged_entry e;
	int r = poll(&p, 1, 3000);

	ck_assert_msg(r == 1, "iteration %d: %s: no wakeup in 3 s", iter, what);
	ck_assert_int_eq(fi_cq_read(cq, &e, 1), 1);
	ck_assert_ptr_eq(e.op_context, ctx_want);
}

/* The first len bytes of /dev/shm<path>, mapped read-only. */
static void *shm_map_ro(const char *path, size_t len)
{
	void *p;
	int fd = shm_open(path, O_RDONLY, 0);

	ck_assert_msg(fd >= 0, "shm_open %s", path);
	p = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	ck_assert(p != MAP_FAILED);
	return p;
}

/* The header of the queue of the endpoint named n, mapped read-only
 * (munmap sizeof(*r) when done); its name goes to path. */
static struct tnbc_shm_region *region_map(const struct tnbc_name *n,
					  char path[TNBC_SHM_NAME_MAX])
{
	snprintf(path, TNBC_SHM_NAME_MAX, "/tnbc-%u-%u-%016llx", n->pid, n->uid,
		 (unsigned long long)n->nonce);
	return shm_map_ro(path, sizeof(struct tnbc_shm_region));
}

/* The doorbell of the domain that owns the endpoint named n, mapped the
 * way a peer maps it. */
static struct tnbc_shm_bell *bell_map(const struct tnbc_name *n)
{
	char path[TNBC_SHM_NAME_MAX];
	struct tnbc_shm_region *r = region_map(n, path);

	memcpy(path, r->bell_name, sizeof(path));
	path[sizeof(path) - 1] = '\0';
	munmap(r, sizeof(*r));
	return shm_map_ro(path, sizeof(struct tnbc_shm_bell));
}

/* Watches the bell, with no provider call, for up to ms until its
 * engine's state (sleeping) or its count of endpoints with receives
 * posted reads want; false if it never did. */
static bool bell_reads(struct tnbc_shm_bell *b, bool sleeping, unsigned want,
		       unsigned ms)
{
	uint64_t deadline = tu_now_ms() + ms;
	bool hit;

	TU_WATCH_BEGIN();
	while (!(hit = (sleeping ? atomic_load(&b->sleeping)
				 : (unsigned)atomic_load(&b->rx_posted)) ==
		       want) &&
	       tu_now_ms() < deadline)
		tu_sleep_ms(1);
	TU_WATCH_END();
	return hit;
}

static bool bell_posted_is(struct tnbc_shm_bell *b, unsigned want, unsigned ms)
{
	return bell_reads(b, false, want, ms);
}

/* Sends sbuf from A to R with tag; its receive completes with rx_ctx. */
static void settle_send(struct tu_world *w, char *sbuf, uint64_t tag,
			void *rx_ctx)
{
	struct fi_cq_tagged_entry e;

	ck_assert_int_eq(
		fi_tsend(w->ep[A].ep, sbuf, 8, NULL, w->addr[R], tag, &ctx[1]),
		0);
	tu_cq_expect(w->ep[R].rx_cq, &e, NULL);
	ck_assert_ptr_eq(e.op_context, rx_ctx);
	tu_cq_expect(w->ep[A].tx_cq, &e, NULL);
	ck_assert_ptr_eq(e.op_context, &ctx[1]);
}

/* Resident kB of every mapping of /dev/shm<path> in this process, in
 * out[] (at most max); returns how many there are. */
static int shm_rss_kb(const char *path, long *out, int max)
{
	char line[512], want[128];
	FILE *f = fopen("/proc/self/smaps", "r");
	bool in = false;
	int n = 0;

	ck_assert(f != NULL);
	snprintf(want, sizeof(want), "/dev/shm%s", path);
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi;
		long kb;

		/* a mapping starts "lo-hi perms offset dev inode path" */
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) {
			char *nl = strchr(line, '\n');

			if (nl)
				*nl = '\0';
			in = strlen(line) >= strlen(want) &&
			     !strcmp(line + strlen(line) - strlen(want), want);
		} else if (in && sscanf(line, "Rss: %ld kB", &kb) == 1 &&
			   n < max) {
			out[n++] = kb;
			in = false;
		}
	}
	fclose(f);
	return n;
}

/*
 * A queue is faulted in, by its owner and by each sender that maps it,
 * before the first message: otherwise every 64th small message of the
 * ring's first lap took a page fault on each side, which made a short
 * run twice as slow per message as the ones after it.
 */
START_TEST(proto_ring_prefaulted)
{
	struct tu_world w;
	struct tnbc_shm_region *r;
	char path[TNBC_SHM_NAME_MAX], sbuf[8] = "fault", rbuf[8];
	long rss[4];
	size_t kb;
	int maps;

	tu_world_open(&w, 2, NULL);
	ck_assert_int_eq(fi_trecv(w.ep[R].ep, rbuf, sizeof(rbuf), NULL,
				  FI_ADDR_UNSPEC, 3, 0, &ctx[0]),
			 0);
	settle_send(&w, sbuf, 3, &ctx[0]);

	r = region_map(&w.ep[R].name, path);
	kb = (sizeof(*r) + (size_t)r->nslots * TNBC_SHM_CELL) / 1024;
	munmap(r, sizeof(*r));

	/* the owner's mapping and the sender's (both in this process) */
	maps = shm_rss_kb(path, rss, 4);
	ck_assert_int_eq(maps, 2);
	for (int i = 0; i < maps; i++)
		ck_assert_msg((size_t)rss[i] >= kb,
			      "mapping %d of %s: %ld of %zu kB resident", i,
			      path, rss[i], kb);
	tu_world_close(&w);
}
END_TEST

/* Engine wake-ups counted in dom over ms, with no provider call but the
 * counter read (which is not a poll). */
static uint64_t wakeups_over(struct fid_domain *dom, unsigned ms)
{
	struct fi_tnbc_engine_stats a, b;

	tu_engine_stats(dom, &a);
	tu_sleep_ms(ms);
	tu_engine_stats(dom, &b);
	return b.engine_wakeups - a.engine_wakeups;
}

/*
 * With its application away, an engine that had work lately sleeps in
 * bounded steps, which need no barrier (a packet its sender published
 * unseen as the engine went to sleep waits for the end of the step), and
 * once it has had nothing to do for a second it sleeps for good: an idle
 * process uses no CPU.
 */
START_TEST(proto_idle_engine_sleeps_for_good)
{
	struct tu_world w;
	char sbuf[8] = "idle", rbuf[8];
	uint64_t deadline, n = 1;

	tu_world_open(&w, 2, NULL);
	ck_assert_int_eq(fi_trecv(w.ep[R].ep, rbuf, sizeof(rbuf), NULL,
				  FI_ADDR_UNSPEC, 5, 0, &ctx[0]),
			 0);
	settle_send(&w, sbuf, 5, &ctx[0]);

	/* lately busy: once its naps beside the polling test thread are
	 * over (3.2 ms at most), its sleeps end on their own (10 ms) */
	tu_sleep_ms(50);
	ck_assert_uint_gt(wakeups_over(w.d.domain, 300), 0);
	/* then idle: no wake-up at all for a while */
	deadline = tu_now_ms() + 10000;
	while (n && tu_now_ms() < deadline)
		n = wakeups_over(w.d.domain, 300);
	ck_assert_msg(n == 0, "an idle engine still wakes up after 10 s");
	tu_world_close(&w);
}
END_TEST

/* The engine of _i's transport: 0 shm's doorbell, 1 tcp's eventfd. */
static const struct tnbc_xport_ops *nudge_xport(int i)
{
	return i ? &tnbc_tcp_ops : &tnbc_shm_ops;
}

/* Whether the engine is inside a nap it committed to: napping is set
 * when a nap is prepared, before the engine may still call it off
 * (a kick pending, work found), and only a committed one counts in
 * sleeps; one that ended has counted in wakeups before the next one
 * sets napping.  *sleeps: the count seen. */
static bool nap_committed(struct tnbc_engine *e, uint64_t *sleeps)
{
	uint64_t s = atomic_load(&e->sleeps), w = atomic_load(&e->wakeups);
	bool napping = atomic_load(&e->napping);

	*sleeps = s;
	return napping && atomic_load(&e->sleeps) == s &&
	       atomic_load(&e->wakeups) == w && s == w + 1;
}

/* Polls cq until the engine begins a nap beside the polls; returns a
 * time before the nap began (ms).  A slow open (a loaded machine, a
 * sanitizer) can leave the engine idle for a second before the polls
 * begin: asleep without a bound, where polls do not reach it.  Woken,
 * it sees them and naps. */
static uint64_t nap_fresh(struct tnbc_domain *dom, struct fid_cq *cq)
{
	struct tnbc_engine *e = &dom->engine;
	struct fi_cq_tagged_entry ce;
	uint64_t sleeps = atomic_load(&e->sleeps),
		 end = tu_now_ms() + TU_WAIT_MS;
	uint64_t look = tu_now_ms(), moved = look;

	for (;;) {
		uint64_t prev = look, now_sleeps;
		bool in_nap;

		ck_assert_int_eq(fi_cq_read(cq, &ce, 1), -FI_EAGAIN);
		look = tu_now_ms();
		ck_assert_msg(look < end,
			      "the engine never napped beside a polling "
			      "thread");
		in_nap = nap_committed(e, &now_sleeps);
		if (now_sleeps != sleeps) {
			if (in_nap)
				return prev; /* begun after the last look */
			sleeps = now_sleeps;
			moved = look;
		} else if (look - moved > 50 && !atomic_load(&e->napping)) {
			tnbc_engine_kick(dom);
			moved = look;
		}
	}
}

/*
 * Work that a polling application thread queues for itself (the data a
 * CTS it took releases, a control packet) does not wake the engine
 * napping beside it: that thread sends it in the same call, and a
 * wake-up would only take its core (tnbc_engine_nudge).  With a window
 * of a second the engine's naps last a second at least, and nothing
 * else here wakes it: what is done within 900 ms of a nap's start finds
 * it napping, whatever the scheduler does meanwhile.  Else almost: once
 * in a ThreadSanitizer run the engine was up at the second nudge of a
 * nap, which then kicks as it must; a few such are let pass.  First nudges
 * alone, then a rendezvous message between the domain's two endpoints,
 * whose CTS and data the polling thread moves (tnbc_tx_enqueue).
 */
START_TEST(proto_nudge_spares_nap)
{
	enum { SAMPLES = 200, SPURIOUS = 3, LEN = 1 << 20 };
	size_t window_us = tnbc_env.app_window_us;
	struct tu_xport_only o;
	struct tu_world w;
	struct tnbc_domain *dom;
	struct tnbc_engine *e;
	struct fi_cq_tagged_entry ce;
	uint8_t *sbuf = malloc(LEN), *rbuf = malloc(LEN);
	uint64_t end, start, k0;
	unsigned kept = 0, woken = 0;
	bool moved = false;

	ck_assert(sbuf && rbuf);
	tu_fill(sbuf, LEN, 9);
	tnbc_env.app_window_us = 1000000;
	tu_xport_only_begin(&o, nudge_xport(_i));
	tu_world_open(&w, 2, NULL);
	dom = tu_tnbc_domain(&w.d);
	e = &dom->engine;
	tu_still_works(&w, R, A, 1); /* connected */
	for (end = tu_now_ms() + 3 * TU_WAIT_MS;
	     kept < SAMPLES && tu_now_ms() < end;) {
		start = nap_fresh(dom, w.ep[R].rx_cq);
		while (kept < SAMPLES) {
			uint64_t k1, s0;

			ck_assert_int_eq(fi_cq_read(w.ep[R].rx_cq, &ce, 1),
					 -FI_EAGAIN);
			if (!nap_committed(e, &s0))
				break; /* over already: a fresh one */
			k0 = atomic_load(&e->kicks);
			tnbc_engine_nudge(dom);
			k1 = atomic_load(&e->kicks);
			if (tu_now_ms() - start >= 900)
				break; /* the nap may end on its own */
			if (k1 != k0) {
				woken++;
				break; /* a fresh nap, then go on */
			}
			kept++;
		}
		/* a nudge may still find the nap ended between the look
		 * and the nudge (a late packet of the connection rang),
		 * and then kicks, rightly: a few may; a nudge blind to
		 * the nap kicks in every one */
		ck_assert_msg(woken <= SPURIOUS,
			      "a nudge from a polling thread woke the engine "
			      "in its nap %u times (after %u samples)",
			      woken, kept);
	}
	for (int tries = 0; !moved && tries < 5; tries++) {
		int got = 0;

		memset(rbuf, 0, LEN);
		start = nap_fresh(dom, w.ep[R].rx_cq);
		k0 = atomic_load(&e->kicks);
		ck_assert_int_eq(fi_trecv(w.ep[R].ep, rbuf, LEN, NULL,
					  FI_ADDR_UNSPEC, 2, 0, rbuf),
				 0);
		ck_assert_int_eq(fi_tsend(w.ep[A].ep, sbuf, LEN, NULL,
					  w.addr[R], 2, sbuf),
				 0);
		for (end = tu_now_ms() + TU_WAIT_MS;
		     got < 2 && tu_now_ms() < end;)
			got += (fi_cq_read(w.ep[R].rx_cq, &ce, 1) == 1) +
			       (fi_cq_read(w.ep[A].tx_cq, &ce, 1) == 1);
		ck_assert_int_eq(got, 2);
		ck_assert_uint_eq(tu_check(rbuf, LEN, 9, 0), (size_t)-1);
		if (tu_now_ms() - start >= 900)
			continue; /* the nap may have ended on its own */
		ck_assert_msg(atomic_load(&e->kicks) == k0,
			      "a rendezvous message the polling thread moved "
			      "woke the engine in its nap %" PRIu64 " times",
			      atomic_load(&e->kicks) - k0);
		moved = true;
	}
	tu_world_close(&w);
	tu_xport_only_end(&o);
	/* after the close: the engine reads it as each nap begins */
	tnbc_env.app_window_us = window_us;
	free(sbuf);
	free(rbuf);
	ck_assert_msg(kept == SAMPLES,
		      "the engine napped beside a polling thread in %u "
		      "samples of %d",
		      kept, SAMPLES);
	ck_assert_msg(moved, "no rendezvous message fitted in a nap");
}
END_TEST

static bool nudge_woken(struct tnbc_engine *e, uint64_t wakeups)
{
	for (uint64_t end = tu_now_ms() + TU_WAIT_MS;
	     atomic_load(&e->wakeups) == wakeups && tu_now_ms() < end;)
		tu_sleep_ms(1);
	return atomic_load(&e->wakeups) != wakeups;
}

/*
 * An engine asleep because the application looks away is woken by a
 * nudge, and by one written kick however many threads ask before it
 * runs again (it may wait for a CPU for milliseconds, a batch thread
 * beside polling ones: each ask had been a system call).  Here it is
 * kept from sleeping again by holding the endpoints' lock, which its
 * first pass takes; once let go, it sleeps again and the next nudge
 * writes a kick anew.
 */
START_TEST(proto_kick_once_per_sleep)
{
	enum { ASKS = 100 };
	struct tu_xport_only o;
	struct tu_world w;
	struct tnbc_domain *dom;
	struct tnbc_engine *e;
	uint64_t k0, w0, k1;
	bool woken;

	tu_xport_only_begin(&o, nudge_xport(_i));
	tu_world_open(&w, 1, NULL);
	dom = tu_tnbc_domain(&w.d);
	e = &dom->engine;
	tu_engine_until_asleep(e);
	pthread_rwlock_wrlock(&dom->ep_lock);
	k0 = atomic_load(&e->kicks);
	w0 = atomic_load(&e->wakeups);
	for (int i = 0; i < ASKS; i++)
		tnbc_engine_nudge(dom);
	woken = nudge_woken(e, w0);
	k1 = atomic_load(&e->kicks);
	pthread_rwlock_unlock(&dom->ep_lock);
	ck_assert_msg(woken, "a nudge did not wake the sleeping engine");
	ck_assert_msg(k1 - k0 == 1,
		      "%" PRIu64 " kicks written for %d asks in one sleep",
		      k1 - k0, ASKS);

	tu_engine_until_asleep(e);
	w0 = atomic_load(&e->wakeups);
	tnbc_engine_nudge(dom);
	ck_assert_msg(nudge_woken(e, w0),
		      "a nudge in the next sleep did not wake the engine");
	ck_assert_uint_eq(atomic_load(&e->kicks), k1 + 1);
	tu_world_close(&w);
	tu_xport_only_end(&o);
}
END_TEST

/*
 * What senders read to decide whether an eager message must wake the
 * engine: the endpoint is counted from its first posted receive on, and
 * the engine takes the count back before it sleeps once no receive is
 * left (cancelled or matched), so that messages to an application that
 * computes wait in the queue, and are there for its next receive.
 */
START_TEST(proto_rx_posted_settles)
{
	struct tu_world w;
	struct tnbc_shm_bell *b;
	struct fi_cq_tagged_entry e;
	struct fi_cq_err_entry err;
	char sbuf[8] = "settle", rbuf[8];

	tu_world_open(&w, 2, NULL);
	b = bell_map(&w.ep[R].name);
	ck_assert_int_eq(atomic_load(&b->rx_posted), 0);

	/* counted at once: a sender that reads it next must ring */
	ck_assert_int_eq(fi_trecv(w.ep[R].ep, rbuf, sizeof(rbuf), NULL,
				  FI_ADDR_UNSPEC, 1, 0, &ctx[0]),
			 0);
	ck_assert_int_eq(atomic_load(&b->rx_posted), 1);
	settle_send(&w, sbuf, 1, &ctx[0]);
	ck_assert_msg(bell_posted_is(b, 0, TU_WAIT_MS),
		      "the engine left the endpoint counted with no receive "
		      "posted: %d",
		      atomic_load(&b->rx_posted));

	/* once per endpoint, however many receives */
	for (int i = 0; i < 2; i++)
		ck_assert_int_eq(fi_trecv(w.ep[R].ep, rbuf, sizeof(rbuf), NULL,
					  FI_ADDR_UNSPEC, 2 + (uint64_t)i, 0,
					  &ctx[2 + i]),
				 0);
	ck_assert_int_eq(atomic_load(&b->rx_posted), 1);
	settle_send(&w, sbuf, 2, &ctx[2]);
	/* the receive still posted keeps it */
	ck_assert(!bell_posted_is(b, 0, TU_QUIET_MS));
	ck_assert_int_eq(atomic_load(&b->rx_posted), 1);

	ck_assert_int_eq(fi_cancel(&w.ep[R].ep->fid, &ctx[3]), 0);
	tu_cq_expect_err(w.ep[R].rx_cq, &err);
	ck_assert_int_eq(err.err, FI_ECANCELED);
	/* a message for a receive not posted yet */
	ck_assert_int_eq(fi_tsend(w.ep[A].ep, sbuf, sizeof(sbuf), NULL,
				  w.addr[R], 4, &ctx[1]),
			 0);
	tu_cq_expect(w.ep[A].tx_cq, &e, NULL);
	ck_assert_msg(bell_posted_is(b, 0, TU_WAIT_MS),
		      "still counted after the last receive was cancelled");
	memset(rbuf, 0, sizeof(rbuf));
	ck_assert_int_eq(fi_trecv(w.ep[R].ep, rbuf, sizeof(rbuf), NULL,
				  FI_ADDR_UNSPEC, 4, 0, &ctx[4]),
			 0);
	tu_cq_expect(w.ep[R].rx_cq, &e, NULL);
	ck_assert_ptr_eq(e.op_context, &ctx[4]);
	ck_assert_str_eq(rbuf, sbuf);
	munmap(b, sizeof(*b));
	tu_world_close(&w);
}
END_TEST

/* Waits, with no provider call, until the bell's engine sleeps with
 * no timeout. */
static void bell_wait_asleep(struct tnbc_shm_bell *b)
{
	ck_assert_msg(bell_reads(b, true, TNBC_SHM_ASLEEP, TU_WAIT_MS),
		      "the engine never fell asleep");
}

/*
 * Eager messages that came while no receive was posted and the engine
 * slept stay in the queue, and their sender rang for none of them.
 * Receives then posted for them, with no other call, must still get
 * them, every one: nothing else will wake the engine.  The test watches
 * the receive buffers, with no provider call.
 */
START_TEST(proto_posted_burst_no_calls)
{
	enum { N = 3, LEN = 100 };
	struct tu_world w;
	struct tnbc_shm_bell *b;
	uint8_t sbuf[N][LEN], rbuf[N][LEN];
	struct fi_cq_tagged_entry e;
	uint64_t deadline;
	int filled = 0;

	tu_world_open(&w, 2, NULL);
	b = bell_map(&w.ep[R].name);
	memset(rbuf, 0, sizeof(rbuf));
	for (int i = 0; i < N; i++) {
		tu_fill(sbuf[i], LEN, 300 + (uint32_t)i);
		ck_assert_int_eq(fi_tsend(w.ep[A].ep, sbuf[i], LEN, NULL,
					  w.addr[R], 40 + (uint64_t)i, &ctx[4]),
				 0);
		tu_cq_expect(w.ep[A].tx_cq, &e, NULL);
	}
	bell_wait_asleep(b);
	for (int i = 0; i < N; i++)
		ck_assert_int_eq(fi_trecv(w.ep[R].ep, rbuf[i], LEN, NULL,
					  FI_ADDR_UNSPEC, 40 + (uint64_t)i, 0,
					  &ctx[i]),
				 0);
	deadline = tu_now_ms() + TU_WAIT_MS;
	TU_WATCH_BEGIN();
	while (filled != N && tu_now_ms() < deadline) {
		filled = 0;
		for (int i = 0; i < N; i++)
			filled += !memcmp(rbuf[i], sbuf[i], LEN);
		if (filled != N)
			tu_sleep_ms(1);
	}
	TU_WATCH_END();
	ck_assert_msg(filled == N,
		      "%d of %d messages delivered without further calls",
		      filled, N);
	for (int i = 0; i < N; i++) {
		tu_cq_expect(w.ep[R].rx_cq, &e, NULL);
		ck_assert_ptr_eq(e.op_context, &ctx[i]);
		ck_assert_uint_eq(e.len, LEN);
	}
	munmap(b, sizeof(*b));
	tu_world_close(&w);
}
END_TEST

/*
 * Two domains, so two engines and two doorbells, as between processes.
 * Each side posts and then only sleeps in poll(2) on its CQ fds: every
 * packet must wake the peer domain's sleeping engine (a lost wakeup
 * hangs the transfer).  Eager and rendezvous, both directions.
 */
START_TEST(proto_cross_domain_wakeup)
{
	enum { ITERS = 120 };
	struct tu_dom d;
	struct xdom_side a, b;
	uint8_t *sa = malloc(RNDV_LEN_P), *sb = malloc(RNDV_LEN_P);
	uint8_t *ra = malloc(RNDV_LEN_P), *rb = malloc(RNDV_LEN_P);
	struct fi_tnbc_engine_stats st;

	tu_dom_open(&d, NULL);
	xdom_open(&d, &a);
	xdom_open(&d, &b);
	ck_assert_int_eq(fi_av_insert(a.av, &b.e.addr, 1, &a.peer, 0, NULL), 1);
	ck_assert_int_eq(fi_av_insert(b.av, &a.e.addr, 1, &b.peer, 0, NULL), 1);

	for (int i = 0; i < ITERS; i++) {
		size_t len = (i % 8 == 7) ? RNDV_LEN_P : 64;

		tu_fill(sa, len, (uint32_t)i);
		tu_fill(sb, len, (uint32_t)i + 1000);
		/* let both engines fall asleep for good */
		tu_sleep_ms(1);
		ck_assert_int_eq(fi_trecv(b.e.ep, rb, len, NULL, FI_ADDR_UNSPEC,
					  (uint64_t)i, 0, &ctx[0]),
				 0);
		ck_assert_int_eq(fi_tsend(a.e.ep, sa, len, NULL, a.peer,
					  (uint64_t)i, &ctx[1]),
				 0);
		xdom_wait(b.e.rx_cq, b.rx_fd, &ctx[0], "a->b receive", i);
		xdom_wait(a.e.tx_cq, a.tx_fd, &ctx[1], "a->b send", i);
		ck_assert_uint_eq(tu_check(rb, len, (uint32_t)i, 0),
				  (size_t)-1);

		tu_sleep_ms(1);
		ck_assert_int_eq(fi_trecv(a.e.ep, ra, len, NULL, FI_ADDR_UNSPEC,
					  (uint64_t)i, 0, &ctx[2]),
				 0);
		ck_assert_int_eq(fi_tsend(b.e.ep, sb, len, NULL, b.peer,
					  (uint64_t)i, &ctx[3]),
				 0);
		xdom_wait(a.e.rx_cq, a.rx_fd, &ctx[2], "b->a receive", i);
		xdom_wait(b.e.tx_cq, b.tx_fd, &ctx[3], "b->a send", i);
		ck_assert_uint_eq(tu_check(ra, len, (uint32_t)i + 1000, 0),
				  (size_t)-1);
	}
	/* the engines did sleep, so the doorbell was really exercised */
	tu_engine_stats(b.domain, &st);
	ck_assert_uint_gt(st.engine_sleeps, 0);
	ck_assert_uint_gt(st.engine_wakeups, 0);
	xdom_close(&a);
	xdom_close(&b);
	tu_dom_close(&d);
	free(sa);
	free(sb);
	free(ra);
	free(rb);
}
END_TEST

/*
 * A domain with two transports: shm, the one its engine sleeps on, and
 * the loopback.  A peer whose name says only the loopback reaches it
 * gets its messages through the loopback, eager and rendezvous (a read
 * of the sender's buffer, and the answer back the way the request
 * came), and the receiver's engine, asleep on shm's doorbell, is woken
 * by the loopback's kick: the test thread calls nothing of the receiver
 * and watches its buffer.
 */
START_TEST(proto_two_transports)
{
	const struct tnbc_xport_ops *old_list[TNBC_XPORTS_MAX];
	unsigned old_n = tnbc_env.nxport;
	uint8_t *sb = malloc(RNDV_LEN_P), *rb = malloc(RNDV_LEN_P);
	struct fi_cq_tagged_entry e;
	struct tnbc_addr via_loop;
	struct tu_world w;
	fi_addr_t to;

	memcpy(old_list, tnbc_env.xport_list, sizeof(old_list));
	tnbc_env.xport_list[0] = &tnbc_shm_ops;
	tnbc_env.xport_list[1] = &tnbc_loop_ops;
	tnbc_env.nxport = 2;
	tu_world_open(&w, 2, NULL);
	ck_assert_uint_eq(w.ep[R].name.xports,
			  TNBC_XPORT_BIT(TNBC_XPORT_SHM) |
				  TNBC_XPORT_BIT(TNBC_XPORT_LOOP));
	via_loop = w.ep[R].addr;
	via_loop.name.xports = TNBC_XPORT_BIT(TNBC_XPORT_LOOP);
	ck_assert_int_eq(fi_av_insert(w.av, &via_loop, 1, &to, 0, NULL), 1);
	for (uint32_t k = 0; k < 2; k++) {
		size_t len = k ? RNDV_LEN_P : 64;
		bool got;
		uint64_t t0;

		tu_fill(sb, len, 40 + k);
		memset(rb, 0, len);
		ck_assert_int_eq(fi_trecv(w.ep[R].ep, rb, len, NULL,
					  FI_ADDR_UNSPEC, 70 + k, 0, &ctx[0]),
				 0);
		if (!k) {
			struct fi_tnbc_engine_stats st;

			/* past TNBC_IDLE_NS with nothing to do, the engine
			 * sleeps with no bound: only a wake-up ends it */
			tu_sleep_ms(1500);
			tu_engine_stats(w.d.domain, &st);
			ck_assert_uint_gt(st.engine_sleeps, st.engine_wakeups);
		}
		ck_assert_int_eq(fi_tsend(w.ep[A].ep, sb, len, NULL, to, 70 + k,
					  &ctx[1]),
				 0);
		TU_WATCH_BEGIN();
		for (t0 = tu_now_ms();
		     !(got = tu_check(rb, len, 40 + k, 0) == (size_t)-1) &&
		     tu_now_ms() - t0 < 10000;
		     sched_yield())
			;
		TU_WATCH_END();
		ck_assert_msg(got,
			      "%zu B through the loopback: not delivered in "
			      "10 s",
			      len);
		tu_cq_expect(w.ep[R].rx_cq, &e, NULL);
		ck_assert_ptr_eq(e.op_context, &ctx[0]);
		ck_assert_uint_eq(e.len, len);
		ck_assert_uint_eq(tu_check(rb, len, 40 + k, 0), (size_t)-1);
		tu_cq_expect(w.ep[A].tx_cq, &e, NULL);
		ck_assert_ptr_eq(e.op_context, &ctx[1]);
	}
	/* a name no transport of the domain reaches */
	via_loop.name.xports = TNBC_XPORT_BIT(TNBC_XPORT_ID_MAX);
	ck_assert_int_eq(fi_av_insert(w.av, &via_loop, 1, &to, 0, NULL), 0);
	tu_world_close(&w);
	memcpy(tnbc_env.xport_list, old_list, sizeof(old_list));
	tnbc_env.nxport = old_n;
	free(sb);
	free(rb);
}
END_TEST

/* Engine threads of this process: threads named tnbc-engine in
 * /proc/self/task. */
static int engine_threads(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *de;
	int n = 0;

	ck_assert_ptr_nonnull(d);
	while ((de = readdir(d))) {
		char path[300], name[32] = "";
		FILE *f;

		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm",
			 de->d_name);
		f = fopen(path, "r");
		if (!f)
			continue; /* a thread that just ended */
		if (fgets(name, sizeof(name), f) &&
		    !strcmp(name, "tnbc-engine\n"))
			n++;
		fclose(f);
	}
	closedir(d);
	return n;
}

/*
 * One engine thread serves every domain of a process (an MPI's
 * point-to-point domain and the MPI glue's): three domains, one thread
 * named tnbc-engine, the same engine in each, and a message into the
 * second domain completes while nobody calls into it (the engine woke on
 * that domain's doorbell, and moved it).  With FI_TNBC_ENGINE_SHARED off
 * the second domain brings a thread of its own again, which shows what
 * the count measures.  Loop 0: shared (the default); 1: not.
 */
START_TEST(proto_one_engine)
{
	bool shared = _i == 0;
	int saved = tnbc_env.engine_shared, t0, t2;
	struct tu_dom d;
	struct xdom_side a, b;
	struct tnbc_domain *ta, *tb;
	struct fi_tnbc_engine_stats st;
	char s[64] = "one engine", r[64] = "";
	volatile char *vr = r;
	uint64_t end;
	bool landed;

	tnbc_env.engine_shared = shared;
	t0 = engine_threads();
	tu_dom_open(&d, NULL);
	xdom_open(&d, &a);
	xdom_open(&d, &b);
	t2 = engine_threads();
	ta = tnbc_container_of(a.domain, struct tnbc_domain, domain_fid);
	tb = tnbc_container_of(b.domain, struct tnbc_domain, domain_fid);
	/* three domains (tu_dom_open's, a's and b's): one engine thread,
	 * or three */
	ck_assert_int_eq(t0, 0);
	tu_engine_stats(b.domain, &st);
	ck_assert_uint_eq(st.engine_domains, shared ? 3 : 1);
	if (shared) {
		ck_assert_int_eq(t2, 1);
		ck_assert(ta->engine.shared && tb->engine.shared);
		ck_assert_uint_eq(atomic_load(&ta->engine.self),
				  atomic_load(&tb->engine.self));
	} else {
		ck_assert_int_eq(t2, 3);
		ck_assert_uint_ne(atomic_load(&ta->engine.self),
				  atomic_load(&tb->engine.self));
	}
	ck_assert_int_eq(fi_av_insert(a.av, &b.e.addr, 1, &a.peer, 0, NULL), 1);
	/* both engines asleep for good, then a message into b, which no
	 * call of this thread touches until it has landed */
	tu_sleep_ms(20);
	tu_engine_stats(b.domain, &st);
	uint64_t before = st.engine_pkts;
	ck_assert_int_eq(fi_trecv(b.e.ep, r, sizeof(r), NULL, FI_ADDR_UNSPEC, 7,
				  0, &ctx[0]),
			 0);
	ck_assert_int_eq(
		fi_tsend(a.e.ep, s, sizeof(s), NULL, a.peer, 7, &ctx[1]), 0);
	TU_WATCH_BEGIN();
	for (end = tu_now_ms() + TU_WAIT_MS;
	     memcmp((const char *)vr, s, sizeof(s)) && tu_now_ms() < end;)
		tu_sleep_ms(1);
	landed = !memcmp((const char *)vr, s, sizeof(s));
	TU_WATCH_END();
	ck_assert_msg(landed, "the message did not land without calls");
	/* the engine counts a pass's packets after it lets the endpoint go,
	 * so the count may trail the data it moved by a preemption */
	for (end = tu_now_ms() + TU_WAIT_MS;; tu_sleep_ms(1)) {
		tu_engine_stats(b.domain, &st);
		if (st.engine_pkts > before || tu_now_ms() >= end)
			break;
	}
	ck_assert_uint_gt(st.engine_pkts, before);
	xdom_wait(b.e.rx_cq, b.rx_fd, &ctx[0], "a->b receive", 0);
	xdom_wait(a.e.tx_cq, a.tx_fd, &ctx[1], "a->b send", 0);
	ck_assert_str_eq(r, s);
	/* the first domain goes; the thread serves the second alone */
	xdom_close(&a);
	xdom_open(&d, &a);
	ck_assert_int_eq(fi_av_insert(b.av, &a.e.addr, 1, &b.peer, 0, NULL), 1);
	memset(r, 0, sizeof(r));
	ck_assert_int_eq(fi_trecv(a.e.ep, r, sizeof(r), NULL, FI_ADDR_UNSPEC, 8,
				  0, &ctx[2]),
			 0);
	ck_assert_int_eq(
		fi_tsend(b.e.ep, s, sizeof(s), NULL, b.peer, 8, &ctx[3]), 0);
	xdom_wait(a.e.rx_cq, a.rx_fd, &ctx[2], "b->a receive", 1);
	xdom_wait(b.e.tx_cq, b.tx_fd, &ctx[3], "b->a send", 1);
	ck_assert_str_eq((const char *)r, s);
	xdom_close(&a);
	xdom_close(&b);
	tu_dom_close(&d);
	tnbc_env.engine_shared = saved;
	/* every engine thread is gone with its domains */
	ck_assert_int_eq(engine_threads(), 0);
}
END_TEST

Suite *tu_proto_suite(void)
{
	Suite *s = suite_create("proto");
	TCase *tc = tcase_create("format");
	TCase *tr = tcase_create("ring");

	tcase_add_test(tc, proto_wire_format);
	tcase_add_test(tc, proto_frames);
	tcase_add_test(tc, proto_ep_names);
	tcase_add_test(tc, proto_iov_slice);
	tcase_add_test(tc, proto_iov_copy);
	tcase_add_test(tc, proto_loadavg);
	tcase_add_test(tc, proto_freelist);
	suite_add_tcase(s, tc);

	tcase_set_timeout(tr, TU_TCASE_TIMEOUT);
	tcase_add_test(tr, proto_ring_wrap);
	tcase_add_test(tr, proto_ring_prefaulted);
	tcase_add_test(tr, proto_idle_engine_sleeps_for_good);
	tcase_add_loop_test(tr, proto_nudge_spares_nap, 0, 2);
	tcase_add_loop_test(tr, proto_kick_once_per_sleep, 0, 2);
	tcase_add_loop_test(tr, proto_ring_burst, 0, 2);
	tcase_add_test(tr, proto_bad_packets);
	tcase_add_test(tr, proto_bad_direct_reads);
	tcase_add_test(tr, proto_bad_rts);
	tcase_add_test(tr, proto_svc_in_use);
	tcase_add_test(tr, proto_svc_reopen);
	tcase_add_test(tr, proto_cross_domain_wakeup);
	tcase_add_loop_test(tr, proto_one_engine, 0, 2);
	tcase_add_test(tr, proto_two_transports);
	tcase_add_test(tr, proto_rx_posted_settles);
	tcase_add_test(tr, proto_posted_burst_no_calls);
	suite_add_tcase(s, tr);
	return s;
}
