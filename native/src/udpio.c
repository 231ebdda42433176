/*
 * Batched UDP sockets for the soft RoCE device (part of netopt.node).
 *
 * Node's dgram pays, per datagram, one system call and one libuv callback on receive and a
 * JavaScript send request on transmit. Linux moves many datagrams per call: recvmmsg(2) and
 * sendmmsg(2). An endpoint here is one non-blocking UDP socket the addon opens and binds itself,
 * watched for readability by a uv_poll_t on Node's own loop:
 *
 *  - receive: each time the socket is readable, recvmmsg drains up to UDPIO_BATCH datagrams
 *    (several rounds, bounded) into a receive area of UDPIO_BATCH slots of UDPIO_SLOT bytes, and
 *    JavaScript is called once per round with a buffer and the count, the offsets, lengths and
 *    source addresses in a shared Int32Array (the layout UDPIO_META_* below). When JavaScript
 *    gave the area itself (udpSetup's second argument), the datagrams are read straight into it
 *    and that same buffer is passed every round: nothing is copied or allocated per round, and
 *    a datagram is valid only until the call returns (the caller copies what it keeps).
 *    Otherwise the area is the addon's and the datagrams of a round are copied into one new Node
 *    Buffer, back to back, that is never reused.
 *  - transmit: send() queues a datagram (pointer and length into a buffer JavaScript keeps alive
 *    until the next flush) with its destination; flush() hands the queue to sendmmsg. A short
 *    sendmmsg resumes at the first datagram not sent; a datagram the kernel refuses (an
 *    unreachable destination, EMSGSIZE ...) is counted and skipped; on EAGAIN the rest is copied
 *    into memory the endpoint owns and sent when poll reports the socket writable, so JavaScript
 *    may release its buffers once flush() returns.
 *
 * udpOpen(family, sockaddr, rcvbuf, sndbuf, onBatch) -> handle, or a negative errno.
 * udpSend(handle, buf, off, len, sockaddr) -> datagrams queued, or a negative errno.
 * udpFlush(handle) -> datagrams still queued (waiting for writability), or a negative errno.
 * udpSetsockopt(handle, level, name, int | Uint8Array) -> 0, or a negative errno.
 * udpRef(handle, bool), udpClose(handle), udpFd(handle), udpStats(handle) -> Float64Array.
 * udpAddr(family, text, port) -> Buffer holding the sockaddr, or a negative errno.
 * udpFault(handle, maxPerCall, eagainAfter): testing: the kernel takes at most `maxPerCall`
 *   datagrams per sendmmsg (a short send; 0: no cap), and the call after `eagainAfter` more
 *   datagrams fails once with EAGAIN (-1: never).
 * udpSetup(meta[, area]): the Int32Array the receive rounds describe their datagrams in, and
 *   optionally the receive area (a Uint8Array of at least UDPIO_BATCH * UDPIO_SLOT bytes).
 */
#define _GNU_SOURCE /* recvmmsg, sendmmsg */
#define NAPI_VERSION 8 /* napi_add_async_cleanup_hook */
#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <node_api.h>
#include <uv.h>

#include "udpio.h"

/* Datagrams per recvmmsg / sendmmsg call. */
#define UDPIO_BATCH 64
/* recvmmsg rounds per readable event before the loop serves others (poll is level-triggered). */
#define UDPIO_RX_ROUNDS 8
/* Room for one datagram: the largest UDP payload over IPv4 or IPv6 fits. */
#define UDPIO_SLOT 65536
/* Int32 words per datagram in the meta array: offset, length, source port, IPv6 scope, 16 address bytes. */
#define UDPIO_META_WORDS 8

enum udpio_stat {
	ST_RX_CALLS, ST_RX_DGRAMS, ST_TX_CALLS, ST_TX_DGRAMS, ST_TX_SHORT, ST_TX_EAGAIN, ST_TX_ERRORS,
	ST_TX_LAST_ERRNO, ST_COUNT
};

struct udpio_tx {
	struct iovec iov;
	struct sockaddr_storage to;
	socklen_t tolen;
	bool owned; /* iov_base is malloc'd by the endpoint */
};

