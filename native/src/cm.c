/*
 * rdmacm native addon: librdmacm. One event channel per process, its fd watched by libuv; each
 * event is copied into a JS object, acknowledged at once (rdma_ack_cm_event) and handed to the
 * JS dispatcher, which routes it to its CmId by the id's key (the cm_id's `context`).
 */
#include "addon.h"
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

static napi_value ud_param(napi_env env, const struct rdma_ud_param *ud, bool mc)
{
	napi_value o, pd;
	void *d;
	napi_create_object(env, &o);
	if (!mc && ud->private_data && ud->private_data_len)
		napi_create_buffer_copy(env, ud->private_data_len, ud->private_data, &d, &pd);
	else
		napi_create_buffer(env, 0, &d, &pd);
	set_val(env, o, "privateData", pd);
	set_val(env, o, "ahAttr", ah_attr_value(env, &ud->ah_attr));
	set_num(env, o, "qpNum", ud->qp_num);
	set_num(env, o, "qkey", ud->qkey);
	return o;
}

static napi_value conn_param(napi_env env, const struct rdma_conn_param *c)
{
	napi_value o, pd;
	void *d;
	napi_create_object(env, &o);
	if (c->private_data && c->private_data_len)
		napi_create_buffer_copy(env, c->private_data_len, c->private_data, &d, &pd);
	else
		napi_create_buffer(env, 0, &d, &pd);
	set_val(env, o, "privateData", pd);
	set_num(env, o, "responderResources", c->responder_resources);
	set_num(env, o, "initiatorDepth", c->initiator_depth);
	set_num(env, o, "flowControl", c->flow_control);
	set_num(env, o, "retryCount", c->retry_count);
	set_num(env, o, "rnrRetryCount", c->rnr_retry_count);
	set_num(env, o, "srq", c->srq);
	set_num(env, o, "qpNum", c->qp_num);
	return o;
}

static double key_of(struct rdma_cm_id *id)
{
	return id ? (double)(intptr_t)id->context : -1;
}

/* Copy one event into a JS object: { key, event, status, listenKey, newId, conn, ud, mcKey }. */
static napi_value event_value(napi_env env, struct rdma_cm_event *ev)
{
	napi_value o;
	bool mc = ev->event == RDMA_CM_EVENT_MULTICAST_JOIN || ev->event == RDMA_CM_EVENT_MULTICAST_ERROR;
	bool ud = mc || ((ev->event == RDMA_CM_EVENT_CONNECT_REQUEST || ev->event == RDMA_CM_EVENT_ESTABLISHED) &&
			 ev->id && ev->id->qp_type == IBV_QPT_UD);
	napi_create_object(env, &o);
	set_num(env, o, "event", ev->event);
	set_num(env, o, "status", ev->status);
	if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST) {
		/* A new id: it inherited the listener's context; the JS side gives it its own key. */
		struct cmid_obj *c = calloc(1, sizeof(*c));
		set_num(env, o, "key", key_of(ev->listen_id));
		set_num(env, o, "listenKey", key_of(ev->listen_id));
		if (c) {
			ev->id->context = (void *)(intptr_t)-1;
			set_val(env, o, "newId", wrap_obj(env, &c->h, T_CMID, ev->id));
		}
	} else {
		set_num(env, o, "key", key_of(ev->id));
		set_num(env, o, "listenKey", -1);
	}
	if (mc) {
		set_num(env, o, "mcKey", (double)(intptr_t)ev->param.ud.private_data);
		set_val(env, o, "ud", ud_param(env, &ev->param.ud, true));
	} else if (ud) {
		set_val(env, o, "ud", ud_param(env, &ev->param.ud, false));
	} else {
		set_val(env, o, "conn", conn_param(env, &ev->param.conn));
	}
	return o;
}

static void cm_cb(uv_poll_t *p, int status, int events)
{
	struct addon_state *st = p->data;
	struct rdma_cm_event *ev;
	(void)events;
	if (!st || status < 0)
		return;
	while (st->cm_chan && rdma_get_cm_event(st->cm_chan, &ev) == 0) {
		napi_handle_scope scope;
		napi_open_handle_scope(st->env, &scope);
		napi_value v = event_value(st->env, ev);
		rdma_ack_cm_event(ev);
		call_js(st->env, st->cm_event_cb, 1, &v);
		napi_close_handle_scope(st->env, scope);
	}
}

