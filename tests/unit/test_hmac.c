/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * SHA-256 and HMAC-SHA256 of the TCP handshake (xport/tnbc_hmac.c)
 * against the published vectors: FIPS 180-2's examples and RFC 4231.
 * The expected digests were checked with sha256sum, openssl dgst and
 * Python's hashlib/hmac.
 */
#include "tnbc_unit.h"

#include "xport/tnbc_hmac.h"

static void hex(const uint8_t *d, size_t n, char *out)
{
	static const char digits[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[d[i] >> 4];
		out[2 * i + 1] = digits[d[i] & 15];
	}
	out[2 * n] = '\0';
}

static void sha_expect(const void *msg, size_t len, const char *want)
{
	struct tnbc_sha256 s;
	uint8_t d[TNBC_SHA256_LEN];
	char got[2 * TNBC_SHA256_LEN + 1];

	tnbc_sha256_init(&s);
	tnbc_sha256_update(&s, msg, len);
	tnbc_sha256_final(&s, d);
	hex(d, sizeof(d), got);
	ck_assert_str_eq(got, want);
}

START_TEST(sha256_vectors)
{
	sha_expect("", 0,
		   "e3b0c44298fc1c149afbf4c8996fb924"
		   "27ae41e4649b934ca495991b7852b855");
	sha_expect("abc", 3,
		   "ba7816bf8f01cfea414140de5dae2223"
		   "b00361a396177a9cb410ff61f20015ad");
	/* 448 bits: the length no longer fits the block, one more goes */
	sha_expect("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
		   56,
		   "248d6a61d20638b8e5c026930c3e6039"
		   "a33ce45964ff2167f6ecedd419db06c1");
}
END_TEST

/* Lengths either side of where the padding spills into another block. */
START_TEST(sha256_padding_edges)
{
	static const struct {
		size_t n;
		const char *want;
	} v[] = {
		{55, "9f4390f8d30c2dd92ec9f095b65e2b9a"
		     "e9b0a925a5258e241c9f1e910f734318"},
		{63, "7d3e74a05d7db15bce4ad9ec0658ea98"
		     "e3f06eeecf16b4c6fff2da457ddc2f34"},
		{64, "ffe054fe7ae0cb6dc65c3af9b61d5209"
		     "f439851db43d0ba5997337df154668eb"},
		{65, "635361c48bb9eab14198e76ea8ab7f1a"
		     "41685d6ad62aa9146d301d4f17eb0ae0"},
		{119, "31eba51c313a5c08226adf18d4a359cf"
		      "dfd8d2e816b13f4af952f7ea6584dcfb"},
		{120, "2f3d335432c70b580af0e8e1b3674a7c"
		      "020d683aa5f73aaaedfdc55af904c21c"},
	};
	char a[120];

	memset(a, 'a', sizeof(a));
	for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
		sha_expect(a, v[i].n, v[i].want);
}
END_TEST

/* A million 'a' in pieces that start and end anywhere in a block. */
START_TEST(sha256_million_chunked)
{
	static const size_t chunks[] = {1, 63, 64, 65, 1000, 7, 128, 4096};
	struct tnbc_sha256 s;
	uint8_t d[TNBC_SHA256_LEN];
	char got[2 * TNBC_SHA256_LEN + 1];
	static char a[4096];
	size_t left = 1000000, i = 0;

	memset(a, 'a', sizeof(a));
	tnbc_sha256_init(&s);
	while (left) {
		size_t n = chunks[i++ % (sizeof(chunks) / sizeof(chunks[0]))];

		if (n > left)
			n = left;
		tnbc_sha256_update(&s, a, n);
		left -= n;
	}
	tnbc_sha256_final(&s, d);
	hex(d, sizeof(d), got);
	ck_assert_str_eq(got, "cdc76e5c9914fb9281a1c7e284d73e67"
			      "f1809a48a497200e046d39ccc7112cd0");
}
END_TEST