struct udpio_ep {
	uv_poll_t poll;
	int fd;
	int events;
	bool closed;
	bool env_gone; /* the Node environment is being torn down: no more N-API calls */
	int refs;      /* the JavaScript handle and the uv handle: freed when both are gone */
	napi_env env;
	/* Holds the environment's teardown until the uv handle is closed (its close callback is in this module). */
	napi_async_cleanup_hook_handle cleanup;
	napi_ref on_batch;
	napi_async_context actx;
	struct udpio_tx *tx;
	unsigned tx_cap, tx_head, tx_tail;
	bool waiting; /* EAGAIN: the queue is owned and waits for writability */
	int fault_max, fault_eagain;
	double stats[ST_COUNT];
};

/* The receive area, one per Node environment (a JavaScript thread). */
struct udpio_env {
	struct mmsghdr msgs[UDPIO_BATCH];
	struct iovec iov[UDPIO_BATCH];
	struct sockaddr_storage from[UDPIO_BATCH];
	char *area;
	/* The area is JavaScript's (area_ref holds it): datagrams are delivered in place. */
	napi_ref area_ref;
	napi_ref meta_ref;
	int32_t *meta;
	size_t meta_words;
};

static struct udpio_env *env_data(napi_env env)
{
	void *d = NULL;

	napi_get_instance_data(env, &d);
	return d;
}

static napi_value int_value(napi_env env, int32_t v)
{
	napi_value r;

	napi_create_int32(env, v, &r);
	return r;
}

static struct udpio_ep *ep_of(napi_env env, napi_value v)
{
	void *p = NULL;
	napi_valuetype t;

	if (napi_typeof(env, v, &t) != napi_ok || t != napi_external || napi_get_value_external(env, v, &p) != napi_ok)
		return NULL;
	return p;
}

static void ep_poll_update(struct udpio_ep *ep)
{
	int want = UV_READABLE | (ep->waiting ? UV_WRITABLE : 0);

	if (ep->closed || want == ep->events)
		return;
	ep->events = want;
	uv_poll_start(&ep->poll, want, NULL);
}

/* --- transmit ------------------------------------------------------------------------------- */

static int tx_reserve(struct udpio_ep *ep)
{
	struct udpio_tx *n;
	unsigned cap;

	if (ep->tx_tail < ep->tx_cap)
		return 0;
	if (ep->tx_head > 0) {
		memmove(ep->tx, ep->tx + ep->tx_head, (ep->tx_tail - ep->tx_head) * sizeof(*ep->tx));
		ep->tx_tail -= ep->tx_head;
		ep->tx_head = 0;
		return 0;
	}
	cap = ep->tx_cap ? ep->tx_cap * 2 : UDPIO_BATCH;
	n = realloc(ep->tx, cap * sizeof(*n));
	if (!n)
		return -ENOMEM;
	ep->tx = n;
	ep->tx_cap = cap;
	return 0;
}

static void tx_release(struct udpio_tx *t)
{
	if (t->owned)
		free(t->iov.iov_base);
	t->owned = false;
}

/* Copy the queued payloads into memory of the endpoint (the caller's buffers go after flush). */
static int tx_own(struct udpio_ep *ep)
{
	for (unsigned i = ep->tx_head; i < ep->tx_tail; i++) {
		struct udpio_tx *t = &ep->tx[i];
		void *c;

		if (t->owned)
			continue;
		c = malloc(t->iov.iov_len ? t->iov.iov_len : 1);
		if (!c)
			return -ENOMEM;
		memcpy(c, t->iov.iov_base, t->iov.iov_len);
		t->iov.iov_base = c;
		t->owned = true;
	}
	return 0;
}

/*
 * Hand the queue to sendmmsg until it is empty or the kernel says EAGAIN. Returns the datagrams
 * left (waiting for writability).
 */
