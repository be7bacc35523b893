/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * SHA-256 and HMAC-SHA256 (tnbc_hmac.h), written from FIPS 180-4 and
 * RFC 2104.  Clarity over speed: a handshake hashes a few hundred bytes.
 */
#include <errno.h>
#include <string.h>
#include <sys/random.h>

#include <rdma/fi_errno.h>

#include "tnbc_hmac.h"

#define TNBC_SHA256_BLOCK 64

/* FIPS 180-4 4.2.2: the first 32 bits of the fractional parts of the
 * cube roots of the first 64 primes. */
static const uint32_t tnbc_sha256_k[64] = {
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1,
	0x923f82a4, 0xab1c5ed5, 0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3,
	0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
	0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
	0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147,
	0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
	0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b,
	0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
	0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
	0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208,
	0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

static inline uint32_t tnbc_ror32(uint32_t x, unsigned n)
{
	return (x >> n) | (x << (32 - n));
}

/* The standard reads and writes words big-endian, whatever the host. */
static inline uint32_t tnbc_get_be32(const uint8_t *p)
{
	return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 |
	       (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static inline void tnbc_put_be32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
}

/* FIPS 180-4 6.2.2: one 512-bit block into the hash value. */
static void tnbc_sha256_block(uint32_t h[8], const uint8_t *p)
{
	/* v[0..7] are the standard's a..h */
	uint32_t w[64], v[8], t1, t2;
	int i;

	for (i = 0; i < 16; i++)
		w[i] = tnbc_get_be32(p + 4 * i);
	for (; i < 64; i++) {
		uint32_t s0 = tnbc_ror32(w[i - 15], 7) ^
			      tnbc_ror32(w[i - 15], 18) ^ (w[i - 15] >> 3);
		uint32_t s1 = tnbc_ror32(w[i - 2], 17) ^
			      tnbc_ror32(w[i - 2], 19) ^ (w[i - 2] >> 10);

		w[i] = s1 + w[i - 7] + s0 + w[i - 16];
	}

	memcpy(v, h, sizeof(v));
	for (i = 0; i < 64; i++) {
		t1 = v[7] +
		     (tnbc_ror32(v[4], 6) ^ tnbc_ror32(v[4], 11) ^
		      tnbc_ror32(v[4], 25)) +
		     ((v[4] & v[5]) ^ (~v[4] & v[6])) + tnbc_sha256_k[i] + w[i];
		t2 = (tnbc_ror32(v[0], 2) ^ tnbc_ror32(v[0], 13) ^
		      tnbc_ror32(v[0], 22)) +
		     ((v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]));
		/* h = g, g = f, ..., b = a in one move; then e and a */
		memmove(v + 1, v, 7 * sizeof(v[0]));
		v[4] += t1;
		v[0] = t1 + t2;
	}
	for (i = 0; i < 8; i++)
		h[i] += v[i];

	/* the schedule of an HMAC pad block is the key in other words */
	explicit_bzero(w, sizeof(w));
	explicit_bzero(v, sizeof(v));
}

void tnbc_sha256_init(struct tnbc_sha256 *s)
{
	/* FIPS 180-4 5.3.3: the first 32 bits of the fractional parts of
	 * the square roots of the first 8 primes. */
	static const uint32_t h0[8] = {
		0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
		0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
	};

	memcpy(s->h, h0, sizeof(h0));
	s->len = 0;
	s->fill = 0;
}

void tnbc_sha256_update(struct tnbc_sha256 *s, const void *data, size_t n)
{
	const uint8_t *p = data;

	/* an empty message may come as (NULL, 0): memcpy must not see it */
	if (!n)
		return;
	s->len += n;
	if (s->fill) {
		size_t take = TNBC_SHA256_BLOCK - s->fill;

		if (take > n)
			take = n;
		memcpy(s->buf + s->fill, p, take);
		s->fill += take;
		p += take;
		n -= take;
		if (s->fill < TNBC_SHA256_BLOCK)
			return;
		tnbc_sha256_block(s->h, s->buf);
		s->fill = 0;
	}
	/* whole blocks straight from the caller: no copy */
	for (; n >= TNBC_SHA256_BLOCK;
	     p += TNBC_SHA256_BLOCK, n -= TNBC_SHA256_BLOCK)
		tnbc_sha256_block(s->h, p);
	memcpy(s->buf, p, n);
	s->fill = n;
}

void tnbc_sha256_final(struct tnbc_sha256 *s, uint8_t out[TNBC_SHA256_LEN])
{
	/* FIPS 180-4 5.1.1: the length is in bits, taken before padding */
	uint64_t bits = s->len << 3;
	int i;

	s->buf[s->fill++] = 0x80;
	if (s->fill > TNBC_SHA256_BLOCK - 8) {
		/* no room left for the length: it takes a block of its own */
		memset(s->buf + s->fill, 0, TNBC_SHA256_BLOCK - s->fill);
		tnbc_sha256_block(s->h, s->buf);
		s->fill = 0;
	}
	memset(s->buf + s->fill, 0, TNBC_SHA256_BLOCK - 8 - s->fill);
	tnbc_put_be32(s->buf + 56, (uint32_t)(bits >> 32));
	tnbc_put_be32(s->buf + 60, (uint32_t)bits);
	tnbc_sha256_block(s->h, s->buf);

	for (i = 0; i < 8; i++)
		tnbc_put_be32(out + 4 * i, s->h[i]);
	explicit_bzero(s, sizeof(*s));
}

void tnbc_hmac_init(struct tnbc_hmac *m, const void *key, size_t key_len)
{
	uint8_t k0[TNBC_SHA256_BLOCK] = {0}, pad[TNBC_SHA256_BLOCK];
	int i;

	if (key_len > TNBC_SHA256_BLOCK) {
		/* k0 is zeroed past the digest: the padding RFC 2104 wants */
		tnbc_sha256_init(&m->inner);
		tnbc_sha256_update(&m->inner, key, key_len);
		tnbc_sha256_final(&m->inner, k0);
	} else if (key_len) {
		memcpy(k0, key, key_len);
	}

	for (i = 0; i < TNBC_SHA256_BLOCK; i++)
		pad[i] = k0[i] ^ 0x36;
	tnbc_sha256_init(&m->inner);
	tnbc_sha256_update(&m->inner, pad, sizeof(pad));
	for (i = 0; i < TNBC_SHA256_BLOCK; i++)
		pad[i] = k0[i] ^ 0x5c;
	tnbc_sha256_init(&m->outer);
	tnbc_sha256_update(&m->outer, pad, sizeof(pad));

	explicit_bzero(k0, sizeof(k0));
	explicit_bzero(pad, sizeof(pad));
}

void tnbc_hmac_update(struct tnbc_hmac *m, const void *data, size_t n)
{
	tnbc_sha256_update(&m->inner, data, n);
}

void tnbc_hmac_final(struct tnbc_hmac *m, uint8_t out[TNBC_SHA256_LEN])
{
	uint8_t ih[TNBC_SHA256_LEN];

	tnbc_sha256_final(&m->inner, ih);
	tnbc_sha256_update(&m->outer, ih, sizeof(ih));
	tnbc_sha256_final(&m->outer, out);
	explicit_bzero(ih, sizeof(ih));
}

bool tnbc_mac_equal(const uint8_t *a, const uint8_t *b, size_t n)
{
	/* volatile: the compiler may not stop at the first difference,
	 * which would tell a forger how many leading bytes were right */
	volatile uint8_t diff = 0;
	size_t i;

	for (i = 0; i < n; i++)
		diff |= a[i] ^ b[i];
	return diff == 0;
}

int tnbc_random(void *buf, size_t n)
{
	uint8_t *p = buf;

	while (n) {
		/* flags 0: wait for the pool to be seeded rather than
		 * hand out a challenge an attacker could predict */
		ssize_t r = getrandom(p, n, 0);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -FI_EIO;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}
