/*
 * crc32(data, start, end, prev) -> the CRC-32 of data[start, end) continuing from prev, as zlib's
 * crc32(prev, data + start, end - start) computes it (reflected polynomial 0xEDB88320, register
 * started and finished inverted). The soft RoCE device computes one over every packet it sends
 * and every packet it receives (the RoCEv2 ICRC, src/wire/roce/icrc.ts). crc32Impl names the
 * path this CPU runs: 'vpclmul512', 'vpclmul256' or 'pclmul'.
 *
 * The method is the folding of Intel's white paper "Fast CRC Computation for Generic Polynomials
 * Using PCLMULQDQ Instruction" (Gopal et al., 2009), as the kernel's crc32-pclmul and zlib's x86
 * builds use it for this polynomial.
 *
 * Representation. A 16-byte block loaded little-endian is a polynomial of degree < 128 whose bit
 * i is the coefficient of x^(127-i) (the first message bit is the highest power). The CRC
 * register from zero over a message M is M(x)*x^32 mod P. The fold state is one or more such
 * blocks ("lanes") such that the CRC of the whole input equals the CRC, from a zero register, of
 * the lanes' bytes followed by the bytes not yet read; the caller's register enters XORed into
 * the first four bytes.
 *
 * Folding. A lane X = A*x^64 + B (A its first 8 bytes) that stands D bits before the data block it
 * is to be added to is replaced by X*x^D = A*x^(D+64) + B*x^D mod P. A carry-less product of two
 * 64-bit reflected values is a 127-bit reflected value, which read as a 128-bit lane is the
 * product times x. So a qword Q times the constant rev32(x^n mod P) << 1 (the remainder's 32
 * bits reversed, one place up; as a 64-bit reflected value it is (x^n mod P)*x^31) reads as the
 * lane Q*(x^n mod P)*x^32, of degree < 128: the first 8 bytes take n = D + 32 (the constant's
 * low qword), the last 8 take n = D - 32 (its high qword), and the two products XORed onto the
 * data block leave a 128-bit lane with the same CRC. Distances used: D = 2048 (four 512-bit
 * lanes, 256 bytes a step), 1024 (four 256-bit lanes, 128 bytes a step), 512 (four 128-bit lanes
 * over 64 bytes, or one 512-bit lane), 384/256/128 (the 128-bit parts of a wide lane carried to
 * its last part), and 128 (one lane over 16 bytes). Each constant was computed by shifting 1 left
 * n times modulo P = 0x104C11DB7, reversing the 32-bit remainder and shifting it left once; n =
 * 512 +- 32 and 128 +- 32 give back the constants the kernel and zlib publish.
 *
 * Tail. After the 16-byte steps, t < 16 bytes remain: the 16 + t bytes lane||tail are split into
 * the lane's first t bytes (shifted to the end of a block of zeros, which a zero register does
 * not see) and a block of the lane's other 16 - t bytes followed by the tail (the last 16 input
 * bytes, blended with PBLENDVB); the first is folded onto the second with D = 128.
 *
 * Reduction to 32 bits (Barrett). The register wanted is X*x^32 mod P for the last lane
 * X = A*x^64 + B. X*x^64 = A*x^128 + B*x^64 is A*(x^96 mod P)*x^32 (one product, constant
 * rev32(x^96 mod P) << 1) plus B moved down 8 bytes: a value T whose 32 lowest powers are zero,
 * T = T'*x^32 with T' = X*x^32 mod P. T's first 32 bits C stand for C*x^96, which is
 * C*(x^64 mod P)*x^32 (C moved into a qword's high half for the product); with the rest of T it
 * leaves a 64-bit U = F*x^32 + G equal to X*x^32 mod P, and the register is U mod P =
 * G + (F*x^32 mod P) = G + ((q*P) mod x^32) with q = floor(F*mu / x^32) and
 * mu = floor(x^64 / P) = 0x104D101DF, exact for polynomials of degree < 64; mu and P enter
 * reversed over 33 bits (0x1F7011641, 0x1DB710641).
 *
 * Paths: VPCLMULQDQ with AVX-512F (four zmm lanes, 256 bytes a step, XORs by VPTERNLOGQ), with
 * AVX2 (four ymm lanes, 128 bytes a step), else PCLMULQDQ (four xmm lanes, 64 bytes a step); all
 * share the 16-byte steps, the tail and the reduction. Chosen once when the addon loads from CPUID
 * and XGETBV (the OS must have enabled the YMM state, and for AVX-512 the opmask and ZMM states,
 * in XCR0), not from the compiler's runtime, so it holds with any GCC or clang that builds it.
 * The Intel models the kernel lists as slowing down under 512-bit registers run the ymm path.
 * RDMACM_NETOPT_CRC=pclmul or =vpclmul256 caps the choice at that path (to run a narrower one on
 * a wider CPU), =vpclmul512 takes the zmm path wherever it runs; any other value is ignored.
 * Inputs under 16 bytes go through a byte table.
 *
 * Exported only on x86-64 CPUs with PCLMULQDQ, SSSE3 and SSE4.1; elsewhere the callers keep
 * zlib.crc32.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "crc32.h"

/* Below this many bytes the byte loop does it (the reduction costs about as much as 16 bytes). */
#define CRC_FOLD_MIN 16

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