static unsigned tx_flush(struct udpio_ep *ep)
{
	struct mmsghdr m[UDPIO_BATCH];

	while (ep->tx_head < ep->tx_tail) {
		unsigned n = ep->tx_tail - ep->tx_head, call;
		int r;

		if (n > UDPIO_BATCH)
			n = UDPIO_BATCH;
		/* Testing: the kernel takes fewer than asked, as a short sendmmsg does. */
		call = ep->fault_max > 0 && n > (unsigned)ep->fault_max ? (unsigned)ep->fault_max : n;
		if (ep->fault_eagain > 0 && call > (unsigned)ep->fault_eagain)
			call = ep->fault_eagain;
		for (unsigned i = 0; i < n; i++) {
			struct udpio_tx *t = &ep->tx[ep->tx_head + i];

			memset(&m[i], 0, sizeof(m[i]));
			m[i].msg_hdr.msg_name = &t->to;
			m[i].msg_hdr.msg_namelen = t->tolen;
			m[i].msg_hdr.msg_iov = &t->iov;
			m[i].msg_hdr.msg_iovlen = 1;
		}
		if (ep->fault_eagain == 0) {
			ep->fault_eagain = -1;
			r = -1;
			errno = EAGAIN;
		} else {
			r = sendmmsg(ep->fd, m, call, MSG_DONTWAIT);
		}
		ep->stats[ST_TX_CALLS]++;
		if (r < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				ep->stats[ST_TX_EAGAIN]++;
				break;
			}
			/* The first datagram was refused: it is lost, as dgram's send error is. */
			ep->stats[ST_TX_ERRORS]++;
			ep->stats[ST_TX_LAST_ERRNO] = errno;
			tx_release(&ep->tx[ep->tx_head]);
			ep->tx_head++;
			continue;
		}
		if ((unsigned)r < n)
			ep->stats[ST_TX_SHORT]++;
		ep->stats[ST_TX_DGRAMS] += r;
		if (ep->fault_eagain > 0)
			ep->fault_eagain = ep->fault_eagain > r ? ep->fault_eagain - r : 0;
		for (int i = 0; i < r; i++)
			tx_release(&ep->tx[ep->tx_head + i]);
		ep->tx_head += r;
	}
	if (ep->tx_head == ep->tx_tail) {
		ep->tx_head = ep->tx_tail = 0;
		if (ep->waiting) {
			ep->waiting = false;
			ep_poll_update(ep);
		}
		return 0;
	}
	if (tx_own(ep) != 0) {
		/* No memory to keep them: they are lost (counted as errors). */
		for (unsigned i = ep->tx_head; i < ep->tx_tail; i++) {
			tx_release(&ep->tx[i]);
			ep->stats[ST_TX_ERRORS]++;
		}
		ep->stats[ST_TX_LAST_ERRNO] = ENOMEM;
		ep->tx_head = ep->tx_tail = 0;
		return 0;
	}
	if (!ep->waiting) {
		ep->waiting = true;
		ep_poll_update(ep);
	}
	return ep->tx_tail - ep->tx_head;
}

/* --- receive -------------------------------------------------------------------------------- */

static void rx_deliver(struct udpio_ep *ep, struct udpio_env *d, int n)
{
	napi_env env = ep->env;
	napi_handle_scope scope;
	napi_value buf, cb, recv, argv[2], ret;
	size_t total = 0, off = 0;
	char *data;
	napi_status st;

	for (int i = 0; i < n; i++)
		total += d->msgs[i].msg_len;
	napi_open_handle_scope(env, &scope);
	if (d->area_ref) {
		data = NULL;
		if (napi_get_reference_value(env, d->area_ref, &buf) != napi_ok || !buf)
			goto out;
	} else if (napi_create_buffer(env, total ? total : 1, (void **)&data, &buf) != napi_ok)
		goto out;
	for (int i = 0; i < n; i++) {
		int32_t *w = d->meta + (size_t)i * UDPIO_META_WORDS;
		const struct sockaddr_storage *a = &d->from[i];
		unsigned len = d->msgs[i].msg_len;

		if (data) {
			memcpy(data + off, d->iov[i].iov_base, len);
		} else {
			off = (size_t)i * UDPIO_SLOT;
		}
		w[0] = (int32_t)off;
		w[1] = (int32_t)len;
		memset(&w[4], 0, 16);
		if (a->ss_family == AF_INET) {
			const struct sockaddr_in *s = (const void *)a;

			w[2] = ntohs(s->sin_port);
			w[3] = 0;
			memcpy(&w[4], &s->sin_addr, 4);
		} else {
			const struct sockaddr_in6 *s = (const void *)a;

			w[2] = ntohs(s->sin6_port);
			w[3] = (int32_t)s->sin6_scope_id;
			memcpy(&w[4], &s->sin6_addr, 16);
		}
		off += len;
	}
	ep->stats[ST_RX_CALLS]++;
	ep->stats[ST_RX_DGRAMS] += n;
	napi_get_reference_value(env, ep->on_batch, &cb);
	napi_get_global(env, &recv);
	argv[0] = buf;
	argv[1] = int_value(env, n);
	st = napi_make_callback(env, ep->actx, recv, cb, 2, argv, &ret);
	if (st == napi_pending_exception) {
		napi_value e;

		napi_get_and_clear_last_exception(env, &e);
		napi_fatal_exception(env, e);
	}
out:
	napi_close_handle_scope(env, scope);
}