/* cmInit() -> 0 | -errno: the process's event channel, watched (unref'd). */
static napi_value cm_init(napi_env env, napi_callback_info info)
{
	struct addon_state *st = state_of(env);
	(void)info;
	if (!st)
		return neg_errno(env, EIO);
	if (st->cm_chan)
		return num(env, 0);
	if (st->cm_tried)
		return neg_errno(env, st->cm_init_err);
	st->cm_tried = true;
	st->cm_chan = rdma_create_event_channel();
	if (!st->cm_chan) {
		st->cm_init_err = errno ? errno : ENODEV;
		return neg_errno(env, st->cm_init_err);
	}
	int r = poll_start(env, &st->cm_poll, st->cm_chan->fd, cm_cb, st);
	if (r) {
		rdma_destroy_event_channel(st->cm_chan);
		st->cm_chan = NULL;
		st->cm_init_err = r;
		return neg_errno(env, r);
	}
	return num(env, 0);
}

/* cmRef(delta) -> refs: while > 0 the CM channel keeps the event loop alive. */
static napi_value cm_ref(napi_env env, napi_callback_info info)
{
	ARGS(1);
	struct addon_state *st = state_of(env);
	int32_t d;
	if (!st || !st->cm_poll || !arg_i32(env, argv[0], &d))
		return neg_errno(env, EINVAL);
	int before = st->cm_refs;
	st->cm_refs += d;
	if (st->cm_refs < 0)
		st->cm_refs = 0;
	if (before == 0 && st->cm_refs > 0)
		uv_ref((uv_handle_t *)st->cm_poll);
	else if (before > 0 && st->cm_refs == 0)
		uv_unref((uv_handle_t *)st->cm_poll);
	return num(env, st->cm_refs);
}

static struct rdma_cm_id *cmid(napi_env env, napi_value v, struct cmid_obj **out)
{
	struct cmid_obj *c = get_obj(env, v, T_CMID);
	if (out)
		*out = c;
	return c ? c->h.ptr : NULL;
}

/* cmCreateId(key, portSpace) -> id | -errno */
static napi_value cm_create_id(napi_env env, napi_callback_info info)
{
	ARGS(2);
	struct addon_state *st = state_of(env);
	int32_t key;
	uint32_t ps;
	if (!st || !arg_i32(env, argv[0], &key) || !arg_u32(env, argv[1], &ps))
		return neg_errno(env, EINVAL);
	if (!st->cm_chan)
		return neg_errno(env, ENODEV);
	struct cmid_obj *c = calloc(1, sizeof(*c));
	if (!c)
		return neg_errno(env, ENOMEM);
	struct rdma_cm_id *id;
	if (rdma_create_id(st->cm_chan, &id, (void *)(intptr_t)key, (enum rdma_port_space)ps)) {
		int e = errno;
		free(c);
		return neg_errno(env, e ? e : EINVAL);
	}
	return wrap_obj(env, &c->h, T_CMID, id);
}

/* cmSetKey(id, key) -> 0 | -errno */
static napi_value cm_set_key(napi_env env, napi_callback_info info)
{
	ARGS(2);
	struct rdma_cm_id *id = cmid(env, argv[0], NULL);
	int32_t key;
	if (!id || !arg_i32(env, argv[1], &key))
		return neg_errno(env, EINVAL);
	id->context = (void *)(intptr_t)key;
	return num(env, 0);
}

/* Parse (address string, port, scope id) into a sockaddr. */
static bool sockaddr_from(napi_env env, napi_value a, napi_value p, napi_value sc, struct sockaddr_storage *ss)
{
	char buf[64];
	size_t n;
	uint32_t port, scope;
	memset(ss, 0, sizeof(*ss));
	if (napi_get_value_string_utf8(env, a, buf, sizeof buf, &n) != napi_ok || n >= sizeof buf - 1)
		return false;
	if (!arg_u32(env, p, &port) || port > 65535 || !arg_u32(env, sc, &scope))
		return false;
	struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
	if (inet_pton(AF_INET, buf, &s4->sin_addr) == 1) {
		s4->sin_family = AF_INET;
		s4->sin_port = htons((uint16_t)port);
		return true;
	}
	if (inet_pton(AF_INET6, buf, &s6->sin6_addr) == 1) {
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons((uint16_t)port);
		s6->sin6_scope_id = scope;
		return true;
	}
	return false;
}

