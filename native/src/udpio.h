/* Batched UDP sockets for the soft RoCE device (udpio.c), registered on netopt.node's exports. */
#ifndef RDMACM_UDPIO_H
#define RDMACM_UDPIO_H
#include <node_api.h>

/* Adds the udp* functions and udpConst to `exports`: 0, or -1 when N-API failed. */
int udpio_init(napi_env env, napi_value exports);

#endif