static void rx_drain(struct udpio_ep *ep)
{
	struct udpio_env *d = env_data(ep->env);

	if (!d || !d->meta || d->meta_words < UDPIO_BATCH * UDPIO_META_WORDS)
		return;
	if (!d->area) {
		d->area = malloc((size_t)UDPIO_BATCH * UDPIO_SLOT);
		if (!d->area)
			return;
	}
	for (int round = 0; round < UDPIO_RX_ROUNDS && !ep->closed; round++) {
		int n;

		for (int i = 0; i < UDPIO_BATCH; i++) {
			d->iov[i].iov_base = d->area + (size_t)i * UDPIO_SLOT;
			d->iov[i].iov_len = UDPIO_SLOT;
			memset(&d->msgs[i].msg_hdr, 0, sizeof(d->msgs[i].msg_hdr));
			d->msgs[i].msg_hdr.msg_iov = &d->iov[i];
			d->msgs[i].msg_hdr.msg_iovlen = 1;
			d->msgs[i].msg_hdr.msg_name = &d->from[i];
			d->msgs[i].msg_hdr.msg_namelen = sizeof(d->from[i]);
		}
		n = recvmmsg(ep->fd, d->msgs, UDPIO_BATCH, MSG_DONTWAIT, NULL);
		if (n <= 0) {
			if (n < 0 && errno == EINTR)
				continue;
			return;
		}
		rx_deliver(ep, d, n);
		if (n < UDPIO_BATCH)
			return;
	}
}

static void on_poll(uv_poll_t *h, int status, int events)
{
	struct udpio_ep *ep = h->data;

	if (ep->closed)
		return;
	if (status < 0) {
		/* An error on the descriptor: datagram sockets report ICMP errors this way; read past it. */
		events = UV_READABLE | (ep->waiting ? UV_WRITABLE : 0);
	}
	if (events & UV_WRITABLE)
		tx_flush(ep);
	if ((events & UV_READABLE) && !ep->closed)
		rx_drain(ep);
}

/* --- lifetime ------------------------------------------------------------------------------- */

static void ep_unref(struct udpio_ep *ep)
{
	if (--ep->refs > 0)
		return;
	free(ep->tx);
	free(ep);
}

static void on_closed(uv_handle_t *h)
{
	struct udpio_ep *ep = h->data;

	close(ep->fd);
	if (ep->cleanup)
		napi_remove_async_cleanup_hook(ep->cleanup);
	ep->cleanup = NULL;
	ep_unref(ep);
}

/* Stop polling and close the socket; the queue must be empty. */
static void ep_shut(struct udpio_ep *ep)
{
	for (unsigned i = ep->tx_head; i < ep->tx_tail; i++)
		tx_release(&ep->tx[i]);
	ep->tx_head = ep->tx_tail = 0;
	ep->closed = true;
	uv_poll_stop(&ep->poll);
	uv_close((uv_handle_t *)&ep->poll, on_closed);
}

/* Close: what the kernel can take now is sent; the rest of the queue is dropped. */
static void ep_close(struct udpio_ep *ep)
{
	if (ep->closed)
		return;
	tx_flush(ep);
	if (ep->on_batch)
		napi_delete_reference(ep->env, ep->on_batch);
	ep->on_batch = NULL;
	if (ep->actx)
		napi_async_destroy(ep->env, ep->actx);
	ep->actx = NULL;
	ep_shut(ep);
}

/*
 * The environment ends (the process or a worker exits): close the socket without N-API calls;
 * the environment waits for the close callback (which removes this hook) before this module
 * may be unloaded.
 */
static void ep_teardown(napi_async_cleanup_hook_handle handle, void *arg)
{
	struct udpio_ep *ep = arg;

	ep->env_gone = true;
	if (!ep->closed) {
		tx_flush(ep);
		ep_shut(ep);
	}
}

static void ep_finalize(napi_env env, void *data, void *hint)
{
	struct udpio_ep *ep = data;

	if (!ep->env_gone)
		ep_close(ep);
	ep_unref(ep);
}

/* --- JavaScript entry points ---------------------------------------------------------------- */

