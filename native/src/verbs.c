/*
 * rdmacm native addon: libibverbs — devices, contexts, PDs, MRs, completion channels, CQs, QPs,
 * address handles, async events, and the data path (post send/recv, poll CQ) over the scratch
 * buffers shared with JavaScript.
 */
#include "addon.h"
#include <arpa/inet.h>
#include <endian.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* --- devices ------------------------------------------------------------------------------ */

static napi_value guid_str(napi_env env, __be64 guid)
{
	char b[24];
	snprintf(b, sizeof b, "%016llx", (unsigned long long)be64toh(guid));
	return str(env, b);
}

static napi_value device_entry(napi_env env, struct ibv_context *ctx, bool cm)
{
	napi_value o;
	struct ctx_obj *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->ctx = ctx;
	c->key = -1;
	napi_create_object(env, &o);
	set_val(env, o, "name", str(env, ibv_get_device_name(ctx->device)));
	set_val(env, o, "ctx", wrap_obj(env, &c->h, T_CTX, ctx));
	set_val(env, o, "guid", guid_str(env, ibv_get_device_guid(ctx->device)));
	set_num(env, o, "nodeType", ctx->device->node_type);
	set_num(env, o, "transportType", ctx->device->transport_type);
	set_val(env, o, "cm", boolean(env, cm));
	set_num(env, o, "asyncFd", ctx->async_fd);
	return o;
}

/*
 * deviceList() -> [{ name, ctx, guid, nodeType, transportType, cm }]. The contexts are
 * librdmacm's own (rdma_get_devices), so a cm_id's `verbs` is the very context the JS side
 * wraps; without the rdma_cm kernel interface they are opened with ibv_open_device and carry
 * no CM. Called once per process: the contexts stay open.
 */
static napi_value device_list(napi_env env, napi_callback_info info)
{
	napi_value arr;
	int n = 0;
	(void)info;
	napi_create_array(env, &arr);
	struct ibv_context **ctxs = rdma_get_devices(&n);
	if (ctxs) {
		for (int i = 0; i < n && ctxs[i]; i++)
			napi_set_element(env, arr, i, device_entry(env, ctxs[i], true));
		/* The list array is ours; the contexts stay referenced by librdmacm. */
		return arr;
	}
	struct ibv_device **devs = ibv_get_device_list(&n);
	if (!devs)
		return neg_errno(env, errno ? errno : ENODEV);
	uint32_t k = 0;
	for (int i = 0; i < n; i++) {
		struct ibv_context *ctx = ibv_open_device(devs[i]);
		if (ctx)
			napi_set_element(env, arr, k++, device_entry(env, ctx, false));
	}
	/* Opened contexts keep their devices referenced. */
	ibv_free_device_list(devs);
	return arr;
}

static napi_value u64(napi_env env, uint64_t v)
{
	napi_value r;
	napi_create_bigint_uint64(env, v, &r);
	return r;
}

/* queryDevice(ctx) -> attrs | -errno */
static napi_value query_device(napi_env env, napi_callback_info info)
{
	ARGS(1);
	struct ctx_obj *c = get_obj(env, argv[0], T_CTX);
	struct ibv_device_attr a;
	napi_value o;
	if (!c)
		return neg_errno(env, EINVAL);
	memset(&a, 0, sizeof a);
	int r = ibv_query_device(c->ctx, &a);
	if (r)
		return neg_errno(env, r);
	napi_create_object(env, &o);
	set_val(env, o, "fwVer", str(env, a.fw_ver));
	set_val(env, o, "nodeGuid", u64(env, be64toh(a.node_guid)));
	set_val(env, o, "sysImageGuid", u64(env, be64toh(a.sys_image_guid)));
	set_val(env, o, "maxMrSize", u64(env, a.max_mr_size));
	set_val(env, o, "pageSizeCap", u64(env, a.page_size_cap));
#define F(js, c) set_num(env, o, js, (double)a.c)
	F("vendorId", vendor_id);
	F("vendorPartId", vendor_part_id);
	F("hwVer", hw_ver);
	F("maxQp", max_qp);
	F("maxQpWr", max_qp_wr);
	F("deviceCapFlags", device_cap_flags);
	F("maxSge", max_sge);
	F("maxSgeRd", max_sge_rd);
	F("maxCq", max_cq);
	F("maxCqe", max_cqe);
	F("maxMr", max_mr);
	F("maxPd", max_pd);
	F("maxQpRdAtom", max_qp_rd_atom);
	F("maxEeRdAtom", max_ee_rd_atom);
	F("maxResRdAtom", max_res_rd_atom);
	F("maxQpInitRdAtom", max_qp_init_rd_atom);
	F("maxEeInitRdAtom", max_ee_init_rd_atom);
	F("atomicCap", atomic_cap);
	F("maxEe", max_ee);
	F("maxRdd", max_rdd);
	F("maxMw", max_mw);
	F("maxRawIpv6Qp", max_raw_ipv6_qp);
	F("maxRawEthyQp", max_raw_ethy_qp);
	F("maxMcastGrp", max_mcast_grp);
	F("maxMcastQpAttach", max_mcast_qp_attach);
	F("maxTotalMcastQpAttach", max_total_mcast_qp_attach);
	F("maxAh", max_ah);
	F("maxFmr", max_fmr);
	F("maxMapPerFmr", max_map_per_fmr);
	F("maxSrq", max_srq);
	F("maxSrqWr", max_srq_wr);
	F("maxSrqSge", max_srq_sge);
	F("maxPkeys", max_pkeys);
	F("localCaAckDelay", local_ca_ack_delay);
	F("physPortCnt", phys_port_cnt);
#undef F
	return o;
}

/*
 * queryDeviceEx(ctx) -> the fields of struct ibv_device_attr_ex past orig_attr (flattened;
 * the JS side has orig_attr from queryDevice) | -errno
 */
static napi_value query_device_ex(napi_env env, napi_callback_info info)
{
	ARGS(1);
	struct ctx_obj *c = get_obj(env, argv[0], T_CTX);
	struct ibv_device_attr_ex a;
	napi_value o;
	if (!c)
		return neg_errno(env, EINVAL);
	memset(&a, 0, sizeof a);
	int r = ibv_query_device_ex(c->ctx, NULL, &a);
	if (r)
		return neg_errno(env, r);
	napi_create_object(env, &o);
	set_val(env, o, "odpGeneralCaps", u64(env, a.odp_caps.general_caps));
	set_val(env, o, "completionTimestampMask", u64(env, a.completion_timestamp_mask));
	set_val(env, o, "hcaCoreClock", u64(env, a.hca_core_clock));
	set_val(env, o, "deviceCapFlagsEx", u64(env, a.device_cap_flags_ex));
	set_val(env, o, "rxHashFieldsMask", u64(env, a.rss_caps.rx_hash_fields_mask));
	set_val(env, o, "maxDmSize", u64(env, a.max_dm_size));
#define F(js, c) set_num(env, o, js, (double)a.c)
	F("compMask", comp_mask);
	F("odpRc", odp_caps.per_transport_caps.rc_odp_caps);
	F("odpUc", odp_caps.per_transport_caps.uc_odp_caps);
	F("odpUd", odp_caps.per_transport_caps.ud_odp_caps);
	F("maxTso", tso_caps.max_tso);
	F("tsoSupportedQpts", tso_caps.supported_qpts);
	F("rssSupportedQpts", rss_caps.supported_qpts);
	F("maxRwqIndirectionTables", rss_caps.max_rwq_indirection_tables);
	F("maxRwqIndirectionTableSize", rss_caps.max_rwq_indirection_table_size);
	F("rxHashFunction", rss_caps.rx_hash_function);
	F("maxWqTypeRq", max_wq_type_rq);
	F("qpRateLimitMin", packet_pacing_caps.qp_rate_limit_min);
	F("qpRateLimitMax", packet_pacing_caps.qp_rate_limit_max);
	F("ppSupportedQpts", packet_pacing_caps.supported_qpts);
	F("rawPacketCaps", raw_packet_caps);
	F("tmMaxRndvHdrSize", tm_caps.max_rndv_hdr_size);
	F("tmMaxNumTags", tm_caps.max_num_tags);
	F("tmFlags", tm_caps.flags);
	F("tmMaxOps", tm_caps.max_ops);
	F("tmMaxSge", tm_caps.max_sge);
	F("maxCqCount", cq_mod_caps.max_cq_count);
	F("maxCqPeriod", cq_mod_caps.max_cq_period);
	F("pciFetchAdd", pci_atomic_caps.fetch_add);
	F("pciSwap", pci_atomic_caps.swap);
	F("pciCompareSwap", pci_atomic_caps.compare_swap);
	F("xrcOdpCaps", xrc_odp_caps);
	F("physPortCntEx", phys_port_cnt_ex);
#undef F
	return o;
}