#define CM_RET(call)                                                              \
	do {                                                                          \
		if (call)                                                                 \
			return neg_errno(env, errno ? errno : EINVAL);                        \
		return num(env, 0);                                                       \
	} while (0)

/*
 * cmCreateIdBound(key, portSpace, qpType, address, port, scope) -> id | -errno: an id of QP type
 * `qpType` bound to the address, for what rdma_create_id cannot make (its RDMA_PS_IB ids are RC):
 * librdmacm's rdma_create_ep with RAI_PASSIVE makes the id with the type (rdma_create_id2) and
 * binds it; rdma_migrate_id then moves it from the synchronous channel rdma_create_ep gave it to
 * the process's channel, where its events arrive as every other id's.
 */
static napi_value cm_create_id_bound(napi_env env, napi_callback_info info)
{
	ARGS(6);
	struct addon_state *st = state_of(env);
	int32_t key;
	uint32_t ps, qpt;
	struct sockaddr_storage ss;
	if (!st || !arg_i32(env, argv[0], &key) || !arg_u32(env, argv[1], &ps) || !arg_u32(env, argv[2], &qpt) ||
	    !sockaddr_from(env, argv[3], argv[4], argv[5], &ss))
		return neg_errno(env, EINVAL);
	if (!st->cm_chan)
		return neg_errno(env, ENODEV);
	struct cmid_obj *c = calloc(1, sizeof(*c));
	if (!c)
		return neg_errno(env, ENOMEM);
	struct rdma_addrinfo ai;
	memset(&ai, 0, sizeof ai);
	ai.ai_flags = RAI_PASSIVE;
	ai.ai_family = ss.ss_family;
	ai.ai_qp_type = (int)qpt;
	ai.ai_port_space = (int)ps;
	ai.ai_src_addr = (struct sockaddr *)&ss;
	ai.ai_src_len = ss.ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
	struct rdma_cm_id *id = NULL;
	errno = 0;
	if (rdma_create_ep(&id, &ai, NULL, NULL)) {
		int e = errno;
		free(c);
		return neg_errno(env, e ? e : EINVAL);
	}
	if (rdma_migrate_id(id, st->cm_chan)) {
		int e = errno;
		rdma_destroy_ep(id);
		free(c);
		return neg_errno(env, e ? e : EINVAL);
	}
	id->context = (void *)(intptr_t)key;
	return wrap_obj(env, &c->h, T_CMID, id);
}

/* cmBind(id, address, port, scope) */
static napi_value cm_bind(napi_env env, napi_callback_info info)
{
	ARGS(4);
	struct rdma_cm_id *id = cmid(env, argv[0], NULL);
	struct sockaddr_storage ss;
	if (!id || !sockaddr_from(env, argv[1], argv[2], argv[3], &ss))
		return neg_errno(env, EINVAL);
	errno = 0;
	CM_RET(rdma_bind_addr(id, (struct sockaddr *)&ss));
}

/* cmResolveAddr(id, src|null, srcPort, srcScope, dst, dstPort, dstScope, timeoutMs) */
static napi_value cm_resolve_addr(napi_env env, napi_callback_info info)
{
	ARGS(8);
	struct rdma_cm_id *id = cmid(env, argv[0], NULL);
	struct sockaddr_storage src, dst;
	uint32_t t;
	bool has_src = !is_nullish(env, argv[1]);
	if (!id || (has_src && !sockaddr_from(env, argv[1], argv[2], argv[3], &src)) ||
	    !sockaddr_from(env, argv[4], argv[5], argv[6], &dst) || !arg_u32(env, argv[7], &t) || t > 0x7fffffff)
		return neg_errno(env, EINVAL);
	errno = 0;
	CM_RET(rdma_resolve_addr(id, has_src ? (struct sockaddr *)&src : NULL, (struct sockaddr *)&dst, (int)t));
}