/* A folding implementation: the register after `len` (>= CRC_FOLD_MIN) more bytes. */
typedef uint32_t (*crc_fold_fn)(uint32_t c, const uint8_t *p, size_t len);

/* GCC from 9, clang from 8 know the targets below; older compilers build the byte loop only. */
#if defined(__x86_64__) && (defined(__clang__) ? __clang_major__ >= 8 : __GNUC__ >= 9)
#include <cpuid.h>
#include <immintrin.h>

#define TGT_SSE __attribute__((target("pclmul,ssse3,sse4.1")))
#define TGT_AVX2 __attribute__((target("pclmul,ssse3,sse4.1,avx2,vpclmulqdq")))
#define TGT_AVX512 __attribute__((target("pclmul,ssse3,sse4.1,avx2,avx512f,vpclmulqdq")))

/*
 * A lane carried D bits forward: K_D_FIRST = rev32(x^(D+32) mod P) << 1 multiplies its first 8
 * bytes, K_D_LAST = rev32(x^(D-32) mod P) << 1 its last 8 (see the head).
 */
#define K_2048_FIRST 0x11542778aLL
#define K_2048_LAST 0x1322d1430LL
#define K_1024_FIRST 0x1e88ef372LL
#define K_1024_LAST 0x14a7fe880LL
#define K_512_FIRST 0x154442bd4LL
#define K_512_LAST 0x1c6e41596LL
#define K_384_FIRST 0x03db1ecdcLL
#define K_384_LAST 0x174359406LL
#define K_256_FIRST 0x0f1da05aaLL
#define K_256_LAST 0x15a546366LL
#define K_128_FIRST 0x1751997d0LL
#define K_128_LAST 0x0ccaa009eLL
/* the reduction's x^96 mod P and x^64 mod P, and mu and P reversed over 33 bits */
#define K_96 0x0ccaa009eLL
#define K_64 0x163cd6124LL
#define K_MU 0x1f7011641LL
#define K_P 0x1db710641LL

/*
 * PSHUFB masks by sliding window: 16 + t gives the lane moved down t bytes (zeros above), t the
 * lane's first t bytes moved to the top (zeros below), whose sign bits also select for PBLENDVB.
 */
static const uint8_t shift_masks[48] = {
	0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
	0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,
	0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
};

/* Fold lane `x` forward over the distance whose constants `k` holds, onto the data `d`. */
TGT_SSE static inline __attribute__((always_inline)) __m128i fold(__m128i x, __m128i k, __m128i d)
{
	return _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11)), d);
}