/* queryPort(ctx, port) -> attrs | -errno */
static napi_value query_port(napi_env env, napi_callback_info info)
{
	ARGS(2);
	struct ctx_obj *c = get_obj(env, argv[0], T_CTX);
	uint32_t port;
	struct ibv_port_attr a;
	napi_value o;
	if (!c || !arg_u32(env, argv[1], &port) || port < 1 || port > 255)
		return neg_errno(env, EINVAL);
	memset(&a, 0, sizeof a);
	int r = ibv_query_port(c->ctx, (uint8_t)port, &a);
	if (r)
		return neg_errno(env, r);
	napi_create_object(env, &o);
#define F(js, c) set_num(env, o, js, (double)a.c)
	F("state", state);
	F("maxMtu", max_mtu);
	F("activeMtu", active_mtu);
	F("gidTblLen", gid_tbl_len);
	F("portCapFlags", port_cap_flags);
	F("maxMsgSz", max_msg_sz);
	F("badPkeyCntr", bad_pkey_cntr);
	F("qkeyViolCntr", qkey_viol_cntr);
	F("pkeyTblLen", pkey_tbl_len);
	F("lid", lid);
	F("smLid", sm_lid);
	F("lmc", lmc);
	F("maxVlNum", max_vl_num);
	F("smSl", sm_sl);
	F("subnetTimeout", subnet_timeout);
	F("initTypeReply", init_type_reply);
	F("activeWidth", active_width);
	F("activeSpeed", active_speed);
	F("physState", phys_state);
	F("linkLayer", link_layer);
	F("flags", flags);
	F("portCapFlags2", port_cap_flags2);
#undef F
	return o;
}

bool bytes_of(napi_env env, napi_value v, void **data, size_t *len)
{
	bool is = false;
	if (napi_is_typedarray(env, v, &is) == napi_ok && is) {
		napi_typedarray_type t;
		size_t n;
		napi_value ab;
		size_t off;
		if (napi_get_typedarray_info(env, v, &t, &n, data, &ab, &off) != napi_ok)
			return false;
		size_t el = 1;
		switch (t) {
		case napi_int16_array: case napi_uint16_array: el = 2; break;
		case napi_int32_array: case napi_uint32_array: case napi_float32_array: el = 4; break;
		case napi_float64_array: case napi_bigint64_array: case napi_biguint64_array: el = 8; break;
		default: el = 1;
		}
		*len = n * el;
		return true;
	}
	if (napi_is_dataview(env, v, &is) == napi_ok && is) {
		napi_value ab;
		size_t off;
		return napi_get_dataview_info(env, v, len, data, &ab, &off) == napi_ok;
	}
	if (napi_is_arraybuffer(env, v, &is) == napi_ok && is)
		return napi_get_arraybuffer_info(env, v, data, len) == napi_ok;
	return false;
}

/* queryGid(ctx, port, index, out: Uint8Array(16)) -> 0 | -errno */
static napi_value query_gid(napi_env env, napi_callback_info info)
{
	ARGS(4);
	struct ctx_obj *c = get_obj(env, argv[0], T_CTX);
	uint32_t port, idx;
	void *out;
	size_t len;
	union ibv_gid gid;
	if (!c || !arg_u32(env, argv[1], &port) || !arg_u32(env, argv[2], &idx) || port < 1 || port > 255 ||
	    idx > 0x7fffffff || !bytes_of(env, argv[3], &out, &len) || len < 16)
		return neg_errno(env, EINVAL);
	int r = ibv_query_gid(c->ctx, (uint8_t)port, (int)idx, &gid);
	if (r)
		return neg_errno(env, errno ? errno : EINVAL);
	memcpy(out, gid.raw, 16);
	return num(env, 0);
}

/* queryPkey(ctx, port, index) -> pkey | -errno */
static napi_value query_pkey(napi_env env, napi_callback_info info)
{
	ARGS(3);
	struct ctx_obj *c = get_obj(env, argv[0], T_CTX);
	uint32_t port, idx;
	__be16 pkey;
	if (!c || !arg_u32(env, argv[1], &port) || !arg_u32(env, argv[2], &idx) || port < 1 || port > 255 || idx > 0x7fffffff)
		return neg_errno(env, EINVAL);
	int r = ibv_query_pkey(c->ctx, (uint8_t)port, (int)idx, &pkey);
	if (r)
		return neg_errno(env, errno ? errno : EINVAL);
	return num(env, be16toh(pkey));
}

/* --- async events ------------------------------------------------------------------------- */

static void async_cb(uv_poll_t *p, int status, int events)
{
	struct ctx_obj *c = p->data;
	(void)events;
	if (!c || status < 0)
		return;
	struct addon_state *s = c->st;
	struct ibv_async_event ev;
	while (ibv_get_async_event(c->ctx, &ev) == 0) {
		int kind = 0;
		double key = 0;
		switch (ev.event_type) {
		case IBV_EVENT_CQ_ERR:
			kind = 2;
			key = (double)(intptr_t)ev.element.cq->cq_context;
			break;
		case IBV_EVENT_QP_FATAL: case IBV_EVENT_QP_REQ_ERR: case IBV_EVENT_QP_ACCESS_ERR:
		case IBV_EVENT_COMM_EST: case IBV_EVENT_SQ_DRAINED: case IBV_EVENT_PATH_MIG:
		case IBV_EVENT_PATH_MIG_ERR: case IBV_EVENT_QP_LAST_WQE_REACHED:
			kind = 1;
			key = (double)(intptr_t)ev.element.qp->qp_context;
			break;
		case IBV_EVENT_SRQ_ERR: case IBV_EVENT_SRQ_LIMIT_REACHED:
			kind = 3;
			key = (double)(intptr_t)ev.element.srq->srq_context;
			break;
		case IBV_EVENT_PORT_ACTIVE: case IBV_EVENT_PORT_ERR: case IBV_EVENT_LID_CHANGE:
		case IBV_EVENT_PKEY_CHANGE: case IBV_EVENT_SM_CHANGE: case IBV_EVENT_CLIENT_REREGISTER:
		case IBV_EVENT_GID_CHANGE:
			kind = 4;
			key = ev.element.port_num;
			break;
		default:
			kind = 0;
		}
		int type = ev.event_type;
		ibv_ack_async_event(&ev);
		if (!s)
			continue;
		napi_handle_scope scope;
		napi_open_handle_scope(s->env, &scope);
		napi_value argv[4] = { num(s->env, c->key), num(s->env, type), num(s->env, kind), num(s->env, key) };
		call_js(s->env, s->async_event_cb, 4, argv);
		napi_close_handle_scope(s->env, scope);
		if (!c->async_poll)
			break;
	}
}

/* watchAsync(ctx, key) -> 0 | -errno: report the context's async events (unref'd). */
static napi_value watch_async(napi_env env, napi_callback_info info)
{
	ARGS(2);
	struct ctx_obj *c = get_obj(env, argv[0], T_CTX);
	int32_t key;
	if (!c || !arg_i32(env, argv[1], &key))
		return neg_errno(env, EINVAL);
	if (c->async_poll)
		return num(env, 0);
	c->key = key;
	c->st = state_of(env);
	int r = poll_start(env, &c->async_poll, c->ctx->async_fd, async_cb, c);
	return r ? neg_errno(env, r) : num(env, 0);
}

/* --- PD ----------------------------------------------------------------------------------- */

static napi_value alloc_pd(napi_env env, napi_callback_info info)
{
	ARGS(1);
	struct ctx_obj *c = get_obj(env, argv[0], T_CTX);
	if (!c)
		return neg_errno(env, EINVAL);
	struct obj *o = calloc(1, sizeof(*o));
	if (!o)
		return neg_errno(env, ENOMEM);
	struct ibv_pd *pd = ibv_alloc_pd(c->ctx);
	if (!pd) {
		int e = errno;
		free(o);
		return neg_errno(env, e ? e : ENOMEM);
	}
	return wrap_obj(env, o, T_PD, pd);
}

static napi_value dealloc_pd(napi_env env, napi_callback_info info)
{
	ARGS(1);
	struct obj *o = get_obj(env, argv[0], T_PD);
	if (!o)
		return neg_errno(env, EINVAL);
	int r = ibv_dealloc_pd(o->ptr);
	if (r)
		return neg_errno(env, r);
	o->ptr = NULL;
	return num(env, 0);
}

/* --- MR ----------------------------------------------------------------------------------- */

/*
 * regMr(pd, memory, access, iova) -> [mr, addr, lkey, rkey, length] | -errno. `memory` is a
 * TypedArray, DataView or ArrayBuffer; it is registered in place (no copy) and kept alive by a
 * strong reference until deregMr. `iova` < 0: ibv_reg_mr, else ibv_reg_mr_iova.
 */