static napi_value cm_resolve_route(napi_env env, napi_callback_info info)
{
	ARGS(2);
	struct rdma_cm_id *id = cmid(env, argv[0], NULL);
	uint32_t t;
	if (!id || !arg_u32(env, argv[1], &t) || t > 0x7fffffff)
		return neg_errno(env, EINVAL);
	errno = 0;
	CM_RET(rdma_resolve_route(id, (int)t));
}

static napi_value cm_listen(napi_env env, napi_callback_info info)
{
	ARGS(2);
	struct rdma_cm_id *id = cmid(env, argv[0], NULL);
	int32_t backlog;
	if (!id || !arg_i32(env, argv[1], &backlog))
		return neg_errno(env, EINVAL);
	errno = 0;
	CM_RET(rdma_listen(id, backlog));
}

/*
 * Connection parameters from argv[0..8]: (privateData|null, responderResources, initiatorDepth,
 * flowControl, retryCount, rnrRetryCount, srq, qpNum, hasQpNum).
 */
static bool conn_from(napi_env env, napi_value *argv, struct rdma_conn_param *c)
{
	uint32_t v[7];
	void *d = NULL;
	size_t n = 0;
	memset(c, 0, sizeof(*c));
	if (!is_nullish(env, argv[0])) {
		if (!bytes_of(env, argv[0], &d, &n) || n > 255)
			return false;
	}
	for (int i = 0; i < 7; i++)
		if (!arg_u32(env, argv[1 + i], &v[i]))
			return false;
	c->private_data = n ? d : NULL;
	c->private_data_len = (uint8_t)n;
	c->responder_resources = (uint8_t)v[0];
	c->initiator_depth = (uint8_t)v[1];
	c->flow_control = (uint8_t)v[2];
	c->retry_count = (uint8_t)v[3];
	c->rnr_retry_count = (uint8_t)v[4];
	c->srq = (uint8_t)v[5];
	c->qp_num = v[6];
	return true;
}

/* cmConnect(id, privateData, rr, id, flow, retry, rnr, srq, qpNum) */
static napi_value cm_connect(napi_env env, napi_callback_info info)
{
	ARGS(9);
	struct rdma_cm_id *id = cmid(env, argv[0], NULL);
	struct rdma_conn_param c;
	if (!id || !conn_from(env, argv + 1, &c))
		return neg_errno(env, EINVAL);
	errno = 0;
	CM_RET(rdma_connect(id, &c));
}

/* cmAccept(id, privateData, rr, id, flow, retry, rnr, srq, qpNum) */
static napi_value cm_accept(napi_env env, napi_callback_info info)
{
	ARGS(9);
	struct rdma_cm_id *id = cmid(env, argv[0], NULL);
	struct rdma_conn_param c;
	if (!id || !conn_from(env, argv + 1, &c))
		return neg_errno(env, EINVAL);
	errno = 0;
	CM_RET(rdma_accept(id, &c));
}

/* cmReject(id, privateData|null) */
static napi_value cm_reject(napi_env env, napi_callback_info info)
{
	ARGS(2);
	struct rdma_cm_id *id = cmid(env, argv[0], NULL);
	void *d = NULL;
	size_t n = 0;
	if (!id || (!is_nullish(env, argv[1]) && (!bytes_of(env, argv[1], &d, &n) || n > 255)))
		return neg_errno(env, EINVAL);
	errno = 0;
	CM_RET(rdma_reject(id, n ? d : NULL, (uint8_t)n));
}

static napi_value cm_disconnect(napi_env env, napi_callback_info info)
{
	ARGS(1);
	struct rdma_cm_id *id = cmid(env, argv[0], NULL);
	if (!id)
		return neg_errno(env, EINVAL);
	errno = 0;
	CM_RET(rdma_disconnect(id));
}

static napi_value cm_establish(napi_env env, napi_callback_info info)
{
	ARGS(1);
	struct rdma_cm_id *id = cmid(env, argv[0], NULL);
	if (!id)
		return neg_errno(env, EINVAL);
	errno = 0;
	CM_RET(rdma_establish(id));
}