/* The register after the lane `x` and `len` more bytes at `p`, of which 16 before `p` are readable. */
TGT_SSE static inline __attribute__((always_inline)) uint32_t crc_finish(__m128i x, const uint8_t *p, size_t len)
{
	const __m128i k128 = _mm_set_epi64x(K_128_LAST, K_128_FIRST);

	while (len >= 16) {
		x = fold(x, k128, _mm_loadu_si128((const __m128i *)p));
		p += 16;
		len -= 16;
	}
	if (len) {
		const __m128i up = _mm_loadu_si128((const __m128i *)(shift_masks + len));
		const __m128i down = _mm_loadu_si128((const __m128i *)(shift_masks + 16 + len));
		const __m128i last = _mm_loadu_si128((const __m128i *)(p + len - 16));
		__m128i head = _mm_shuffle_epi8(x, up);
		__m128i rest = _mm_blendv_epi8(last, _mm_shuffle_epi8(x, down), up);

		x = fold(head, k128, rest);
	}
	/* T = A*(x^96 mod P)*x^32 + B*x^64: bits 0..95 */
	__m128i t = _mm_xor_si128(_mm_clmulepi64_si128(x, _mm_cvtsi64_si128(K_96), 0x00), _mm_srli_si128(x, 8));
	/* U = C*(x^64 mod P)*x^32 + E: bits 32..95 (bits 0..31 left over, dropped) */
	__m128i u = _mm_xor_si128(_mm_clmulepi64_si128(_mm_slli_epi64(t, 32), _mm_cvtsi64_si128(K_64), 0x00), t);
	uint64_t w = (uint64_t)_mm_cvtsi128_si64(_mm_srli_si128(u, 4));
	__m128i q = _mm_clmulepi64_si128(_mm_cvtsi32_si128((int)(uint32_t)w), _mm_cvtsi64_si128(K_MU), 0x00);
	__m128i r = _mm_clmulepi64_si128(_mm_cvtsi32_si128(_mm_cvtsi128_si32(q)), _mm_cvtsi64_si128(K_P), 0x00);

	return (uint32_t)((uint64_t)_mm_cvtsi128_si64(r) >> 32) ^ (uint32_t)(w >> 32);
}

/* Four 128-bit lanes over 64 bytes a step. */
TGT_SSE static uint32_t crc_pclmul(uint32_t c, const uint8_t *p, size_t len)
{
	const __m128i k512 = _mm_set_epi64x(K_512_LAST, K_512_FIRST);
	const __m128i k128 = _mm_set_epi64x(K_128_LAST, K_128_FIRST);
	__m128i x0 = _mm_xor_si128(_mm_loadu_si128((const __m128i *)p), _mm_cvtsi32_si128((int)c));

	if (len < 64)
		return crc_finish(x0, p + 16, len - 16);
	__m128i x1 = _mm_loadu_si128((const __m128i *)(p + 16));
	__m128i x2 = _mm_loadu_si128((const __m128i *)(p + 32));
	__m128i x3 = _mm_loadu_si128((const __m128i *)(p + 48));
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
	return crc_finish(x0, p, len);
}

/* Fold a 256-bit lane (two 128-bit parts) over the distance `k` holds onto `d`. */
TGT_AVX2 static inline __attribute__((always_inline)) __m256i fold256(__m256i x, __m256i k, __m256i d)
{
	return _mm256_xor_si256(_mm256_xor_si256(_mm256_clmulepi64_epi128(x, k, 0x00), _mm256_clmulepi64_epi128(x, k, 0x11)), d);
}