static napi_value reg_mr(napi_env env, napi_callback_info info)
{
	ARGS(4);
	struct obj *pd = get_obj(env, argv[0], T_PD);
	uint32_t access;
	double iova;
	void *data;
	size_t len;
	if (!pd || !arg_u32(env, argv[2], &access) || !arg_f64(env, argv[3], &iova) || !bytes_of(env, argv[1], &data, &len) ||
	    len == 0 || !data)
		return neg_errno(env, EINVAL);
	struct mr_obj *m = calloc(1, sizeof(*m));
	if (!m)
		return neg_errno(env, ENOMEM);
	struct ibv_mr *mr = iova < 0 ? ibv_reg_mr(pd->ptr, data, len, (int)access)
				     : ibv_reg_mr_iova(pd->ptr, data, len, (uint64_t)iova, (int)access);
	if (!mr) {
		int e = errno;
		free(m);
		return neg_errno(env, e ? e : ENOMEM);
	}
	m->slot = key_slot_put(&m->h);
	if (!m->slot) {
		ibv_dereg_mr(mr);
		free(m);
		return neg_errno(env, ENOMEM);
	}
	napi_create_reference(env, argv[1], 1, &m->buf_ref);
	napi_value arr;
	napi_create_array_with_length(env, 6, &arr);
	napi_set_element(env, arr, 0, wrap_obj(env, &m->h, T_MR, mr));
	napi_set_element(env, arr, 1, num(env, (double)(uintptr_t)mr->addr));
	napi_set_element(env, arr, 2, num(env, mr->lkey));
	napi_set_element(env, arr, 3, num(env, mr->rkey));
	napi_set_element(env, arr, 4, num(env, (double)mr->length));
	napi_set_element(env, arr, 5, num(env, m->slot));
	return arr;
}

static napi_value dereg_mr(napi_env env, napi_callback_info info)
{
	ARGS(1);
	struct mr_obj *m = get_obj(env, argv[0], T_MR);
	if (!m)
		return neg_errno(env, EINVAL);
	int r = ibv_dereg_mr(m->h.ptr);
	if (r)
		return neg_errno(env, r);
	m->h.ptr = NULL;
	key_slot_drop(m->slot);
	m->slot = 0;
	if (m->buf_ref)
		napi_delete_reference(env, m->buf_ref);
	m->buf_ref = NULL;
	return num(env, 0);
}

/* --- completion channels ------------------------------------------------------------------ */

static void chan_cb(uv_poll_t *p, int status, int events)
{
	struct chan_obj *ch = p->data;
	(void)events;
	if (!ch || status < 0 || !ch->h.ptr)
		return;
	struct addon_state *s = ch->st;
	if (!s)
		return;
	struct ibv_cq *cq;
	void *cqctx;
	napi_handle_scope scope;
	napi_open_handle_scope(s->env, &scope);
	while (ch->h.ptr && ibv_get_cq_event(ch->h.ptr, &cq, &cqctx) == 0) {
		napi_value argv[2] = { num(s->env, ch->key), num(s->env, (double)(intptr_t)cqctx) };
		call_js(s->env, s->cq_event_cb, 2, argv);
	}
	napi_close_handle_scope(s->env, scope);
}

/* createCompChannel(ctx, key) -> chan | -errno */
static napi_value create_comp_channel(napi_env env, napi_callback_info info)
{
	ARGS(2);
	struct ctx_obj *c = get_obj(env, argv[0], T_CTX);
	int32_t key;
	if (!c || !arg_i32(env, argv[1], &key))
		return neg_errno(env, EINVAL);
	struct chan_obj *o = calloc(1, sizeof(*o));
	if (!o)
		return neg_errno(env, ENOMEM);
	struct ibv_comp_channel *ch = ibv_create_comp_channel(c->ctx);
	if (!ch) {
		int e = errno;
		free(o);
		return neg_errno(env, e ? e : ENOMEM);
	}
	o->key = key;
	o->h.ptr = ch;
	o->st = state_of(env);
	int r = poll_start(env, &o->poll, ch->fd, chan_cb, o);
	if (r) {
		ibv_destroy_comp_channel(ch);
		free(o);
		return neg_errno(env, r);
	}
	return wrap_obj(env, &o->h, T_CHAN, ch);
}

/* compChannelRef(chan, delta) -> refs: while > 0 the channel keeps the event loop alive. */
static napi_value comp_channel_ref(napi_env env, napi_callback_info info)
{
	ARGS(2);
	struct chan_obj *o = get_obj(env, argv[0], T_CHAN);
	int32_t d;
	if (!o || !arg_i32(env, argv[1], &d) || !o->poll)
		return neg_errno(env, EINVAL);
	int before = o->refs;
	o->refs += d;
	if (o->refs < 0)
		o->refs = 0;
	if (before == 0 && o->refs > 0)
		uv_ref((uv_handle_t *)o->poll);
	else if (before > 0 && o->refs == 0)
		uv_unref((uv_handle_t *)o->poll);
	return num(env, o->refs);
}

static napi_value destroy_comp_channel(napi_env env, napi_callback_info info)
{
	ARGS(1);
	struct chan_obj *o = get_obj(env, argv[0], T_CHAN);
	if (!o)
		return neg_errno(env, EINVAL);
	struct ibv_comp_channel *ch = o->h.ptr;
	poll_close(o->poll);
	o->poll = NULL;
	int r = ibv_destroy_comp_channel(ch);
	if (r) {
		poll_start(env, &o->poll, ch->fd, chan_cb, o);
		return neg_errno(env, r);
	}
	o->h.ptr = NULL;
	return num(env, 0);
}

/* --- CQ ----------------------------------------------------------------------------------- */

/* The arguments createCq and createCqEx share: (ctx, cqe, chan|null, compVector, key). */
struct cq_args {
	struct ibv_context *ctx;
	uint32_t cqe, vec;
	int32_t key;
	struct ibv_comp_channel *channel;
};

static bool cq_args_from(napi_env env, napi_value *argv, struct cq_args *a)
{
	struct ctx_obj *c = get_obj(env, argv[0], T_CTX);
	if (!c || !arg_u32(env, argv[1], &a->cqe) || !arg_u32(env, argv[3], &a->vec) || !arg_i32(env, argv[4], &a->key) ||
	    a->cqe < 1 || a->cqe > 0x7fffffff || a->vec > 0x7fffffff)
		return false;
	a->ctx = c->ctx;
	a->channel = NULL;
	if (!is_nullish(env, argv[2])) {
		struct chan_obj *ch = get_obj(env, argv[2], T_CHAN);
		if (!ch)
			return false;
		a->channel = ch->h.ptr;
	}
	return true;
}

/* [cq, actual cqe]: the new CQ wrapped in `o`. */
static napi_value cq_result(napi_env env, struct cq_obj *o, struct ibv_cq *cq)
{
	napi_value arr;
	napi_create_array_with_length(env, 2, &arr);
	napi_set_element(env, arr, 0, wrap_obj(env, &o->h, T_CQ, cq));
	napi_set_element(env, arr, 1, num(env, cq->cqe));
	return arr;
}

/* createCq(ctx, cqe, chan|null, compVector, key) -> [cq, cqe] | -errno */
static napi_value create_cq(napi_env env, napi_callback_info info)
{
	ARGS(5);
	struct cq_args a;
	if (!cq_args_from(env, argv, &a))
		return neg_errno(env, EINVAL);
	struct cq_obj *o = calloc(1, sizeof(*o));
	if (!o)
		return neg_errno(env, ENOMEM);
	o->st = state_of(env);
	struct ibv_cq *cq = ibv_create_cq(a.ctx, (int)a.cqe, (void *)(intptr_t)a.key, a.channel, (int)a.vec);
	if (!cq) {
		int e = errno;
		free(o);
		return neg_errno(env, e ? e : ENOMEM);
	}
	return cq_result(env, o, cq);
}

/*
 * createCqEx(ctx, cqe, chan|null, vector, key, wcFlags) -> [cq, actual cqe] | -errno: the
 * device's own ibv_create_cq_ex, for wc_flags ibv_poll_cq cannot report (completion
 * timestamps); the provider refuses what it cannot serve. The CQ is otherwise an ordinary one
 * (ibv_cq_ex_to_cq).
 */
static napi_value create_cq_ex(napi_env env, napi_callback_info info)
{
	ARGS(6);
	struct cq_args a;
	uint32_t flags;
	if (!cq_args_from(env, argv, &a) || !arg_u32(env, argv[5], &flags))
		return neg_errno(env, EINVAL);
	struct cq_obj *o = calloc(1, sizeof(*o));
	if (!o)
		return neg_errno(env, ENOMEM);
	o->st = state_of(env);
	struct ibv_cq_init_attr_ex x;
	memset(&x, 0, sizeof x);
	x.cqe = a.cqe;
	x.cq_context = (void *)(intptr_t)a.key;
	x.channel = a.channel;
	x.comp_vector = a.vec;
	x.wc_flags = flags;
	struct ibv_cq_ex *cx = ibv_create_cq_ex(a.ctx, &x);
	if (!cx) {
		int e = errno;
		free(o);
		return neg_errno(env, e ? e : ENOMEM);
	}
	o->ex = cx;
	o->wc_flags = flags;
	return cq_result(env, o, ibv_cq_ex_to_cq(cx));
}