static napi_value cm_destroy_id(napi_env env, napi_callback_info info)
{
	ARGS(1);
	struct cmid_obj *c;
	struct rdma_cm_id *id = cmid(env, argv[0], &c);
	if (!id)
		return neg_errno(env, EINVAL);
	/* The QP (if any) outlives the id as a plain verbs QP. */
	id->qp = NULL;
	if (rdma_destroy_id(id))
		return neg_errno(env, errno ? errno : EINVAL);
	if (c->qp) {
		c->qp->cm = NULL;
		c->qp = NULL;
	}
	c->h.ptr = NULL;
	return num(env, 0);
}

static napi_value addr_value(napi_env env, struct sockaddr *sa, napi_value *port)
{
	char buf[INET6_ADDRSTRLEN];
	*port = num(env, 0);
	if (!sa)
		return str(env, "");
	if (sa->sa_family == AF_INET) {
		struct sockaddr_in *s = (struct sockaddr_in *)sa;
		inet_ntop(AF_INET, &s->sin_addr, buf, sizeof buf);
		*port = num(env, ntohs(s->sin_port));
		return str(env, buf);
	}
	if (sa->sa_family == AF_INET6) {
		struct sockaddr_in6 *s = (struct sockaddr_in6 *)sa;
		inet_ntop(AF_INET6, &s->sin6_addr, buf, sizeof buf);
		*port = num(env, ntohs(s->sin6_port));
		return str(env, buf);
	}
	return str(env, "");
}

/* cmInfo(id) -> [deviceName|null, portNum, srcAddr, srcPort, dstAddr, dstPort] | -errno */
static napi_value cm_info(napi_env env, napi_callback_info info)
{
	ARGS(1);
	struct rdma_cm_id *id = cmid(env, argv[0], NULL);
	napi_value arr, v, port, nul;
	if (!id)
		return neg_errno(env, EINVAL);
	napi_get_null(env, &nul);
	napi_create_array_with_length(env, 6, &arr);
	napi_set_element(env, arr, 0, id->verbs ? str(env, ibv_get_device_name(id->verbs->device)) : nul);
	napi_set_element(env, arr, 1, num(env, id->port_num));
	v = addr_value(env, rdma_get_local_addr(id), &port);
	napi_set_element(env, arr, 2, v);
	napi_set_element(env, arr, 3, port);
	v = addr_value(env, rdma_get_peer_addr(id), &port);
	napi_set_element(env, arr, 4, v);
	napi_set_element(env, arr, 5, port);
	return arr;
}

/*
 * cmCreateQp(id, pd, sendCq, recvCq, qpType, sendWr, recvWr, sendSge, recvSge, inline, sigAll,
 * key, srq|null, createFlags): rdma_create_qp, or with create flags rdma_create_qp_ex (mckey -l).
 */
static napi_value cm_create_qp(napi_env env, napi_callback_info info)
{
	ARGS(14);
	struct cmid_obj *c;
	struct rdma_cm_id *id = cmid(env, argv[0], &c);
	struct obj *pd = get_obj(env, argv[1], T_PD);
	struct ibv_qp_init_attr a;
	uint32_t flags;
	if (!id || !pd || !qp_init_from(env, argv + 2, &a) || !arg_u32(env, argv[13], &flags))
		return neg_errno(env, EINVAL);
	struct qp_obj *o = qp_wrap_new();
	if (!o)
		return neg_errno(env, ENOMEM);
	o->st = state_of(env);
	errno = 0;
	int r;
	if (flags) {
		struct ibv_qp_init_attr_ex x;
		qp_init_ex_from(&a, pd->ptr, flags, &x);
		r = rdma_create_qp_ex(id, &x);
		a.cap = x.cap;
	} else {
		r = rdma_create_qp(id, pd->ptr, &a);
	}
	if (r) {
		int e = errno;
		free(o);
		return neg_errno(env, e ? e : EINVAL);
	}
	o->cm = c;
	c->qp = o;
	return qp_result(env, o, id->qp, &a);
}

