/*
 * netopt.node: the socket calls the soft devices need and Node does not offer.
 *
 * The RoCEv2 ICRC covers the IPv4 identification field, which the kernel fills in after
 * userspace hands over the datagram. Linux writes 0 there for a DF datagram only when the
 * socket's path-MTU mode is IP_PMTUDISC_DO or IP_PMTUDISC_PROBE (include/net/ip.h,
 * ip_select_ident_segs), so the device puts its IPv4 sockets in PROBE mode and computes the ICRC
 * with identification 0. Needs only Node's headers and a C compiler (no rdma-core).
 *
 * The kernel's rxe sends its UDP datagrams with checksum 0 (the ICRC protects them): the device's
 * IPv4 sockets send so too (SO_NO_CHECK, which Linux honours for IPv4 UDP only). IPv6 forbids a
 * zero checksum unless the receiving socket allows it (RFC 6936; Linux UDP_NO_CHECK6_RX, as the
 * kernel's own UDP tunnel sockets do), so the device allows it on its IPv6 sockets.
 *
 * The soft iWARP device sends the FIN of a graceful close only once TCP has sent every byte
 * written before it (see src/transport/iwarp/llp.ts), so that the FIN never rides in a segment
 * with data: Node cannot tell, SIOCOUTQNSD can (for TCP, write_seq - snd_nxt).
 *
 * setMtuDiscover(fd, mode) -> 0, or a negative errno.
 * setNoCheck(fd) -> 0, or a negative errno.
 * setNoCheck6Rx(fd) -> 0, or a negative errno.
 * unsentBytes(fd) -> bytes in the socket's send queue not yet sent, or a negative errno.
 *
 * The soft RoCE device's processes hand each other datagrams over abstract Unix sockets, whose
 * names any local process can connect to or listen on; SO_PEERCRED tells who is at the other end
 * (the process that connected, or that listened), so that a device takes forwarded datagrams only
 * from processes of its own user or root (see src/transport/roce/udp.ts).
 *
 * peerCred(fd) -> [pid, uid, gid] of the Unix socket's peer, or a negative errno.
 *
 * The soft RoCE device's batched UDP sockets (recvmmsg/sendmmsg on Node's loop): udpio.c, built in
 * with RDMACM_UDPIO defined.
 *
 * crc32(data, start, end, prev): the CRC-32 of the RoCEv2 ICRC by carry-less multiplication
 * (crc32.c), where the CPU has PCLMULQDQ; crc32Impl names the path it chose for this CPU.
 */
#define _GNU_SOURCE /* struct ucred */
#include <errno.h>
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <node_api.h>

#include "crc32.h"
#include "udpio.h"

#ifndef UDP_NO_CHECK6_RX
#define UDP_NO_CHECK6_RX 102
#endif
#ifndef SO_NO_CHECK
#define SO_NO_CHECK 11 /* asm-generic/socket.h */
#endif
#ifndef SIOCOUTQNSD
#define SIOCOUTQNSD 0x894B /* linux/sockios.h */
#endif

static napi_value set_mtu_discover(napi_env env, napi_callback_info info)
{
	size_t argc = 2;
	napi_value argv[2], ret;
	int32_t fd = -1, mode = -1, rc;

	if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 2 ||
	    napi_get_value_int32(env, argv[0], &fd) != napi_ok ||
	    napi_get_value_int32(env, argv[1], &mode) != napi_ok || fd < 0 || mode < 0) {
		rc = -EINVAL;
	} else {
		rc = setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &mode, sizeof(mode)) ? -errno : 0;
	}
	napi_create_int32(env, rc, &ret);
	return ret;
}