static napi_value destroy_cq(napi_env env, napi_callback_info info)
{
	ARGS(1);
	struct obj *o = get_obj(env, argv[0], T_CQ);
	if (!o)
		return neg_errno(env, EINVAL);
	int r = ibv_destroy_cq(o->ptr);
	if (r)
		return neg_errno(env, r);
	o->ptr = NULL;
	key_slot_drop(((struct cq_obj *)o)->slot);
	((struct cq_obj *)o)->slot = 0;
	return num(env, 0);
}

static napi_value req_notify_cq(napi_env env, napi_callback_info info)
{
	ARGS(2);
	struct obj *o = get_obj(env, argv[0], T_CQ);
	bool sol;
	if (!o || !arg_bool(env, argv[1], &sol))
		return neg_errno(env, EINVAL);
	int r = ibv_req_notify_cq(o->ptr, sol ? 1 : 0);
	return r ? neg_errno(env, r) : num(env, 0);
}

static napi_value ack_cq_events(napi_env env, napi_callback_info info)
{
	ARGS(2);
	struct obj *o = get_obj(env, argv[0], T_CQ);
	uint32_t n;
	if (!o || !arg_u32(env, argv[1], &n))
		return neg_errno(env, EINVAL);
	if (n)
		ibv_ack_cq_events(o->ptr, n);
	return num(env, 0);
}

/* Up to `max` completions of `o` into the WC scratch, WC_WORDS words each: n or -errno. */
static int poll_words(struct cq_obj *o, uint32_t max)
{
	if (max > WC_MAX)
		max = WC_MAX;
	struct ibv_wc wc[WC_MAX];
	int n = ibv_poll_cq(o->h.ptr, (int)max, wc);
	if (n < 0)
		return -(-n > 0 ? -n : EIO);
	uint32_t *w = o->st->wc;
	for (int i = 0; i < n; i++, w += WC_WORDS) {
		const struct ibv_wc *c = &wc[i];
		w[0] = (uint32_t)c->wr_id;
		w[1] = (uint32_t)(c->wr_id >> 32);
		w[2] = c->status;
		w[3] = c->opcode;
		w[4] = c->vendor_err;
		w[5] = c->byte_len;
		w[6] = c->qp_num;
		w[7] = c->src_qp;
		w[8] = c->wc_flags;
		w[9] = (c->wc_flags & IBV_WC_WITH_IMM) ? be32toh(c->imm_data) : c->invalidated_rkey;
		w[10] = (uint32_t)c->pkey_index | ((uint32_t)c->slid << 16);
		w[11] = (uint32_t)c->sl | ((uint32_t)c->dlid_path_bits << 8);
	}
	return n;
}

/* pollCq(cq, max) -> n | -errno; completions in the WC scratch, WC_WORDS words each. */
static napi_value poll_cq(napi_env env, napi_callback_info info)
{
	size_t argc = 2;
	napi_value argv[2];
	uint32_t max;
	if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 2)
		return neg_errno(env, EINVAL);
	struct cq_obj *o = get_obj(env, argv[0], T_CQ);
	if (!o || !o->st || !o->st->wc || napi_get_value_uint32(env, argv[1], &max) != napi_ok)
		return neg_errno(env, EINVAL);
	return int32(env, poll_words(o, max));
}

/*
 * pollCqEx(cq, max, ts: BigUint64Array) -> n | -errno: up to max completions of a CQ made by
 * createCqEx, through ibv_start_poll / ibv_next_poll / ibv_end_poll, into the WC scratch as
 * poll_cq lays them out (the fields its wc_flags did not ask for 0; pkey_index always 0, the
 * extended CQ has none), and their completion timestamp and wallclock (ns) into ts[2i], ts[2i+1].
 * Of a failed completion only wr_id, status, qp_num and vendor_err are read (ibv_poll_cq(3)).
 */
static napi_value poll_cq_ex(napi_env env, napi_callback_info info)
{
	size_t argc = 3;
	napi_value argv[3];
	uint32_t max;
	napi_typedarray_type t;
	size_t len;
	void *data;
	if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 3)
		return neg_errno(env, EINVAL);
	struct cq_obj *o = get_obj(env, argv[0], T_CQ);
	if (!o || !o->ex || !o->st || !o->st->wc || napi_get_value_uint32(env, argv[1], &max) != napi_ok ||
	    napi_get_typedarray_info(env, argv[2], &t, &len, &data, NULL, NULL) != napi_ok || t != napi_biguint64_array)
		return neg_errno(env, EINVAL);
	if (max > WC_MAX)
		max = WC_MAX;
	if (len < 2 * (size_t)max)
		return neg_errno(env, EINVAL);
	struct ibv_cq_ex *x = o->ex;
	const uint64_t f = o->wc_flags;
	uint64_t *ts = data;
	uint32_t *w = o->st->wc;
	uint32_t n = 0;
	if (max == 0)
		return int32(env, 0);
	struct ibv_poll_cq_attr pa;
	memset(&pa, 0, sizeof pa);
	int r = ibv_start_poll(x, &pa);
	if (r == ENOENT)
		return int32(env, 0);
	if (r)
		return neg_errno(env, r);
	for (;;) {
		const int ok = x->status == IBV_WC_SUCCESS;
		memset(w, 0, WC_WORDS * sizeof(*w));
		w[0] = (uint32_t)x->wr_id;
		w[1] = (uint32_t)(x->wr_id >> 32);
		w[2] = x->status;
		w[4] = ibv_wc_read_vendor_err(x);
		if (f & IBV_WC_EX_WITH_QP_NUM)
			w[6] = ibv_wc_read_qp_num(x);
		ts[2 * n] = 0;
		ts[2 * n + 1] = 0;
		if (ok) {
			uint32_t wcf = ibv_wc_read_wc_flags(x);
			w[3] = ibv_wc_read_opcode(x);
			if (f & IBV_WC_EX_WITH_BYTE_LEN)
				w[5] = ibv_wc_read_byte_len(x);
			if (f & IBV_WC_EX_WITH_SRC_QP)
				w[7] = ibv_wc_read_src_qp(x);
			w[8] = wcf;
			if (f & IBV_WC_EX_WITH_IMM)
				w[9] = (wcf & IBV_WC_WITH_IMM) ? be32toh(ibv_wc_read_imm_data(x)) : ibv_wc_read_invalidated_rkey(x);
			if (f & IBV_WC_EX_WITH_SLID)
				w[10] = ibv_wc_read_slid(x) << 16;
			w[11] = ((f & IBV_WC_EX_WITH_SL) ? ibv_wc_read_sl(x) : 0) |
				((f & IBV_WC_EX_WITH_DLID_PATH_BITS) ? (uint32_t)ibv_wc_read_dlid_path_bits(x) << 8 : 0);
			if (f & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP)
				ts[2 * n] = ibv_wc_read_completion_ts(x);
			if (f & IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK)
				ts[2 * n + 1] = ibv_wc_read_completion_wallclock_ns(x);
		}
		n++;
		w += WC_WORDS;
		if (n >= max || ibv_next_poll(x) != 0)
			break;
	}
	ibv_end_poll(x);
	return int32(env, (int32_t)n);
}

/* --- AH table (UD sends name their AH by index in the WR scratch) ---------------------------- */

static struct obj **ah_tab;
static uint32_t ah_cap;

static uint32_t ah_slot(struct obj *o)
{
	for (uint32_t i = 0; i < ah_cap; i++)
		if (!ah_tab[i]) {
			ah_tab[i] = o;
			return i + 1;
		}
	uint32_t ncap = ah_cap ? ah_cap * 2 : 64;
	struct obj **n = realloc(ah_tab, ncap * sizeof(*n));
	if (!n)
		return 0;
	memset(n + ah_cap, 0, (ncap - ah_cap) * sizeof(*n));
	ah_tab = n;
	uint32_t i = ah_cap;
	ah_cap = ncap;
	ah_tab[i] = o;
	return i + 1;
}

static void ah_from(const double *v, const uint8_t *gid, struct ibv_ah_attr *ah)
{
	memset(ah, 0, sizeof(*ah));
	ah->dlid = (uint16_t)v[AH_DLID];
	ah->sl = (uint8_t)v[AH_SL];
	ah->src_path_bits = (uint8_t)v[AH_SRC_PATH_BITS];
	ah->static_rate = (uint8_t)v[AH_STATIC_RATE];
	ah->is_global = v[AH_IS_GLOBAL] != 0;
	ah->port_num = (uint8_t)v[AH_PORT];
	if (ah->is_global) {
		if (gid)
			memcpy(ah->grh.dgid.raw, gid, 16);
		ah->grh.flow_label = (uint32_t)v[AH_FLOW_LABEL];
		ah->grh.sgid_index = (uint8_t)v[AH_SGID_INDEX];
		ah->grh.hop_limit = (uint8_t)v[AH_HOP_LIMIT];
		ah->grh.traffic_class = (uint8_t)v[AH_TCLASS];
	}
}