static int sockaddr_from(napi_env env, napi_value v, struct sockaddr_storage *ss, socklen_t *len)
{
	void *p;
	size_t n;
	bool is;

	if (napi_is_buffer(env, v, &is) != napi_ok || !is || napi_get_buffer_info(env, v, &p, &n) != napi_ok)
		return -EINVAL;
	if (n == sizeof(struct sockaddr_in) && ((struct sockaddr *)p)->sa_family == AF_INET) {
	} else if (n == sizeof(struct sockaddr_in6) && ((struct sockaddr *)p)->sa_family == AF_INET6) {
	} else {
		return -EINVAL;
	}
	memcpy(ss, p, n);
	*len = (socklen_t)n;
	return 0;
}

static napi_value udp_open(napi_env env, napi_callback_info info)
{
	size_t argc = 5;
	napi_value argv[5], ret, name;
	int32_t family = 0, rcvbuf = 0, sndbuf = 0;
	struct sockaddr_storage ss;
	socklen_t sslen;
	napi_valuetype t;
	struct udpio_ep *ep;
	uv_loop_t *loop;
	int fd, one = 1;

	if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 5 ||
	    napi_get_value_int32(env, argv[0], &family) != napi_ok || (family != 4 && family != 6) ||
	    sockaddr_from(env, argv[1], &ss, &sslen) != 0 ||
	    napi_get_value_int32(env, argv[2], &rcvbuf) != napi_ok ||
	    napi_get_value_int32(env, argv[3], &sndbuf) != napi_ok ||
	    napi_typeof(env, argv[4], &t) != napi_ok || t != napi_function ||
	    ss.ss_family != (family == 4 ? AF_INET : AF_INET6) ||
	    napi_get_uv_event_loop(env, &loop) != napi_ok)
		return int_value(env, -EINVAL);
	fd = socket(family == 4 ? AF_INET : AF_INET6, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return int_value(env, -errno);
	/* What Node's dgram sets for reuseAddr, ipv6Only, recvBufferSize and sendBufferSize. */
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
	    (family == 6 && setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one))) ||
	    (rcvbuf > 0 && setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf))) ||
	    (sndbuf > 0 && setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf))) ||
	    bind(fd, (struct sockaddr *)&ss, sslen)) {
		int e = errno;

		close(fd);
		return int_value(env, -e);
	}
	ep = calloc(1, sizeof(*ep));
	if (!ep) {
		close(fd);
		return int_value(env, -ENOMEM);
	}
	ep->fd = fd;
	ep->env = env;
	ep->refs = 1; /* the uv handle; the JavaScript handle takes the second */
	ep->fault_eagain = -1;
	ep->poll.data = ep;
	if (uv_poll_init_socket(loop, &ep->poll, fd) != 0) {
		close(fd);
		free(ep);
		return int_value(env, -ENOMEM);
	}
	napi_create_reference(env, argv[4], 1, &ep->on_batch);
	napi_create_string_utf8(env, "rdmacm:roce-udp", NAPI_AUTO_LENGTH, &name);
	napi_async_init(env, NULL, name, &ep->actx);
	ep->events = UV_READABLE;
	uv_poll_start(&ep->poll, UV_READABLE, on_poll);
	napi_add_async_cleanup_hook(env, ep_teardown, ep, &ep->cleanup);
	if (napi_create_external(env, ep, ep_finalize, NULL, &ret) != napi_ok) {
		ep_close(ep);
		return int_value(env, -ENOMEM);
	}
	ep->refs++;
	return ret;
}

static napi_value udp_send(napi_env env, napi_callback_info info)
{
	size_t argc = 5, n;
	napi_value argv[5];
	struct udpio_ep *ep;
	struct udpio_tx *t;
	uint32_t off, len;
	void *p;
	bool is;
	int r;

	if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 5 || !(ep = ep_of(env, argv[0])))
		return int_value(env, -EINVAL);
	if (ep->closed)
		return int_value(env, -EBADF);
	if (napi_is_buffer(env, argv[1], &is) != napi_ok || !is || napi_get_buffer_info(env, argv[1], &p, &n) != napi_ok ||
	    napi_get_value_uint32(env, argv[2], &off) != napi_ok || napi_get_value_uint32(env, argv[3], &len) != napi_ok ||
	    (size_t)off + len > n)
		return int_value(env, -EINVAL);
	if ((r = tx_reserve(ep)) != 0)
		return int_value(env, r);
	t = &ep->tx[ep->tx_tail];
	if (sockaddr_from(env, argv[4], &t->to, &t->tolen) != 0)
		return int_value(env, -EINVAL);
	t->iov.iov_base = (char *)p + off;
	t->iov.iov_len = len;
	t->owned = false;
	if (ep->waiting) {
		/* The queue already waits for writability: keep a copy, the caller's buffer goes. */
		void *c = malloc(len ? len : 1);

		if (!c)
			return int_value(env, -ENOMEM);
		memcpy(c, t->iov.iov_base, len);
		t->iov.iov_base = c;
		t->owned = true;
	}
	ep->tx_tail++;
	return int_value(env, (int32_t)(ep->tx_tail - ep->tx_head));
}