/* Four 256-bit lanes over 128 bytes a step, then one over 32 bytes a step. */
TGT_AVX2 static uint32_t crc_vpclmul256(uint32_t c, const uint8_t *p, size_t len)
{
	const __m256i k1024 = _mm256_setr_epi64x(K_1024_FIRST, K_1024_LAST, K_1024_FIRST, K_1024_LAST);
	const __m256i k256 = _mm256_setr_epi64x(K_256_FIRST, K_256_LAST, K_256_FIRST, K_256_LAST);
	const __m128i k128 = _mm_set_epi64x(K_128_LAST, K_128_FIRST);

	if (len < 64)
		return crc_pclmul(c, p, len);
	__m256i y0 = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)p), _mm256_inserti128_si256(_mm256_setzero_si256(), _mm_cvtsi32_si128((int)c), 0));
	p += 32;
	len -= 32;
	if (len >= 96) {
		__m256i y1 = _mm256_loadu_si256((const __m256i *)p);
		__m256i y2 = _mm256_loadu_si256((const __m256i *)(p + 32));
		__m256i y3 = _mm256_loadu_si256((const __m256i *)(p + 64));
		p += 96;
		len -= 96;
		while (len >= 128) {
			y0 = fold256(y0, k1024, _mm256_loadu_si256((const __m256i *)p));
			y1 = fold256(y1, k1024, _mm256_loadu_si256((const __m256i *)(p + 32)));
			y2 = fold256(y2, k1024, _mm256_loadu_si256((const __m256i *)(p + 64)));
			y3 = fold256(y3, k1024, _mm256_loadu_si256((const __m256i *)(p + 96)));
			p += 128;
			len -= 128;
		}
		y0 = fold256(y0, k256, y1);
		y0 = fold256(y0, k256, y2);
		y0 = fold256(y0, k256, y3);
	}
	while (len >= 32) {
		y0 = fold256(y0, k256, _mm256_loadu_si256((const __m256i *)p));
		p += 32;
		len -= 32;
	}
	return crc_finish(fold(_mm256_castsi256_si128(y0), k128, _mm256_extracti128_si256(y0, 1)), p, len);
}

/* Fold a 512-bit lane (four 128-bit parts) over the distance `k` holds onto `d`. */
TGT_AVX512 static inline __attribute__((always_inline)) __m512i fold512(__m512i x, __m512i k, __m512i d)
{
	return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(x, k, 0x00), _mm512_clmulepi64_epi128(x, k, 0x11), d, 0x96);
}

/* Four 512-bit lanes over 256 bytes a step, then one over 64 bytes a step. */
TGT_AVX512 static uint32_t crc_vpclmul512(uint32_t c, const uint8_t *p, size_t len)
{
	const __m512i k2048 = _mm512_broadcast_i32x4(_mm_set_epi64x(K_2048_LAST, K_2048_FIRST));
	const __m512i k512 = _mm512_broadcast_i32x4(_mm_set_epi64x(K_512_LAST, K_512_FIRST));
	/* each 128-bit part carried to the last one: 384, 256, 128 bits; the last one stays */
	const __m512i kparts = _mm512_set_epi64(0, 0, K_128_LAST, K_128_FIRST, K_256_LAST, K_256_FIRST, K_384_LAST, K_384_FIRST);

	if (len < 64)
		return crc_pclmul(c, p, len);
	__m512i z0 = _mm512_xor_si512(_mm512_loadu_si512(p), _mm512_inserti32x4(_mm512_setzero_si512(), _mm_cvtsi32_si128((int)c), 0));
	p += 64;
	len -= 64;
	if (len >= 192) {
		__m512i z1 = _mm512_loadu_si512(p);
		__m512i z2 = _mm512_loadu_si512(p + 64);
		__m512i z3 = _mm512_loadu_si512(p + 128);
		p += 192;
		len -= 192;
		while (len >= 256) {
			z0 = fold512(z0, k2048, _mm512_loadu_si512(p));
			z1 = fold512(z1, k2048, _mm512_loadu_si512(p + 64));
			z2 = fold512(z2, k2048, _mm512_loadu_si512(p + 128));
			z3 = fold512(z3, k2048, _mm512_loadu_si512(p + 192));
			p += 256;
			len -= 256;
		}
		z0 = fold512(z0, k512, z1);
		z0 = fold512(z0, k512, z2);
		z0 = fold512(z0, k512, z3);
	}
	while (len >= 64) {
		z0 = fold512(z0, k512, _mm512_loadu_si512(p));
		p += 64;
		len -= 64;
	}
	/* the products of parts 0..2 (part 3's constant is 0) XORed with part 3 */
	__m512i m = _mm512_xor_si512(_mm512_clmulepi64_epi128(z0, kparts, 0x00), _mm512_clmulepi64_epi128(z0, kparts, 0x11));
	__m256i h = _mm256_xor_si256(_mm512_castsi512_si256(m), _mm512_extracti64x4_epi64(m, 1));
	__m128i x = _mm_xor_si128(_mm_xor_si128(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1)), _mm512_extracti32x4_epi32(z0, 3));
	return crc_finish(x, p, len);
}