static void ah_to(const struct ibv_ah_attr *ah, double *v, uint8_t *gid)
{
	v[AH_DLID] = ah->dlid;
	v[AH_SL] = ah->sl;
	v[AH_SRC_PATH_BITS] = ah->src_path_bits;
	v[AH_STATIC_RATE] = ah->static_rate;
	v[AH_IS_GLOBAL] = ah->is_global;
	v[AH_PORT] = ah->port_num;
	v[AH_FLOW_LABEL] = ah->grh.flow_label;
	v[AH_SGID_INDEX] = ah->grh.sgid_index;
	v[AH_HOP_LIMIT] = ah->grh.hop_limit;
	v[AH_TCLASS] = ah->grh.traffic_class;
	if (gid)
		memcpy(gid, ah->grh.dgid.raw, 16);
}

napi_value ah_attr_value(napi_env env, const struct ibv_ah_attr *ah)
{
	napi_value o, g;
	void *gd;
	napi_create_object(env, &o);
	set_num(env, o, "dlid", ah->dlid);
	set_num(env, o, "sl", ah->sl);
	set_num(env, o, "srcPathBits", ah->src_path_bits);
	set_num(env, o, "staticRate", ah->static_rate);
	set_val(env, o, "isGlobal", boolean(env, ah->is_global));
	set_num(env, o, "portNum", ah->port_num);
	set_num(env, o, "flowLabel", ah->grh.flow_label);
	set_num(env, o, "sgidIndex", ah->grh.sgid_index);
	set_num(env, o, "hopLimit", ah->grh.hop_limit);
	set_num(env, o, "trafficClass", ah->grh.traffic_class);
	napi_create_buffer_copy(env, 16, ah->grh.dgid.raw, &gd, &g);
	set_val(env, o, "dgid", g);
	return o;
}

bool f64s(napi_env env, napi_value v, double **out, size_t min)
{
	napi_typedarray_type t;
	size_t n, off;
	void *d;
	napi_value ab;
	bool is;
	if (napi_is_typedarray(env, v, &is) != napi_ok || !is)
		return false;
	if (napi_get_typedarray_info(env, v, &t, &n, &d, &ab, &off) != napi_ok || t != napi_float64_array || n < min)
		return false;
	*out = d;
	return true;
}

bool gid16(napi_env env, napi_value v, uint8_t **out)
{
	void *d;
	size_t n;
	if (is_nullish(env, v)) {
		*out = NULL;
		return true;
	}
	if (!bytes_of(env, v, &d, &n) || n < 16)
		return false;
	*out = d;
	return true;
}

/* createAh(pd, attrs: Float64Array, dgid) -> [ah, index] | -errno */
static napi_value create_ah(napi_env env, napi_callback_info info)
{
	ARGS(3);
	struct obj *pd = get_obj(env, argv[0], T_PD);
	double *v;
	uint8_t *gid;
	struct ibv_ah_attr a;
	if (!pd || !f64s(env, argv[1], &v, AH_WORDS) || !gid16(env, argv[2], &gid))
		return neg_errno(env, EINVAL);
	ah_from(v, gid, &a);
	struct obj *o = calloc(1, sizeof(*o));
	if (!o)
		return neg_errno(env, ENOMEM);
	struct ibv_ah *ah = ibv_create_ah(pd->ptr, &a);
	if (!ah) {
		int e = errno;
		free(o);
		return neg_errno(env, e ? e : EINVAL);
	}
	o->ptr = ah;
	uint32_t idx = ah_slot(o);
	if (!idx) {
		ibv_destroy_ah(ah);
		free(o);
		return neg_errno(env, ENOMEM);
	}
	napi_value arr;
	napi_create_array_with_length(env, 2, &arr);
	napi_set_element(env, arr, 0, wrap_obj(env, o, T_AH, ah));
	napi_set_element(env, arr, 1, num(env, idx));
	return arr;
}

static napi_value destroy_ah(napi_env env, napi_callback_info info)
{
	ARGS(1);
	struct obj *o = get_obj(env, argv[0], T_AH);
	if (!o)
		return neg_errno(env, EINVAL);
	int r = ibv_destroy_ah(o->ptr);
	if (r)
		return neg_errno(env, r);
	for (uint32_t i = 0; i < ah_cap; i++)
		if (ah_tab[i] == o)
			ah_tab[i] = NULL;
	o->ptr = NULL;
	return num(env, 0);
}

/* --- QP ----------------------------------------------------------------------------------- */

struct qp_obj *qp_wrap_new(void)
{
	return calloc(1, sizeof(struct qp_obj));
}

/* [qp, qpNum, maxSendWr, maxRecvWr, maxSendSge, maxRecvSge, maxInlineData] */
napi_value qp_result(napi_env env, struct qp_obj *o, struct ibv_qp *qp, const struct ibv_qp_init_attr *a)
{
	napi_value arr;
	napi_create_array_with_length(env, 7, &arr);
	napi_set_element(env, arr, 0, wrap_obj(env, &o->h, T_QP, qp));
	napi_set_element(env, arr, 1, num(env, qp->qp_num));
	napi_set_element(env, arr, 2, num(env, a->cap.max_send_wr));
	napi_set_element(env, arr, 3, num(env, a->cap.max_recv_wr));
	napi_set_element(env, arr, 4, num(env, a->cap.max_send_sge));
	napi_set_element(env, arr, 5, num(env, a->cap.max_recv_sge));
	napi_set_element(env, arr, 6, num(env, a->cap.max_inline_data));
	return arr;
}

/*
 * Common QP init attribute parsing: (sendCq, recvCq, qpType, maxSendWr, maxRecvWr, maxSendSge,
 * maxRecvSge, maxInlineData, sqSigAll, key, srq|null) starting at argv[first].
 */
bool qp_init_from(napi_env env, napi_value *argv, struct ibv_qp_init_attr *a)
{
	struct obj *scq = get_obj(env, argv[0], T_CQ);
	struct obj *rcq = get_obj(env, argv[1], T_CQ);
	uint32_t t, v[5];
	bool sig;
	int32_t key;
	if (!scq || !rcq || !arg_u32(env, argv[2], &t))
		return false;
	for (int i = 0; i < 5; i++)
		if (!arg_u32(env, argv[3 + i], &v[i]))
			return false;
	if (!arg_bool(env, argv[8], &sig) || !arg_i32(env, argv[9], &key))
		return false;
	struct obj *srq = NULL;
	if (!is_nullish(env, argv[10]) && !(srq = get_obj(env, argv[10], T_SRQ)))
		return false;
	memset(a, 0, sizeof(*a));
	a->send_cq = scq->ptr;
	a->recv_cq = rcq->ptr;
	a->qp_type = t;
	a->cap.max_send_wr = v[0];
	a->cap.max_recv_wr = v[1];
	a->cap.max_send_sge = v[2];
	a->cap.max_recv_sge = v[3];
	a->cap.max_inline_data = v[4];
	a->sq_sig_all = sig;
	a->qp_context = (void *)(intptr_t)key;
	a->srq = srq ? srq->ptr : NULL;
	return true;
}

/*
 * ibv_qp_init_attr_ex of `a` (whose layout begins it, as librdmacm's rdma_create_qp copies it)
 * with comp_mask PD | CREATE_FLAGS: the device takes or refuses the flags (rxe: EOPNOTSUPP).
 */
void qp_init_ex_from(const struct ibv_qp_init_attr *a, struct ibv_pd *pd, uint32_t flags, struct ibv_qp_init_attr_ex *x)
{
	memset(x, 0, sizeof(*x));
	memcpy(x, a, sizeof(*a));
	x->comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_CREATE_FLAGS;
	x->pd = pd;
	x->create_flags = flags;
}

/*
 * createQp(pd, sendCq, recvCq, qpType, sendWr, recvWr, sendSge, recvSge, inline, sigAll, key,
 * srq|null, createFlags): ibv_create_qp, or with create flags ibv_create_qp_ex.
 */
static napi_value create_qp(napi_env env, napi_callback_info info)
{
	ARGS(13);
	struct obj *pd = get_obj(env, argv[0], T_PD);
	struct ibv_qp_init_attr a;
	uint32_t flags;
	if (!pd || !qp_init_from(env, argv + 1, &a) || !arg_u32(env, argv[12], &flags))
		return neg_errno(env, EINVAL);
	struct qp_obj *o = qp_wrap_new();
	if (!o)
		return neg_errno(env, ENOMEM);
	o->st = state_of(env);
	errno = 0;
	struct ibv_qp *qp;
	if (flags) {
		struct ibv_qp_init_attr_ex x;
		qp_init_ex_from(&a, pd->ptr, flags, &x);
		qp = ibv_create_qp_ex(((struct ibv_pd *)pd->ptr)->context, &x);
		a.cap = x.cap;
	} else {
		qp = ibv_create_qp(pd->ptr, &a);
	}
	if (!qp) {
		int e = errno;
		free(o);
		return neg_errno(env, e ? e : EINVAL);
	}
	return qp_result(env, o, qp, &a);
}

