/* SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only */
/*
 * SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104), small and on their
 * own: the TCP transport proves in its handshake that both ends hold the
 * domain's auth_key, and the provider should not need a crypto library
 * for that alone.  Meant for a few short messages per connection, not
 * for bulk data.
 */
#ifndef TNBC_HMAC_H
#define TNBC_HMAC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TNBC_SHA256_LEN 32

struct tnbc_sha256 {
	uint32_t h[8];
	uint64_t len; /* bytes hashed so far */
	uint8_t buf[64]; /* a block not yet full */
	size_t fill;
};

void tnbc_sha256_init(struct tnbc_sha256 *s);
void tnbc_sha256_update(struct tnbc_sha256 *s, const void *data, size_t n);
/* Also wipes s: init it again before any reuse. */
void tnbc_sha256_final(struct tnbc_sha256 *s, uint8_t out[TNBC_SHA256_LEN]);

struct tnbc_hmac {
	struct tnbc_sha256 inner, outer;
};

/* Any key length; a key longer than a block is hashed first (RFC 2104). */
void tnbc_hmac_init(struct tnbc_hmac *m, const void *key, size_t key_len);
void tnbc_hmac_update(struct tnbc_hmac *m, const void *data, size_t n);
/* Also wipes m, which holds what the key derives. */
void tnbc_hmac_final(struct tnbc_hmac *m, uint8_t out[TNBC_SHA256_LEN]);

/* compares in time independent of where they differ */
bool tnbc_mac_equal(const uint8_t *a, const uint8_t *b, size_t n);

/* fills n bytes from getrandom(2) (retrying EINTR, looping on short
 * reads); returns 0 or a negative fi_errno (-FI_EIO) */
int tnbc_random(void *buf, size_t n);

#endif /* TNBC_HMAC_H */