static void hmac_expect(const void *key, size_t klen, const void *msg,
			size_t mlen, const char *want)
{
	struct tnbc_hmac m;
	uint8_t d[TNBC_SHA256_LEN];
	char got[2 * TNBC_SHA256_LEN + 1];
	const uint8_t *p = msg;

	/* whole, then in two uneven pieces: the same MAC */
	tnbc_hmac_init(&m, key, klen);
	tnbc_hmac_update(&m, msg, mlen);
	tnbc_hmac_final(&m, d);
	hex(d, sizeof(d), got);
	ck_assert_str_eq(got, want);

	tnbc_hmac_init(&m, key, klen);
	tnbc_hmac_update(&m, p, mlen / 3);
	tnbc_hmac_update(&m, p + mlen / 3, mlen - mlen / 3);
	tnbc_hmac_final(&m, d);
	hex(d, sizeof(d), got);
	ck_assert_str_eq(got, want);
}

START_TEST(hmac_rfc4231)
{
	uint8_t key[131], msg[50];

	/* 1 */
	memset(key, 0x0b, 20);
	hmac_expect(key, 20, "Hi There", 8,
		    "b0344c61d8db38535ca8afceaf0bf12b"
		    "881dc200c9833da726e9376c2e32cff7");
	/* 2: a key shorter than the digest */
	hmac_expect("Jefe", 4, "what do ya want for nothing?", 28,
		    "5bdcc146bf60754e6a042426089575c7"
		    "5a003f089d2739839dec58b964ec3843");
	/* 3 */
	memset(key, 0xaa, 20);
	memset(msg, 0xdd, 50);
	hmac_expect(key, 20, msg, 50,
		    "773ea91e36800e46854db8ebd09181a7"
		    "2959098b3ef8c122d9635514ced565fe");
	/* 4 */
	for (int i = 0; i < 25; i++)
		key[i] = (uint8_t)(i + 1);
	memset(msg, 0xcd, 50);
	hmac_expect(key, 25, msg, 50,
		    "82558a389a443c0ea4cc819899f2083a"
		    "85f0faa3e578f8077a2e3ff46729665b");
	/* 6 and 7: a key longer than the block, hashed first */
	memset(key, 0xaa, 131);
	hmac_expect(key, 131,
		    "Test Using Larger Than Block-Size Key - Hash Key First",
		    54,
		    "60e431591ee0b67f0d8a26aacbf5b77f"
		    "8e0bc6213728c5140546040f0ee37f54");
	{
		const char *m7 =
			"This is a test using a larger than block-size "
			"key and a larger than block-size data. The "
			"key needs to be hashed before being used by "
			"the HMAC algorithm.";

		hmac_expect(key, 131, m7, strlen(m7),
			    "9b09ffa71b942fcb27635fbcd5b0e944"
			    "bfdc63644f0713938a7f51535c3a35e2");
	}
}
END_TEST

START_TEST(hmac_mac_equal)
{
	uint8_t a[TNBC_SHA256_LEN], b[TNBC_SHA256_LEN];

	tu_fill(a, sizeof(a), 7);
	memcpy(b, a, sizeof(b));
	ck_assert(tnbc_mac_equal(a, b, sizeof(a)));
	ck_assert(tnbc_mac_equal(a, b, 0));
	/* a difference anywhere, first and last bytes included */
	for (size_t i = 0; i < sizeof(a); i++) {
		b[i] ^= 0x01;
		ck_assert(!tnbc_mac_equal(a, b, sizeof(a)));
		b[i] ^= 0x81;
		ck_assert(!tnbc_mac_equal(a, b, sizeof(a)));
		b[i] ^= 0x80;
	}
	ck_assert(tnbc_mac_equal(a, b, sizeof(a)));
}
END_TEST

START_TEST(hmac_random)
{
	uint8_t a[32], b[32], none[1] = {0x5a};

	ck_assert_int_eq(tnbc_random(a, sizeof(a)), 0);
	ck_assert_int_eq(tnbc_random(b, sizeof(b)), 0);
	/* equal only with chance 2^-256 */
	ck_assert(memcmp(a, b, sizeof(a)) != 0);
	ck_assert_int_eq(tnbc_random(none, 0), 0);
	ck_assert_uint_eq(none[0], 0x5a);
}
END_TEST

Suite *tu_hmac_suite(void)
{
	Suite *s = suite_create("hmac");
	TCase *tc = tcase_create("hmac");

	tcase_add_test(tc, sha256_vectors);
	tcase_add_test(tc, sha256_padding_edges);
	tcase_add_test(tc, sha256_million_chunked);
	tcase_add_test(tc, hmac_rfc4231);
	tcase_add_test(tc, hmac_mac_equal);
	tcase_add_test(tc, hmac_random);
	suite_add_tcase(s, tc);
	return s;
}