static void qa_from(const double *v, const uint8_t *gid, struct ibv_qp_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->qp_state = (enum ibv_qp_state)v[QA_STATE];
	a->cur_qp_state = (enum ibv_qp_state)v[QA_CUR_STATE];
	a->qp_access_flags = (unsigned)v[QA_ACCESS];
	a->pkey_index = (uint16_t)v[QA_PKEY_INDEX];
	a->port_num = (uint8_t)v[QA_PORT];
	a->qkey = (uint32_t)v[QA_QKEY];
	a->path_mtu = (enum ibv_mtu)v[QA_PATH_MTU];
	a->timeout = (uint8_t)v[QA_TIMEOUT];
	a->retry_cnt = (uint8_t)v[QA_RETRY_CNT];
	a->rnr_retry = (uint8_t)v[QA_RNR_RETRY];
	a->rq_psn = (uint32_t)v[QA_RQ_PSN];
	a->sq_psn = (uint32_t)v[QA_SQ_PSN];
	a->max_rd_atomic = (uint8_t)v[QA_MAX_RD_ATOMIC];
	a->max_dest_rd_atomic = (uint8_t)v[QA_MAX_DEST_RD_ATOMIC];
	a->min_rnr_timer = (uint8_t)v[QA_MIN_RNR_TIMER];
	a->dest_qp_num = (uint32_t)v[QA_DEST_QPN];
	a->en_sqd_async_notify = (uint8_t)v[QA_EN_SQD_ASYNC];
	a->cap.max_send_wr = (uint32_t)v[QA_MAX_SEND_WR];
	a->cap.max_recv_wr = (uint32_t)v[QA_MAX_RECV_WR];
	a->cap.max_send_sge = (uint32_t)v[QA_MAX_SEND_SGE];
	a->cap.max_recv_sge = (uint32_t)v[QA_MAX_RECV_SGE];
	a->cap.max_inline_data = (uint32_t)v[QA_MAX_INLINE];
	a->path_mig_state = (enum ibv_mig_state)v[QA_PATH_MIG_STATE];
	ah_from(v + QA_AH, gid, &a->ah_attr);
}

void qa_to(const struct ibv_qp_attr *a, double *v, uint8_t *gid)
{
	v[QA_STATE] = a->qp_state;
	v[QA_CUR_STATE] = a->cur_qp_state;
	v[QA_ACCESS] = a->qp_access_flags;
	v[QA_PKEY_INDEX] = a->pkey_index;
	v[QA_PORT] = a->port_num;
	v[QA_QKEY] = a->qkey;
	v[QA_PATH_MTU] = a->path_mtu;
	v[QA_TIMEOUT] = a->timeout;
	v[QA_RETRY_CNT] = a->retry_cnt;
	v[QA_RNR_RETRY] = a->rnr_retry;
	v[QA_RQ_PSN] = a->rq_psn;
	v[QA_SQ_PSN] = a->sq_psn;
	v[QA_MAX_RD_ATOMIC] = a->max_rd_atomic;
	v[QA_MAX_DEST_RD_ATOMIC] = a->max_dest_rd_atomic;
	v[QA_MIN_RNR_TIMER] = a->min_rnr_timer;
	v[QA_DEST_QPN] = a->dest_qp_num;
	v[QA_EN_SQD_ASYNC] = a->en_sqd_async_notify;
	v[QA_SQ_DRAINING] = a->sq_draining;
	v[QA_MAX_SEND_WR] = a->cap.max_send_wr;
	v[QA_MAX_RECV_WR] = a->cap.max_recv_wr;
	v[QA_MAX_SEND_SGE] = a->cap.max_send_sge;
	v[QA_MAX_RECV_SGE] = a->cap.max_recv_sge;
	v[QA_MAX_INLINE] = a->cap.max_inline_data;
	v[QA_PATH_MIG_STATE] = a->path_mig_state;
	ah_to(&a->ah_attr, v + QA_AH, gid);
}

/* modifyQp(qp, mask, attrs: Float64Array, dgid|null) -> 0 | -errno */
static napi_value modify_qp(napi_env env, napi_callback_info info)
{
	ARGS(4);
	struct qp_obj *o = get_obj(env, argv[0], T_QP);
	uint32_t mask;
	double *v;
	uint8_t *gid;
	struct ibv_qp_attr a;
	if (!o || !arg_u32(env, argv[1], &mask) || !f64s(env, argv[2], &v, QA_WORDS) || !gid16(env, argv[3], &gid))
		return neg_errno(env, EINVAL);
	qa_from(v, gid, &a);
	int r = ibv_modify_qp(o->h.ptr, &a, (int)mask);
	return r ? neg_errno(env, r) : num(env, 0);
}

/* queryQp(qp, mask, out: Float64Array, dgidOut|null) -> 0 | -errno */
static napi_value query_qp(napi_env env, napi_callback_info info)
{
	ARGS(4);
	struct qp_obj *o = get_obj(env, argv[0], T_QP);
	uint32_t mask;
	double *v;
	uint8_t *gid;
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;
	if (!o || !arg_u32(env, argv[1], &mask) || !f64s(env, argv[2], &v, QA_WORDS) || !gid16(env, argv[3], &gid))
		return neg_errno(env, EINVAL);
	memset(&a, 0, sizeof a);
	memset(&ia, 0, sizeof ia);
	int r = ibv_query_qp(o->h.ptr, &a, (int)mask, &ia);
	if (r)
		return neg_errno(env, r);
	qa_to(&a, v, gid);
	return num(env, 0);
}

/* qpState(qp) -> enum ibv_qp_state | -errno (ibv_query_qp with IBV_QP_STATE) */
static napi_value qp_state(napi_env env, napi_callback_info info)
{
	ARGS(1);
	struct qp_obj *o = get_obj(env, argv[0], T_QP);
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;
	if (!o)
		return neg_errno(env, EINVAL);
	int r = ibv_query_qp(o->h.ptr, &a, IBV_QP_STATE, &ia);
	return r ? neg_errno(env, r) : num(env, a.qp_state);
}

static napi_value destroy_qp(napi_env env, napi_callback_info info)
{
	ARGS(1);
	struct qp_obj *o = get_obj(env, argv[0], T_QP);
	if (!o)
		return neg_errno(env, EINVAL);
	struct ibv_qp *qp = o->h.ptr;
	int r = ibv_destroy_qp(qp);
	if (r)
		return neg_errno(env, r);
	o->h.ptr = NULL;
	key_slot_drop(o->slot);
	o->slot = 0;
	if (o->cm) {
		/* rdma_destroy_qp's bookkeeping: the id no longer has a QP. */
		if (o->cm->h.ptr && ((struct rdma_cm_id *)o->cm->h.ptr)->qp == qp)
			((struct rdma_cm_id *)o->cm->h.ptr)->qp = NULL;
		o->cm->qp = NULL;
		o->cm = NULL;
	}
	return num(env, 0);
}

/* attachMcast(qp, gid, lid) / detachMcast(qp, gid, lid) -> 0 | -errno */
static napi_value mcast(napi_env env, napi_callback_info info, bool attach)
{
	ARGS(3);
	struct qp_obj *o = get_obj(env, argv[0], T_QP);
	uint8_t *gid;
	uint32_t lid;
	union ibv_gid g;
	if (!o || !gid16(env, argv[1], &gid) || !gid || !arg_u32(env, argv[2], &lid) || lid > 0xffff)
		return neg_errno(env, EINVAL);
	memcpy(g.raw, gid, 16);
	int r = attach ? ibv_attach_mcast(o->h.ptr, &g, (uint16_t)lid) : ibv_detach_mcast(o->h.ptr, &g, (uint16_t)lid);
	return r ? neg_errno(env, r) : num(env, 0);
}

static napi_value attach_mcast(napi_env env, napi_callback_info info)
{
	return mcast(env, info, true);
}

static napi_value detach_mcast(napi_env env, napi_callback_info info)
{
	return mcast(env, info, false);
}

/* --- data path ---------------------------------------------------------------------------- */

static inline uint64_t wr_id_of(const uint32_t *w)
{
	return (uint64_t)w[W_ID_LO] | ((uint64_t)w[W_ID_HI] << 32);
}

/* Decode SGEs [first, first+n) of the scratch; false if out of range. */
static inline bool sges_of(const uint32_t *base, uint32_t first, uint32_t n, struct ibv_sge *out)
{
	if (first > SGE_MAX || n > SGE_MAX - first)
		return false;
	const uint32_t *s = base + SGE_BASE + first * SGE_WORDS;
	for (uint32_t i = 0; i < n; i++, s += SGE_WORDS) {
		double a;
		memcpy(&a, s, 8);
		out[i].addr = (uint64_t)a;
		out[i].length = s[2];
		out[i].lkey = s[3];
	}
	return true;
}

/*
 * ibv_post_send of the n WRs (1 <= n <= WR_MAX) of the WR scratch and their SGEs: 0 or an errno;
 * on failure the index of the first WR not posted is in word WR_STATUS_WORD.
 */
