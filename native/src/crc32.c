/*
 * crc32(data, start, end, prev) -> the CRC-32 of data[start, end) continuing from prev, as zlib's
 * crc32(prev, data + start, end - start) computes it (reflected polynomial 0xEDB88320, register
 * started and finished inverted). The soft RoCE device computes one over every packet it sends
 * and every packet it receives (the RoCEv2 ICRC, src/wire/roce/icrc.ts); Node's zlib.crc32 does
 * about 3 GB/s, this about ten times that.
 *
 * The method is the folding of Intel's white paper "Fast CRC Computation for Generic Polynomials
 * Using PCLMULQDQ Instruction" (Gopal et al., 2009), as the kernel's crc32-pclmul and zlib's
 * x86 builds use it for this polynomial: four 128-bit lanes are carried 512 bits forward at a
 * time with the constants x^(512+32) and x^(512-32) mod P (bit-reflected, 33 bits), then
 * folded into one lane with x^(128+32) and x^(128-32) mod P, and lane by lane over what is left in
 * 16-byte steps. The last 128-bit remainder is worth the same as all the bytes folded into it, so
 * a table-driven byte loop over its 16 bytes (from a zero register) and the tail finishes the
 * CRC; no Barrett reduction is needed.
 *
 * Exported only on x86-64 CPUs with PCLMULQDQ (and SSE2); elsewhere the callers keep zlib.crc32.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "crc32.h"

/* Below this many bytes the byte loop is as fast as setting up the lanes. */
#define CRC_FOLD_MIN 64

static uint32_t crc_table[256];

static void crc_table_init(void)
{
	for (uint32_t n = 0; n < 256; n++) {
		uint32_t c = n;
		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ 0xedb88320u : c >> 1;
		crc_table[n] = c;
	}
}

/* The register (not inverted) after `len` more bytes. */
static uint32_t crc_bytes(uint32_t c, const uint8_t *p, size_t len)
{
	while (len--)
		c = (c >> 8) ^ crc_table[(c ^ *p++) & 0xff];
	return c;
}

#if defined(__x86_64__)
#include <immintrin.h>

/* Fold lane `x` forward over the distance whose constants `k` holds, onto the data `d`. */
__attribute__((target("pclmul,sse2"))) static inline __m128i fold(__m128i x, __m128i k, __m128i d)
{
	return _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11)), d);
}

/* The register after `len` (>= CRC_FOLD_MIN) more bytes. */
__attribute__((target("pclmul,sse2"))) static uint32_t crc_fold(uint32_t c, const uint8_t *p, size_t len)
{
	/* low 64 bits: the multiplier of a lane's first 8 bytes; high: of its last 8 */
	const __m128i k512 = _mm_set_epi64x(0x1c6e41596LL, 0x154442bd4LL);
	const __m128i k128 = _mm_set_epi64x(0x0ccaa009eLL, 0x1751997d0LL);
	__m128i x0 = _mm_loadu_si128((const __m128i *)p);
	__m128i x1 = _mm_loadu_si128((const __m128i *)(p + 16));
	__m128i x2 = _mm_loadu_si128((const __m128i *)(p + 32));
	__m128i x3 = _mm_loadu_si128((const __m128i *)(p + 48));
	uint8_t rest[16];

	/* the register enters as the first four message bytes XORed with it */
	x0 = _mm_xor_si128(x0, _mm_cvtsi32_si128((int)c));
	p += 64;
	len -= 64;
	while (len >= 64) {
		x0 = fold(x0, k512, _mm_loadu_si128((const __m128i *)p));
		x1 = fold(x1, k512, _mm_loadu_si128((const __m128i *)(p + 16)));
		x2 = fold(x2, k512, _mm_loadu_si128((const __m128i *)(p + 32)));
		x3 = fold(x3, k512, _mm_loadu_si128((const __m128i *)(p + 48)));
		p += 64;
		len -= 64;
	}
	x0 = fold(x0, k128, x1);
	x0 = fold(x0, k128, x2);
	x0 = fold(x0, k128, x3);
	while (len >= 16) {
		x0 = fold(x0, k128, _mm_loadu_si128((const __m128i *)p));
		p += 16;
		len -= 16;
	}
	_mm_storeu_si128((__m128i *)rest, x0);
	return crc_bytes(crc_bytes(0, rest, 16), p, len);
}

static int have_clmul(void)
{
	__builtin_cpu_init();
	return __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse2");
}
#else
static uint32_t crc_fold(uint32_t c, const uint8_t *p, size_t len)
{
	return crc_bytes(c, p, len);
}

static int have_clmul(void)
{
	return 0;
}
#endif

/* JS: crc32(data: Uint8Array, start, end, prev) -> uint32; throws on bad arguments. */
static napi_value crc32_js(napi_env env, napi_callback_info info)
{
	size_t argc = 4;
	napi_value argv[4], ret;
	napi_typedarray_type type;
	size_t length;
	void *data;
	uint32_t start, end, prev;

	if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 4 ||
	    napi_get_typedarray_info(env, argv[0], &type, &length, &data, NULL, NULL) != napi_ok ||
	    type != napi_uint8_array || napi_get_value_uint32(env, argv[1], &start) != napi_ok ||
	    napi_get_value_uint32(env, argv[2], &end) != napi_ok || napi_get_value_uint32(env, argv[3], &prev) != napi_ok ||
	    start > end || end > length) {
		napi_throw_range_error(env, "ERR_OUT_OF_RANGE", "crc32(data: Uint8Array, start, end, prev): bad arguments");
		return NULL;
	}
	const uint8_t *p = (const uint8_t *)data + start;
	size_t len = end - start;
	uint32_t c = ~prev;

	c = len >= CRC_FOLD_MIN ? crc_fold(c, p, len) : crc_bytes(c, p, len);
	napi_create_uint32(env, ~c, &ret);
	return ret;
}

int crc32_init(napi_env env, napi_value exports)
{
	napi_value fn;

	if (!have_clmul())
		return 0;
	crc_table_init();
	if (napi_create_function(env, "crc32", NAPI_AUTO_LENGTH, crc32_js, NULL, &fn) != napi_ok ||
	    napi_set_named_property(env, exports, "crc32", fn) != napi_ok)
		return -1;
	return 0;
}
