/*
 * rdmacm native addon: memory windows — ibv_alloc_mw, ibv_bind_mw (type 1), ibv_dealloc_mw and
 * the BIND_MW work request (type 2) — and the key table that lets a work request in the scratch
 * name an MR or a window: a slot number, from 1, handed out at ibv_reg_mr / ibv_alloc_mw and
 * dropped at ibv_dereg_mr / ibv_dealloc_mw.
 *
 * The application's copy of a window's rkey (`struct ibv_mw`'s rkey, which a C program updates
 * itself after a type 2 bind or an invalidation) is the JavaScript object's: every bind hands it
 * in and it is written into the ibv_mw before the provider reads it (rdma-core's rxe names the
 * window to the kernel by it, convert_send_wr / rxe_bind_mw).
 */
#include "addon.h"
#include <stdlib.h>
#include <string.h>

static struct obj **key_tab;
static uint32_t key_cap;

uint32_t key_slot_put(struct obj *o)
{
	for (uint32_t i = 0; i < key_cap; i++)
		if (!key_tab[i]) {
			key_tab[i] = o;
			return i + 1;
		}
	uint32_t ncap = key_cap ? key_cap * 2 : 64;
	struct obj **n = realloc(key_tab, ncap * sizeof(*n));
	if (!n)
		return 0;
	memset(n + key_cap, 0, (ncap - key_cap) * sizeof(*n));
	key_tab = n;
	uint32_t i = key_cap;
	key_cap = ncap;
	key_tab[i] = o;
	return i + 1;
}

void key_slot_drop(uint32_t slot)
{
	if (slot >= 1 && slot <= key_cap)
		key_tab[slot - 1] = NULL;
}

/* The live object of `type` in `slot`, or NULL. */
struct obj *key_slot_get(uint32_t slot, uint32_t type)
{
	if (slot < 1 || slot > key_cap)
		return NULL;
	struct obj *o = key_tab[slot - 1];
	if (!o || o->magic != OBJ_MAGIC || o->type != type || !o->ptr)
		return NULL;
	return o;
}

/*
 * A BIND_MW work request's operands from its scratch words (addon.h); false when a slot names
 * nothing live. A bind without an MR is refused here: rdma-core's rxe reads the MR's lkey through
 * bind_info.mr whatever the length (convert_send_wr, rxe_bind_mw), so NULL would crash it.
 */
bool bind_wr_from(const uint32_t *w, struct ibv_send_wr *wr)
{
	struct obj *mw = key_slot_get(w[W_AH], T_MW);
	struct obj *mr = key_slot_get(w[W_RQPN], T_MR);
	double addr, len;
	if (!mw || !mr)
		return false;
	memcpy(&addr, w + W_RADDR, 8);
	memcpy(&len, w + W_CMP_LO, 8);
	((struct ibv_mw *)mw->ptr)->rkey = w[W_MW_RKEY];
	wr->bind_mw.mw = mw->ptr;
	wr->bind_mw.rkey = w[W_RKEY];
	wr->bind_mw.bind_info.mr = mr ? mr->ptr : NULL;
	wr->bind_mw.bind_info.addr = (uint64_t)addr;
	wr->bind_mw.bind_info.length = (uint64_t)len;
	wr->bind_mw.bind_info.mw_access_flags = w[W_MW_ACCESS];
	return true;
}

/* allocMw(pd, type) -> [mw, rkey, slot] | -errno */
static napi_value alloc_mw(napi_env env, napi_callback_info info)
{
	ARGS(2);
	struct obj *pd = get_obj(env, argv[0], T_PD);
	uint32_t type;
	if (!pd || !arg_u32(env, argv[1], &type))
		return neg_errno(env, EINVAL);
	struct mw_obj *o = calloc(1, sizeof(*o));
	if (!o)
		return neg_errno(env, ENOMEM);
	errno = 0;
	struct ibv_mw *mw = ibv_alloc_mw(pd->ptr, (enum ibv_mw_type)type);
	if (!mw) {
		int e = errno;
		free(o);
		return neg_errno(env, e ? e : EOPNOTSUPP);
	}
	o->h.magic = OBJ_MAGIC;
	o->h.type = T_MW;
	o->h.ptr = mw;
	o->slot = key_slot_put(&o->h);
	if (!o->slot) {
		ibv_dealloc_mw(mw);
		free(o);
		return neg_errno(env, ENOMEM);
	}
	napi_value arr;
	napi_create_array_with_length(env, 3, &arr);
	napi_set_element(env, arr, 0, wrap_obj(env, &o->h, T_MW, mw));
	napi_set_element(env, arr, 1, num(env, mw->rkey));
	napi_set_element(env, arr, 2, num(env, o->slot));
	return arr;
}

/* deallocMw(mw) -> 0 | -errno */
static napi_value dealloc_mw(napi_env env, napi_callback_info info)
{
	ARGS(1);
	struct mw_obj *o = get_obj(env, argv[0], T_MW);
	if (!o)
		return neg_errno(env, EINVAL);
	int r = ibv_dealloc_mw(o->h.ptr);
	if (r)
		return neg_errno(env, r);
	key_slot_drop(o->slot);
	o->slot = 0;
	o->h.ptr = NULL;
	return num(env, 0);
}

/*
 * bindMw(qp, mw, mwRkey, mr, addr, length, access, wrIdLo, wrIdHi, sendFlags) -> the rkey
 * the provider gave the window | -errno. ibv_bind_mw: libibverbs checks the type and the MR's PD,
 * the provider posts the bind (rxe: a BIND_MW work request) and increments the rkey's key byte.
 */
static napi_value bind_mw(napi_env env, napi_callback_info info)
{
	ARGS(10);
	struct qp_obj *qp = get_obj(env, argv[0], T_QP);
	struct mw_obj *mw = get_obj(env, argv[1], T_MW);
	struct obj *mr = NULL;
	uint32_t rkey, access, lo, hi, flags;
	double addr, len;
	if (!qp || !mw || !arg_u32(env, argv[2], &rkey) || !arg_f64(env, argv[4], &addr) || !arg_f64(env, argv[5], &len) ||
	    !arg_u32(env, argv[6], &access) || !arg_u32(env, argv[7], &lo) || !arg_u32(env, argv[8], &hi) ||
	    !arg_u32(env, argv[9], &flags) || addr < 0 || len < 0)
		return neg_errno(env, EINVAL);
	/* An unbind (no MR) is refused: see bind_wr_from. */
	if (!(mr = get_obj(env, argv[3], T_MR)))
		return neg_errno(env, EINVAL);
	struct ibv_mw *m = mw->h.ptr;
	struct ibv_mw_bind b;
	memset(&b, 0, sizeof b);
	b.wr_id = (uint64_t)lo | (uint64_t)hi << 32;
	b.send_flags = flags;
	b.bind_info.mr = mr ? mr->ptr : NULL;
	b.bind_info.addr = (uint64_t)addr;
	b.bind_info.length = (uint64_t)len;
	b.bind_info.mw_access_flags = access;
	m->rkey = rkey;
	int r = ibv_bind_mw(qp->h.ptr, m, &b);
	return r ? neg_errno(env, r) : num(env, m->rkey);
}

void mw_register(napi_env env, napi_value exports)
{
	EXPORT("allocMw", alloc_mw);
	EXPORT("deallocMw", dealloc_mw);
	EXPORT("bindMw", bind_mw);
}