static int post_send_words(struct qp_obj *o, uint32_t n)
{
	struct addon_state *st = o->st;
	struct ibv_send_wr wrs[WR_MAX];
	struct ibv_sge sges[SGE_MAX];
	uint32_t *base = st->wr;
	for (uint32_t i = 0; i < n; i++) {
		const uint32_t *w = base + i * WR_WORDS;
		struct ibv_send_wr *wr = &wrs[i];
		uint32_t first = w[W_SGE0], ns = w[W_NSGE];
		memset(wr, 0, sizeof(*wr));
		if (!sges_of(base, first, ns, sges + (first < SGE_MAX ? first : 0))) {
			base[WR_STATUS_WORD] = i;
			return EINVAL;
		}
		wr->wr_id = wr_id_of(w);
		wr->sg_list = ns ? &sges[first] : NULL;
		wr->num_sge = (int)ns;
		wr->opcode = (enum ibv_wr_opcode)w[W_OPCODE];
		wr->send_flags = w[W_FLAGS];
		if (wr->opcode == IBV_WR_SEND_WITH_INV || wr->opcode == IBV_WR_LOCAL_INV)
			wr->invalidate_rkey = w[W_INV];
		else
			wr->imm_data = htobe32(w[W_IMM]);
		if (wr->opcode == IBV_WR_BIND_MW) {
			if (!bind_wr_from(w, wr)) {
				base[WR_STATUS_WORD] = i;
				return EINVAL;
			}
		} else if (wr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP || wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
			double ra;
			memcpy(&ra, w + W_RADDR, 8);
			wr->wr.atomic.remote_addr = (uint64_t)ra;
			wr->wr.atomic.rkey = w[W_RKEY];
			wr->wr.atomic.compare_add = (uint64_t)w[W_CMP_LO] | (uint64_t)w[W_CMP_HI] << 32;
			wr->wr.atomic.swap = (uint64_t)w[W_SWAP_LO] | (uint64_t)w[W_SWAP_HI] << 32;
		} else if (w[W_AH]) {
			uint32_t ai = w[W_AH] - 1;
			if (ai >= ah_cap || !ah_tab[ai] || !ah_tab[ai]->ptr) {
				base[WR_STATUS_WORD] = i;
				return EINVAL;
			}
			wr->wr.ud.ah = ah_tab[ai]->ptr;
			wr->wr.ud.remote_qpn = w[W_RQPN];
			wr->wr.ud.remote_qkey = w[W_QKEY];
		} else {
			double ra;
			memcpy(&ra, w + W_RADDR, 8);
			wr->wr.rdma.remote_addr = (uint64_t)ra;
			wr->wr.rdma.rkey = w[W_RKEY];
		}
		wr->next = i + 1 < n ? &wrs[i + 1] : NULL;
	}
	struct ibv_send_wr *bad = NULL;
	int r = ibv_post_send(o->h.ptr, wrs, &bad);
	if (r)
		base[WR_STATUS_WORD] = bad ? (uint32_t)(bad - wrs) : 0;
	return r;
}

void *post_args(napi_env env, napi_callback_info info, uint32_t type, uint32_t *n)
{
	size_t argc = 2;
	napi_value argv[2];
	if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok || argc < 2)
		return NULL;
	void *o = get_obj(env, argv[0], type);
	if (!o || napi_get_value_uint32(env, argv[1], n) != napi_ok || *n < 1 || *n > WR_MAX)
		return NULL;
	return o;
}

/* postSend(qp, n) -> 0 | -errno: post_send_words. */
static napi_value post_send(napi_env env, napi_callback_info info)
{
	uint32_t n;
	struct qp_obj *o = post_args(env, info, T_QP, &n);
	if (!o || !o->st || !o->st->wr)
		return neg_errno(env, EINVAL);
	int r = post_send_words(o, n);
	return r ? neg_errno(env, r) : int32(env, 0);
}

/* The n receive WRs of the scratch (words: id, num_sge, first SGE) as a chain in `wrs`. */
static bool recv_wrs_from(const uint32_t *base, uint32_t n, struct ibv_recv_wr *wrs, struct ibv_sge *sges, uint32_t *bad)
{
	for (uint32_t i = 0; i < n; i++) {
		const uint32_t *w = base + i * WR_WORDS;
		uint32_t first = w[W_SGE0], ns = w[W_NSGE];
		if (!sges_of(base, first, ns, sges + (first < SGE_MAX ? first : 0))) {
			*bad = i;
			return false;
		}
		wrs[i].wr_id = wr_id_of(w);
		wrs[i].sg_list = ns ? &sges[first] : NULL;
		wrs[i].num_sge = (int)ns;
		wrs[i].next = i + 1 < n ? &wrs[i + 1] : NULL;
	}
	return true;
}

int post_recv_scratch(uint32_t *base, uint32_t n, struct ibv_qp *qp, struct ibv_srq *srq)
{
	struct ibv_recv_wr wrs[WR_MAX];
	struct ibv_sge sges[SGE_MAX];
	uint32_t at;
	if (!recv_wrs_from(base, n, wrs, sges, &at)) {
		base[WR_STATUS_WORD] = at;
		return EINVAL;
	}
	struct ibv_recv_wr *bad = NULL;
	int r = qp ? ibv_post_recv(qp, wrs, &bad) : ibv_post_srq_recv(srq, wrs, &bad);
	if (r)
		base[WR_STATUS_WORD] = bad ? (uint32_t)(bad - wrs) : 0;
	return r;
}

/* ibv_post_recv of the n receive WRs of the QP's scratch, as post_send_words. */
static int post_recv_words(struct qp_obj *o, uint32_t n)
{
	return post_recv_scratch(o->st->wr, n, o->h.ptr, NULL);
}

/* postRecv(qp, n) -> 0 | -errno: post_recv_words. */
static napi_value post_recv(napi_env env, napi_callback_info info)
{
	uint32_t n;
	struct qp_obj *o = post_args(env, info, T_QP, &n);
	if (!o || !o->st || !o->st->wr)
		return neg_errno(env, EINVAL);
	int r = post_recv_words(o, n);
	return r ? neg_errno(env, r) : int32(env, 0);
}

/*
 * The data path's calls by slot: the QP or CQ named by its slot in the key table (dataSlot) and
 * the count in the WR scratch's words WR_SLOT_WORD and WR_COUNT_WORD, no arguments — an N-API
 * call that reads none costs about half of one that reads a handle and a count. The slot is
 * checked as any handle is (key_slot_get: live, of the right type).
 *   postSendSlot() / postRecvSlot() -> 0 | -errno, as postSend / postRecv
 *   pollCqSlot() -> n | -errno, as pollCq
 */
static struct obj *slot_obj(napi_env env, uint32_t type, struct addon_state **stp)
{
	struct addon_state *st = state_of(env);
	if (!st || !st->wr || !st->wc)
		return NULL;
	struct obj *o = key_slot_get(st->wr[WR_SLOT_WORD], type);
	if (!o)
		return NULL;
	/* The object belongs to this environment's scratch (a worker's objects to its own). */
	if ((type == T_QP ? ((struct qp_obj *)o)->st : ((struct cq_obj *)o)->st) != st)
		return NULL;
	*stp = st;
	return o;
}

/* The QP of the slot call and its WR count (1 .. WR_MAX) in *n, or NULL. */
static struct qp_obj *slot_qp(napi_env env, uint32_t *n)
{
	struct addon_state *st;
	struct qp_obj *o = (struct qp_obj *)slot_obj(env, T_QP, &st);
	if (!o)
		return NULL;
	*n = st->wr[WR_COUNT_WORD];
	return *n < 1 || *n > WR_MAX ? NULL : o;
}

static napi_value post_send_slot(napi_env env, napi_callback_info info)
{
	uint32_t n;
	struct qp_obj *o = slot_qp(env, &n);
	if (!o)
		return neg_errno(env, EINVAL);
	int r = post_send_words(o, n);
	return r ? neg_errno(env, r) : int32(env, 0);
}

static napi_value post_recv_slot(napi_env env, napi_callback_info info)
{
	uint32_t n;
	struct qp_obj *o = slot_qp(env, &n);
	if (!o)
		return neg_errno(env, EINVAL);
	int r = post_recv_words(o, n);
	return r ? neg_errno(env, r) : int32(env, 0);
}

static napi_value poll_cq_slot(napi_env env, napi_callback_info info)
{
	struct addon_state *st;
	struct cq_obj *o = (struct cq_obj *)slot_obj(env, T_CQ, &st);
	if (!o)
		return neg_errno(env, EINVAL);
	return int32(env, poll_words(o, st->wr[WR_COUNT_WORD]));
}