/* cmSetOption(id, level, name, value) */
static napi_value cm_set_option(napi_env env, napi_callback_info info)
{
	ARGS(4);
	struct rdma_cm_id *id = cmid(env, argv[0], NULL);
	uint32_t level, name;
	int32_t value;
	if (!id || !arg_u32(env, argv[1], &level) || !arg_u32(env, argv[2], &name) || !arg_i32(env, argv[3], &value))
		return neg_errno(env, EINVAL);
	errno = 0;
	if (level == RDMA_OPTION_ID && (name == RDMA_OPTION_ID_TOS || name == RDMA_OPTION_ID_ACK_TIMEOUT)) {
		uint8_t b = (uint8_t)value;
		CM_RET(rdma_set_option(id, (int)level, (int)name, &b, sizeof b));
	}
	CM_RET(rdma_set_option(id, (int)level, (int)name, &value, sizeof value));
}

/* cmInitQpAttr(id, state, out: Float64Array, dgidOut) -> mask | -errno */
static napi_value cm_init_qp_attr(napi_env env, napi_callback_info info)
{
	ARGS(4);
	struct rdma_cm_id *id = cmid(env, argv[0], NULL);
	uint32_t state;
	double *v;
	uint8_t *gid;
	struct ibv_qp_attr a;
	int mask = 0;
	if (!id || !arg_u32(env, argv[1], &state) || !f64s(env, argv[2], &v, QA_WORDS) || !gid16(env, argv[3], &gid))
		return neg_errno(env, EINVAL);
	memset(&a, 0, sizeof a);
	a.qp_state = (enum ibv_qp_state)state;
	errno = 0;
	if (rdma_init_qp_attr(id, &a, &mask))
		return neg_errno(env, errno ? errno : EINVAL);
	qa_to(&a, v, gid);
	return num(env, mask);
}

/* cmJoinMulticast(id, address, port, scope, key, joinFlags) */
static napi_value cm_join_multicast(napi_env env, napi_callback_info info)
{
	ARGS(6);
	struct rdma_cm_id *id = cmid(env, argv[0], NULL);
	struct sockaddr_storage ss;
	int32_t key;
	uint32_t flags;
	if (!id || !sockaddr_from(env, argv[1], argv[2], argv[3], &ss) || !arg_i32(env, argv[4], &key) ||
	    !arg_u32(env, argv[5], &flags))
		return neg_errno(env, EINVAL);
	struct rdma_cm_join_mc_attr_ex a = { 0 };
	a.comp_mask = RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS;
	a.join_flags = flags;
	a.addr = (struct sockaddr *)&ss;
	errno = 0;
	CM_RET(rdma_join_multicast_ex(id, &a, (void *)(intptr_t)key));
}

/* cmLeaveMulticast(id, address, port, scope) */
static napi_value cm_leave_multicast(napi_env env, napi_callback_info info)
{
	ARGS(4);
	struct rdma_cm_id *id = cmid(env, argv[0], NULL);
	struct sockaddr_storage ss;
	if (!id || !sockaddr_from(env, argv[1], argv[2], argv[3], &ss))
		return neg_errno(env, EINVAL);
	errno = 0;
	CM_RET(rdma_leave_multicast(id, (struct sockaddr *)&ss));
}

void cm_register(napi_env env, napi_value exports)
{
	EXPORT("cmInit", cm_init);
	EXPORT("cmRef", cm_ref);
	EXPORT("cmCreateId", cm_create_id);
	EXPORT("cmSetKey", cm_set_key);
	EXPORT("cmCreateIdBound", cm_create_id_bound);
	EXPORT("cmBind", cm_bind);
	EXPORT("cmResolveAddr", cm_resolve_addr);
	EXPORT("cmResolveRoute", cm_resolve_route);
	EXPORT("cmListen", cm_listen);
	EXPORT("cmConnect", cm_connect);
	EXPORT("cmAccept", cm_accept);
	EXPORT("cmReject", cm_reject);
	EXPORT("cmDisconnect", cm_disconnect);
	EXPORT("cmEstablish", cm_establish);
	EXPORT("cmDestroyId", cm_destroy_id);
	EXPORT("cmInfo", cm_info);
	EXPORT("cmCreateQp", cm_create_qp);
	EXPORT("cmSetOption", cm_set_option);
	EXPORT("cmInitQpAttr", cm_init_qp_attr);
	EXPORT("cmJoinMulticast", cm_join_multicast);
	EXPORT("cmLeaveMulticast", cm_leave_multicast);
}
