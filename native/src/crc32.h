/* CRC-32 (IEEE 802.3, zlib's) with carry-less multiplication, registered on netopt.node's exports. */
#ifndef RDMACM_CRC32_H
#define RDMACM_CRC32_H
#include <node_api.h>

/* Adds crc32() and crc32Impl to `exports` where the CPU has PCLMULQDQ: 0, or -1 when N-API failed. */
int crc32_init(napi_env env, napi_value exports);

#endif