static napi_value udp_flush(napi_env env, napi_callback_info info)
{
	size_t argc = 1;
	napi_value argv[1];
	struct udpio_ep *ep;

	if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 1 || !(ep = ep_of(env, argv[0])))
		return int_value(env, -EINVAL);
	if (ep->closed)
		return int_value(env, -EBADF);
	return int_value(env, (int32_t)tx_flush(ep));
}

static napi_value udp_setsockopt(napi_env env, napi_callback_info info)
{
	size_t argc = 4, n = 0;
	napi_value argv[4];
	struct udpio_ep *ep;
	int32_t level, name, iv;
	void *p = NULL;
	bool is = false;
	int r;

	if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 4 || !(ep = ep_of(env, argv[0])) ||
	    napi_get_value_int32(env, argv[1], &level) != napi_ok || napi_get_value_int32(env, argv[2], &name) != napi_ok)
		return int_value(env, -EINVAL);
	if (ep->closed)
		return int_value(env, -EBADF);
	napi_is_typedarray(env, argv[3], &is);
	if (is) {
		napi_typedarray_type tt;
		napi_value ab;
		size_t bo;

		if (napi_get_typedarray_info(env, argv[3], &tt, &n, &p, &ab, &bo) != napi_ok || tt != napi_uint8_array)
			return int_value(env, -EINVAL);
		r = setsockopt(ep->fd, level, name, p, (socklen_t)n);
	} else {
		if (napi_get_value_int32(env, argv[3], &iv) != napi_ok)
			return int_value(env, -EINVAL);
		r = setsockopt(ep->fd, level, name, &iv, sizeof(iv));
	}
	return int_value(env, r ? -errno : 0);
}

static napi_value udp_ref(napi_env env, napi_callback_info info)
{
	size_t argc = 2;
	napi_value argv[2];
	struct udpio_ep *ep;
	bool on = false;

	if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 2 || !(ep = ep_of(env, argv[0])) ||
	    napi_get_value_bool(env, argv[1], &on) != napi_ok)
		return int_value(env, -EINVAL);
	if (ep->closed)
		return int_value(env, -EBADF);
	if (on)
		uv_ref((uv_handle_t *)&ep->poll);
	else
		uv_unref((uv_handle_t *)&ep->poll);
	return int_value(env, 0);
}

static napi_value udp_close(napi_env env, napi_callback_info info)
{
	size_t argc = 1;
	napi_value argv[1];
	struct udpio_ep *ep;

	if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 1 || !(ep = ep_of(env, argv[0])))
		return int_value(env, -EINVAL);
	ep_close(ep);
	return int_value(env, 0);
}

static napi_value udp_fd(napi_env env, napi_callback_info info)
{
	size_t argc = 1;
	napi_value argv[1];
	struct udpio_ep *ep;

	if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 1 || !(ep = ep_of(env, argv[0])))
		return int_value(env, -EINVAL);
	return int_value(env, ep->closed ? -EBADF : ep->fd);
}

static napi_value udp_stats(napi_env env, napi_callback_info info)
{
	size_t argc = 1;
	napi_value argv[1], ab, ret;
	struct udpio_ep *ep;
	void *p;

	if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 1 || !(ep = ep_of(env, argv[0])))
		return int_value(env, -EINVAL);
	if (napi_create_arraybuffer(env, sizeof(ep->stats) + sizeof(double), &p, &ab) != napi_ok)
		return NULL;
	memcpy(p, ep->stats, sizeof(ep->stats));
	((double *)p)[ST_COUNT] = ep->tx_tail - ep->tx_head;
	napi_create_typedarray(env, napi_float64_array, ST_COUNT + 1, ab, 0, &ret);
	return ret;
}

