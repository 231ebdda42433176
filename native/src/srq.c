/*
 * rdmacm native addon: shared receive queues — ibv_create_srq, ibv_modify_srq, ibv_query_srq,
 * ibv_destroy_srq and ibv_post_srq_recv over the WR scratch. The SRQ's srq_context is the key the
 * JavaScript side names it by, so that its async events (IBV_EVENT_SRQ_LIMIT_REACHED,
 * IBV_EVENT_SRQ_ERR) reach the right object (verbs.c async_cb).
 */
#include "addon.h"
#include <stdlib.h>
#include <string.h>

/* createSrq(pd, maxWr, maxSge, srqLimit, key) -> [srq, maxWr, maxSge] | -errno: the sizes the
 * provider gave (ibv_create_srq writes them back into the attributes). */
static napi_value create_srq(napi_env env, napi_callback_info info)
{
	ARGS(5);
	struct obj *pd = get_obj(env, argv[0], T_PD);
	uint32_t wr, sge, limit;
	int32_t key;
	if (!pd || !arg_u32(env, argv[1], &wr) || !arg_u32(env, argv[2], &sge) || !arg_u32(env, argv[3], &limit) ||
	    !arg_i32(env, argv[4], &key))
		return neg_errno(env, EINVAL);
	struct srq_obj *o = calloc(1, sizeof(*o));
	if (!o)
		return neg_errno(env, ENOMEM);
	struct ibv_srq_init_attr a;
	memset(&a, 0, sizeof a);
	a.srq_context = (void *)(intptr_t)key;
	a.attr.max_wr = wr;
	a.attr.max_sge = sge;
	a.attr.srq_limit = limit;
	errno = 0;
	struct ibv_srq *srq = ibv_create_srq(pd->ptr, &a);
	if (!srq) {
		int e = errno;
		free(o);
		return neg_errno(env, e ? e : ENOMEM);
	}
	o->st = state_of(env);
	napi_value arr;
	napi_create_array_with_length(env, 3, &arr);
	napi_set_element(env, arr, 0, wrap_obj(env, &o->h, T_SRQ, srq));
	napi_set_element(env, arr, 1, num(env, a.attr.max_wr));
	napi_set_element(env, arr, 2, num(env, a.attr.max_sge));
	return arr;
}

/* modifySrq(srq, mask, maxWr, srqLimit) -> 0 | -errno (IBV_SRQ_MAX_WR, IBV_SRQ_LIMIT) */
static napi_value modify_srq(napi_env env, napi_callback_info info)
{
	ARGS(4);
	struct obj *o = get_obj(env, argv[0], T_SRQ);
	uint32_t mask, wr, limit;
	if (!o || !arg_u32(env, argv[1], &mask) || !arg_u32(env, argv[2], &wr) || !arg_u32(env, argv[3], &limit))
		return neg_errno(env, EINVAL);
	struct ibv_srq_attr a;
	memset(&a, 0, sizeof a);
	a.max_wr = wr;
	a.srq_limit = limit;
	int r = ibv_modify_srq(o->ptr, &a, (int)mask);
	return r ? neg_errno(env, r) : num(env, 0);
}

/* querySrq(srq) -> [maxWr, maxSge, srqLimit] | -errno */
static napi_value query_srq(napi_env env, napi_callback_info info)
{
	ARGS(1);
	struct obj *o = get_obj(env, argv[0], T_SRQ);
	if (!o)
		return neg_errno(env, EINVAL);
	struct ibv_srq_attr a;
	memset(&a, 0, sizeof a);
	int r = ibv_query_srq(o->ptr, &a);
	if (r)
		return neg_errno(env, r);
	napi_value arr;
	napi_create_array_with_length(env, 3, &arr);
	napi_set_element(env, arr, 0, num(env, a.max_wr));
	napi_set_element(env, arr, 1, num(env, a.max_sge));
	napi_set_element(env, arr, 2, num(env, a.srq_limit));
	return arr;
}

/* destroySrq(srq) -> 0 | -errno (EBUSY while QPs use it, the kernel's answer) */
static napi_value destroy_srq(napi_env env, napi_callback_info info)
{
	ARGS(1);
	struct obj *o = get_obj(env, argv[0], T_SRQ);
	if (!o)
		return neg_errno(env, EINVAL);
	int r = ibv_destroy_srq(o->ptr);
	if (r)
		return neg_errno(env, r);
	o->ptr = NULL;
	return num(env, 0);
}

/* postSrqRecv(srq, n) -> 0 | -errno, as postRecv; the first WR not posted in WR_STATUS_WORD. */
static napi_value post_srq_recv(napi_env env, napi_callback_info info)
{
	uint32_t n;
	struct srq_obj *o = post_args(env, info, T_SRQ, &n);
	if (!o || !o->st || !o->st->wr)
		return neg_errno(env, EINVAL);
	int r = post_recv_scratch(o->st->wr, n, NULL, o->h.ptr);
	return r ? neg_errno(env, r) : int32(env, 0);
}

void srq_register(napi_env env, napi_value exports)
{
	EXPORT("createSrq", create_srq);
	EXPORT("modifySrq", modify_srq);
	EXPORT("querySrq", query_srq);
	EXPORT("destroySrq", destroy_srq);
	EXPORT("postSrqRecv", post_srq_recv);
}