/* dataSlot(qp | cq) -> its slot in the key table (given on first use, dropped when destroyed) | -errno */
static napi_value data_slot(napi_env env, napi_callback_info info)
{
	ARGS(1);
	struct obj *o = get_obj(env, argv[0], T_QP);
	uint32_t *slot;
	if (o)
		slot = &((struct qp_obj *)o)->slot;
	else if ((o = get_obj(env, argv[0], T_CQ)))
		slot = &((struct cq_obj *)o)->slot;
	else
		return neg_errno(env, EINVAL);
	if (!*slot)
		*slot = key_slot_put(o);
	return *slot ? num(env, *slot) : neg_errno(env, ENOMEM);
}

/* --- the C reference loop for `npm run bench` ---------------------------------------------- */

static inline double now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static int poll_one(struct ibv_cq *cq, struct ibv_wc *wc)
{
	for (;;) {
		int n = ibv_poll_cq(cq, 1, wc);
		if (n < 0)
			return -EIO;
		if (n == 1)
			return wc->status == IBV_WC_SUCCESS ? 0 : -EIO;
	}
}

/*
 * cLoopPingPong(qpA, cqA, qpB, cqB, args: Float64Array[addrA, addrB, lkeyA, lkeyB, size,
 * iters]) -> elapsed ns | -errno. Two connected RC QPs of this process, each with one CQ for
 * both directions: A sends `size` bytes to B, B answers, `iters` times, busy-polling — the same
 * sequence of verbs calls bench/native.js makes through the addon. One receive is kept posted
 * on each side; sends are signaled.
 */
static napi_value c_loop_ping_pong(napi_env env, napi_callback_info info)
{
	ARGS(5);
	struct qp_obj *qa = get_obj(env, argv[0], T_QP), *qb = get_obj(env, argv[2], T_QP);
	struct obj *ca = get_obj(env, argv[1], T_CQ), *cb = get_obj(env, argv[3], T_CQ);
	double *v;
	if (!qa || !qb || !ca || !cb || !f64s(env, argv[4], &v, 6))
		return neg_errno(env, EINVAL);
	struct ibv_sge sa = { (uint64_t)v[0], (uint32_t)v[4], (uint32_t)v[2] };
	struct ibv_sge sb = { (uint64_t)v[1], (uint32_t)v[4], (uint32_t)v[3] };
	struct ibv_recv_wr ra = { .wr_id = 1, .sg_list = &sa, .num_sge = 1 }, rb = { .wr_id = 2, .sg_list = &sb, .num_sge = 1 };
	struct ibv_send_wr xa = { .wr_id = 3, .sg_list = &sa, .num_sge = 1, .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED };
	struct ibv_send_wr xb = { .wr_id = 4, .sg_list = &sb, .num_sge = 1, .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED };
	struct ibv_recv_wr *br;
	struct ibv_send_wr *bs;
	struct ibv_wc wc;
	uint64_t iters = (uint64_t)v[5];
	int r;
	double t0 = now_ns();
	for (uint64_t i = 0; i < iters; i++) {
		if ((r = ibv_post_recv(qb->h.ptr, &rb, &br)) || (r = ibv_post_recv(qa->h.ptr, &ra, &br)))
			return neg_errno(env, r);
		if ((r = ibv_post_send(qa->h.ptr, &xa, &bs)))
			return neg_errno(env, r);
		/* B: its receive and A's send completion, in either order */
		if (poll_one(cb->ptr, &wc) || poll_one(ca->ptr, &wc))
			return neg_errno(env, EIO);
		if ((r = ibv_post_send(qb->h.ptr, &xb, &bs)))
			return neg_errno(env, r);
		if (poll_one(ca->ptr, &wc) || poll_one(cb->ptr, &wc))
			return neg_errno(env, EIO);
	}
	return num(env, now_ns() - t0);
}

/* Poll `cq` until `want` completions have come, up to `batch` per ibv_poll_cq; 0 or -errno. */
static int poll_n(struct ibv_cq *cq, struct ibv_wc *wc, int batch, int want)
{
	while (want > 0) {
		int n = ibv_poll_cq(cq, want < batch ? want : batch, wc);
		if (n < 0)
			return -EIO;
		for (int i = 0; i < n; i++)
			if (wc[i].status != IBV_WC_SUCCESS)
				return -EIO;
		want -= n;
	}
	return 0;
}

/*
 * cLoopStream(qpA, cqA, qpB, cqB, args: Float64Array[addrA, addrB, lkeyA, lkeyB, size, iters,
 * batch]) -> elapsed ns | -errno. Messages in batches: each iteration B posts `batch` receives
 * as one list, A posts `batch` signaled SENDs of `size` bytes as one list, then B's CQ is polled
 * for the receives and A's for the sends, up to `batch` completions per ibv_poll_cq — the calls
 * bench/native.js's stream loops make through the addon. batch <= WR_MAX.
 */
static napi_value c_loop_stream(napi_env env, napi_callback_info info)
{
	ARGS(5);
	struct qp_obj *qa = get_obj(env, argv[0], T_QP), *qb = get_obj(env, argv[2], T_QP);
	struct obj *ca = get_obj(env, argv[1], T_CQ), *cb = get_obj(env, argv[3], T_CQ);
	double *v;
	if (!qa || !qb || !ca || !cb || !f64s(env, argv[4], &v, 7) || v[6] < 1 || v[6] > WR_MAX)
		return neg_errno(env, EINVAL);
	const int batch = (int)v[6];
	struct ibv_sge sa = { (uint64_t)v[0], (uint32_t)v[4], (uint32_t)v[2] };
	struct ibv_sge sb = { (uint64_t)v[1], (uint32_t)v[4], (uint32_t)v[3] };
	struct ibv_recv_wr rb[WR_MAX];
	struct ibv_send_wr xa[WR_MAX];
	memset(rb, 0, sizeof rb);
	memset(xa, 0, sizeof xa);
	for (int i = 0; i < batch; i++) {
		rb[i].wr_id = 100 + i;
		rb[i].sg_list = &sb;
		rb[i].num_sge = 1;
		rb[i].next = i + 1 < batch ? &rb[i + 1] : NULL;
		xa[i].wr_id = 200 + i;
		xa[i].sg_list = &sa;
		xa[i].num_sge = 1;
		xa[i].opcode = IBV_WR_SEND;
		xa[i].send_flags = IBV_SEND_SIGNALED;
		xa[i].next = i + 1 < batch ? &xa[i + 1] : NULL;
	}
	struct ibv_recv_wr *br;
	struct ibv_send_wr *bs;
	struct ibv_wc wc[WR_MAX];
	uint64_t iters = (uint64_t)v[5];
	int r;
	double t0 = now_ns();
	for (uint64_t i = 0; i < iters; i++) {
		if ((r = ibv_post_recv(qb->h.ptr, rb, &br)))
			return neg_errno(env, r);
		if ((r = ibv_post_send(qa->h.ptr, xa, &bs)))
			return neg_errno(env, r);
		if (poll_n(cb->ptr, wc, batch, batch) || poll_n(ca->ptr, wc, batch, batch))
			return neg_errno(env, EIO);
	}
	return num(env, now_ns() - t0);
}

void verbs_register(napi_env env, napi_value exports)
{
	EXPORT("deviceList", device_list);
	EXPORT("queryDevice", query_device);
	EXPORT("queryDeviceEx", query_device_ex);
	EXPORT("queryPort", query_port);
	EXPORT("queryGid", query_gid);
	EXPORT("queryPkey", query_pkey);
	EXPORT("watchAsync", watch_async);
	EXPORT("allocPd", alloc_pd);
	EXPORT("deallocPd", dealloc_pd);
	EXPORT("regMr", reg_mr);
	EXPORT("deregMr", dereg_mr);
	EXPORT("createCompChannel", create_comp_channel);
	EXPORT("compChannelRef", comp_channel_ref);
	EXPORT("destroyCompChannel", destroy_comp_channel);
	EXPORT("createCq", create_cq);
	EXPORT("createCqEx", create_cq_ex);
	EXPORT("pollCqEx", poll_cq_ex);
	EXPORT("destroyCq", destroy_cq);
	EXPORT("reqNotifyCq", req_notify_cq);
	EXPORT("ackCqEvents", ack_cq_events);
	EXPORT("pollCq", poll_cq);
	EXPORT("createAh", create_ah);
	EXPORT("destroyAh", destroy_ah);
	EXPORT("createQp", create_qp);
	EXPORT("modifyQp", modify_qp);
	EXPORT("queryQp", query_qp);
	EXPORT("qpState", qp_state);
	EXPORT("destroyQp", destroy_qp);
	EXPORT("attachMcast", attach_mcast);
	EXPORT("detachMcast", detach_mcast);
	EXPORT("postSend", post_send);
	EXPORT("postRecv", post_recv);
	EXPORT("postSendSlot", post_send_slot);
	EXPORT("postRecvSlot", post_recv_slot);
	EXPORT("pollCqSlot", poll_cq_slot);
	EXPORT("dataSlot", data_slot);
	EXPORT("cLoopPingPong", c_loop_ping_pong);
	EXPORT("cLoopStream", c_loop_stream);
	set_num(env, exports, "qaWords", QA_WORDS);
	set_num(env, exports, "ahWords", AH_WORDS);
}