/* setsockopt(fd, level, name, 1) for the fd in the call's first argument: 0, or a negative errno. */
static napi_value set_flag(napi_env env, napi_callback_info info, int level, int name)
{
	size_t argc = 1;
	napi_value argv[1], ret;
	int32_t fd = -1, rc, one = 1;

	if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 1 ||
	    napi_get_value_int32(env, argv[0], &fd) != napi_ok || fd < 0) {
		rc = -EINVAL;
	} else {
		rc = setsockopt(fd, level, name, &one, sizeof(one)) ? -errno : 0;
	}
	napi_create_int32(env, rc, &ret);
	return ret;
}

static napi_value set_no_check(napi_env env, napi_callback_info info)
{
	return set_flag(env, info, SOL_SOCKET, SO_NO_CHECK);
}

static napi_value set_no_check6_rx(napi_env env, napi_callback_info info)
{
	return set_flag(env, info, IPPROTO_UDP, UDP_NO_CHECK6_RX);
}

static napi_value unsent_bytes(napi_env env, napi_callback_info info)
{
	size_t argc = 1;
	napi_value argv[1], ret;
	int32_t fd = -1, rc;
	int n = 0;

	if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 1 ||
	    napi_get_value_int32(env, argv[0], &fd) != napi_ok || fd < 0) {
		rc = -EINVAL;
	} else {
		rc = ioctl(fd, SIOCOUTQNSD, &n) ? -errno : n;
	}
	napi_create_int32(env, rc, &ret);
	return ret;
}

static napi_value peer_cred(napi_env env, napi_callback_info info)
{
	size_t argc = 1;
	napi_value argv[1], ret, v;
	int32_t fd = -1;
	struct ucred cred;
	socklen_t len = sizeof(cred);

	if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 1 ||
	    napi_get_value_int32(env, argv[0], &fd) != napi_ok || fd < 0) {
		napi_create_int32(env, -EINVAL, &ret);
		return ret;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) || len != sizeof(cred)) {
		napi_create_int32(env, -errno ? -errno : -EINVAL, &ret);
		return ret;
	}
	if (napi_create_array_with_length(env, 3, &ret) != napi_ok)
		return NULL;
	napi_create_int32(env, (int32_t)cred.pid, &v);
	napi_set_element(env, ret, 0, v);
	napi_create_uint32(env, (uint32_t)cred.uid, &v);
	napi_set_element(env, ret, 1, v);
	napi_create_uint32(env, (uint32_t)cred.gid, &v);
	napi_set_element(env, ret, 2, v);
	return ret;
}

NAPI_MODULE_INIT()
{
	napi_value fn, fnn, fn6, fnq, fnc;

	if (napi_create_function(env, "setMtuDiscover", NAPI_AUTO_LENGTH, set_mtu_discover, NULL, &fn) != napi_ok ||
	    napi_set_named_property(env, exports, "setMtuDiscover", fn) != napi_ok ||
	    napi_create_function(env, "setNoCheck", NAPI_AUTO_LENGTH, set_no_check, NULL, &fnn) != napi_ok ||
	    napi_set_named_property(env, exports, "setNoCheck", fnn) != napi_ok ||
	    napi_create_function(env, "setNoCheck6Rx", NAPI_AUTO_LENGTH, set_no_check6_rx, NULL, &fn6) != napi_ok ||
	    napi_set_named_property(env, exports, "setNoCheck6Rx", fn6) != napi_ok ||
	    napi_create_function(env, "unsentBytes", NAPI_AUTO_LENGTH, unsent_bytes, NULL, &fnq) != napi_ok ||
	    napi_set_named_property(env, exports, "unsentBytes", fnq) != napi_ok ||
	    napi_create_function(env, "peerCred", NAPI_AUTO_LENGTH, peer_cred, NULL, &fnc) != napi_ok ||
	    napi_set_named_property(env, exports, "peerCred", fnc) != napi_ok)
		return NULL;
	if (crc32_init(env, exports) != 0)
		return NULL;
#ifdef RDMACM_UDPIO
	if (udpio_init(env, exports) != 0)
		return NULL;
#endif
	return exports;
}