static napi_value udp_fault(napi_env env, napi_callback_info info)
{
	size_t argc = 3;
	napi_value argv[3];
	struct udpio_ep *ep;
	int32_t max, eagain;

	if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 3 || !(ep = ep_of(env, argv[0])) ||
	    napi_get_value_int32(env, argv[1], &max) != napi_ok || napi_get_value_int32(env, argv[2], &eagain) != napi_ok)
		return int_value(env, -EINVAL);
	ep->fault_max = max;
	ep->fault_eagain = eagain;
	return int_value(env, 0);
}

static napi_value udp_addr(napi_env env, napi_callback_info info)
{
	size_t argc = 3, len;
	napi_value argv[3], ret;
	int32_t family, port;
	char text[INET6_ADDRSTRLEN + IF_NAMESIZE + 2], *zone;
	void *p;

	if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 3 ||
	    napi_get_value_int32(env, argv[0], &family) != napi_ok ||
	    napi_get_value_string_latin1(env, argv[1], text, sizeof(text), &len) != napi_ok ||
	    napi_get_value_int32(env, argv[2], &port) != napi_ok || port < 0 || port > 65535)
		return int_value(env, -EINVAL);
	if (family == 4) {
		struct sockaddr_in s = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };

		if (inet_pton(AF_INET, text, &s.sin_addr) != 1)
			return int_value(env, -EINVAL);
		napi_create_buffer_copy(env, sizeof(s), &s, &p, &ret);
		return ret;
	}
	if (family == 6) {
		struct sockaddr_in6 s = { .sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port) };

		zone = strchr(text, '%');
		if (zone) {
			*zone++ = 0;
			s.sin6_scope_id = if_nametoindex(zone);
			if (!s.sin6_scope_id)
				s.sin6_scope_id = (uint32_t)strtoul(zone, NULL, 10);
		}
		if (inet_pton(AF_INET6, text, &s.sin6_addr) != 1)
			return int_value(env, -EINVAL);
		napi_create_buffer_copy(env, sizeof(s), &s, &p, &ret);
		return ret;
	}
	return int_value(env, -EINVAL);
}

static napi_value udp_if_name(napi_env env, napi_callback_info info)
{
	size_t argc = 1;
	napi_value argv[1], ret;
	uint32_t idx;
	char name[IF_NAMESIZE];

	if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 1 ||
	    napi_get_value_uint32(env, argv[0], &idx) != napi_ok || !if_indextoname(idx, name))
		return int_value(env, -ENODEV);
	napi_create_string_latin1(env, name, NAPI_AUTO_LENGTH, &ret);
	return ret;
}

static napi_value udp_if_index(napi_env env, napi_callback_info info)
{
	size_t argc = 1, len;
	napi_value argv[1];
	char name[IF_NAMESIZE + 1];
	unsigned idx;

	if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 1 ||
	    napi_get_value_string_latin1(env, argv[0], name, sizeof(name), &len) != napi_ok)
		return int_value(env, -EINVAL);
	idx = if_nametoindex(name);
	return int_value(env, idx ? (int32_t)idx : -ENODEV);
}

static void env_finalize(napi_env env, void *data, void *hint)
{
	struct udpio_env *d = data;

	if (!d->area_ref)
		free(d->area);
	free(d);
}

static napi_value udp_setup(napi_env env, napi_callback_info info)
{
	size_t argc = 2, n, an = 0;
	napi_value argv[2], ab;
	void *area = NULL;
	napi_typedarray_type tt;
	struct udpio_env *d;
	size_t bo;
	void *p;

	if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 1 ||
	    napi_get_typedarray_info(env, argv[0], &tt, &n, &p, &ab, &bo) != napi_ok || tt != napi_int32_array ||
	    n < UDPIO_BATCH * UDPIO_META_WORDS)
		return int_value(env, -EINVAL);
	if (argc >= 2) {
		napi_valuetype vt;

		if (napi_typeof(env, argv[1], &vt) != napi_ok)
			return int_value(env, -EINVAL);
		if (vt != napi_undefined &&
		    (napi_get_typedarray_info(env, argv[1], &tt, &an, &area, &ab, &bo) != napi_ok || tt != napi_uint8_array ||
		     an < (size_t)UDPIO_BATCH * UDPIO_SLOT))
			return int_value(env, -EINVAL);
	}
	d = env_data(env);
	if (!d) {
		d = calloc(1, sizeof(*d));
		if (!d || napi_set_instance_data(env, d, env_finalize, NULL) != napi_ok) {
			free(d);
			return int_value(env, -ENOMEM);
		}
	}
	if (d->meta_ref)
		napi_delete_reference(env, d->meta_ref);
	napi_create_reference(env, argv[0], 1, &d->meta_ref);
	d->meta = p;
	d->meta_words = n;
	if (area) {
		/* The area is replaced between rounds only (JavaScript runs inside one, never across). */
		if (d->area_ref)
			napi_delete_reference(env, d->area_ref);
		else
			free(d->area);
		napi_create_reference(env, argv[1], 1, &d->area_ref);
		d->area = area;
	}
	return int_value(env, UDPIO_BATCH);
}