/*
 * Intel models whose cores slow down while 512-bit registers are in use (the kernel's
 * zmm_exclusion_list, arch/x86/kernel/cpu/intel.c: Skylake-X, Ice Lake, Tiger Lake); family 6.
 */
static const unsigned zmm_slow_models[] = { 0x55, 0x6a, 0x6c, 0x7d, 0x7e, 0x9d, 0x8c, 0x8d };

/* Whether this is an Intel CPU that prefers 256-bit registers to 512-bit ones. */
static int prefer_ymm(void)
{
	unsigned a, b, c, d;

	__cpuid(0, a, b, c, d);
	/* "GenuineIntel" in EBX, EDX, ECX */
	if (b != 0x756e6547 || d != 0x49656e69 || c != 0x6c65746e)
		return 0;
	__cpuid(1, a, b, c, d);
	if (((a >> 8) & 0xf) != 6)
		return 0;
	const unsigned model = ((a >> 4) & 0xf) | (((a >> 16) & 0xf) << 4);
	for (size_t i = 0; i < sizeof(zmm_slow_models) / sizeof(zmm_slow_models[0]); i++)
		if (model == zmm_slow_models[i])
			return 1;
	return 0;
}

/*
 * The widest path this CPU and its OS allow, at most `cap`: 0 the widest (a CPU that prefers
 * 256-bit registers runs vpclmul256), 1 vpclmul256, 2 pclmul, -1 vpclmul512 wherever it runs.
 */
static crc_fold_fn choose(int cap, const char **name)
{
	unsigned a, b, c, d, xcr0_lo, xcr0_hi;

	if (!__get_cpuid(1, &a, &b, &c, &d))
		return NULL;
	const int pclmul = (c & bit_PCLMUL) && (c & bit_SSSE3) && (c & bit_SSE4_1);
	const int osxsave = (c & bit_OSXSAVE) && (c & bit_AVX);
	if (!pclmul)
		return NULL;
	*name = "pclmul";
	if (!osxsave || cap >= 2 || __get_cpuid_max(0, NULL) < 7)
		return crc_pclmul;
	/* XGETBV(0): XCR0, the register states the OS saves (bit 1 SSE, 2 AVX, 5..7 AVX-512) */
	__asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
	__cpuid_count(7, 0, a, b, c, d);
	const int vpclmul = (c & bit_VPCLMULQDQ) && (b & bit_AVX2) && (xcr0_lo & 0x06) == 0x06;
	const int zmm = (b & bit_AVX512F) && (xcr0_lo & 0xe6) == 0xe6;
	if (vpclmul && zmm && (cap < 0 || (cap == 0 && !prefer_ymm()))) {
		*name = "vpclmul512";
		return crc_vpclmul512;
	}
	if (vpclmul) {
		*name = "vpclmul256";
		return crc_vpclmul256;
	}
	return crc_pclmul;
}
#else
static crc_fold_fn choose(int cap, const char **name)
{
	return NULL;
}
#endif

static crc_fold_fn crc_fold;

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
	const char *cap_env = getenv("RDMACM_NETOPT_CRC");
	const char *impl = NULL;
	napi_value fn, name;
	int cap = 0;

	if (cap_env != NULL && strcmp(cap_env, "pclmul") == 0)
		cap = 2;
	else if (cap_env != NULL && strcmp(cap_env, "vpclmul256") == 0)
		cap = 1;
	else if (cap_env != NULL && strcmp(cap_env, "vpclmul512") == 0)
		cap = -1;
	crc_fold = choose(cap, &impl);
	if (crc_fold == NULL)
		return 0;
	crc_table_init();
	if (napi_create_function(env, "crc32", NAPI_AUTO_LENGTH, crc32_js, NULL, &fn) != napi_ok ||
	    napi_set_named_property(env, exports, "crc32", fn) != napi_ok ||
	    napi_create_string_utf8(env, impl, NAPI_AUTO_LENGTH, &name) != napi_ok ||
	    napi_set_named_property(env, exports, "crc32Impl", name) != napi_ok)
		return -1;
	return 0;
}