struct udpio_const {
	const char *name;
	int value;
};

static const struct udpio_const consts[] = {
	{ "BATCH", UDPIO_BATCH },
	{ "META_WORDS", UDPIO_META_WORDS },
	{ "SLOT", UDPIO_SLOT },
	{ "SOL_SOCKET", SOL_SOCKET },
	{ "IPPROTO_IP", IPPROTO_IP },
	{ "IPPROTO_IPV6", IPPROTO_IPV6 },
	{ "IPPROTO_UDP", IPPROTO_UDP },
	{ "IP_TTL", IP_TTL },
	{ "IP_MULTICAST_IF", IP_MULTICAST_IF },
	{ "IP_MULTICAST_TTL", IP_MULTICAST_TTL },
	{ "IP_MULTICAST_LOOP", IP_MULTICAST_LOOP },
	{ "IP_ADD_MEMBERSHIP", IP_ADD_MEMBERSHIP },
	{ "IP_MTU_DISCOVER", IP_MTU_DISCOVER },
	{ "IPV6_UNICAST_HOPS", IPV6_UNICAST_HOPS },
	{ "IPV6_MULTICAST_IF", IPV6_MULTICAST_IF },
	{ "IPV6_MULTICAST_HOPS", IPV6_MULTICAST_HOPS },
	{ "IPV6_MULTICAST_LOOP", IPV6_MULTICAST_LOOP },
	{ "IPV6_JOIN_GROUP", IPV6_JOIN_GROUP },
	{ "SIZEOF_IPV6_MREQ", sizeof(struct ipv6_mreq) },
	{ "ST_RX_CALLS", ST_RX_CALLS },
	{ "ST_RX_DGRAMS", ST_RX_DGRAMS },
	{ "ST_TX_CALLS", ST_TX_CALLS },
	{ "ST_TX_DGRAMS", ST_TX_DGRAMS },
	{ "ST_TX_SHORT", ST_TX_SHORT },
	{ "ST_TX_EAGAIN", ST_TX_EAGAIN },
	{ "ST_TX_ERRORS", ST_TX_ERRORS },
	{ "ST_TX_LAST_ERRNO", ST_TX_LAST_ERRNO },
	{ "ST_TX_QUEUED", ST_COUNT },
};

int udpio_init(napi_env env, napi_value exports)
{
	static const struct {
		const char *name;
		napi_callback fn;
	} fns[] = {
		{ "udpOpen", udp_open },	 { "udpSend", udp_send },   { "udpFlush", udp_flush },
		{ "udpSetsockopt", udp_setsockopt }, { "udpRef", udp_ref }, { "udpClose", udp_close },
		{ "udpFd", udp_fd },		 { "udpStats", udp_stats }, { "udpFault", udp_fault },
		{ "udpAddr", udp_addr },	 { "udpSetup", udp_setup }, { "udpIfName", udp_if_name },
		{ "udpIfIndex", udp_if_index },
	};
	napi_value fn, c, v;

	for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]); i++) {
		if (napi_create_function(env, fns[i].name, NAPI_AUTO_LENGTH, fns[i].fn, NULL, &fn) != napi_ok ||
		    napi_set_named_property(env, exports, fns[i].name, fn) != napi_ok)
			return -1;
	}
	if (napi_create_object(env, &c) != napi_ok)
		return -1;
	for (size_t i = 0; i < sizeof(consts) / sizeof(consts[0]); i++) {
		napi_create_int32(env, consts[i].value, &v);
		napi_set_named_property(env, c, consts[i].name, v);
	}
	return napi_set_named_property(env, exports, "udpConst", c) == napi_ok ? 0 : -1;
}
