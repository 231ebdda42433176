/*
 * rdmacm native addon: shared declarations.
 *
 * The addon is a thin N-API layer over libibverbs and librdmacm. The JavaScript side
 * (src/native/) checks every argument before calling in; the C side still checks what it must to
 * never crash: every handle is an N-API external wrapping a small header with a magic number and a
 * type, and a destroyed object keeps its header (with a NULL pointer) until the external is
 * garbage collected, so a stale handle yields -EINVAL instead of a use after free.
 *
 * Errors: functions return a negative errno number (a JS number) instead of throwing; the JS side
 * turns it into an RdmaError naming the ibverbs/librdmacm call.
 */
#ifndef RDMACM_ADDON_H
#define RDMACM_ADDON_H

#define NAPI_VERSION 8
#include <node_api.h>
#include <uv.h>
#include <errno.h>
#include <stdint.h>
#include <stdbool.h>
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

/* Bumped whenever an exported function changes its arguments or results. */
#define ADDON_ABI 3

#define OBJ_MAGIC 0x52434d4eu /* "RCMN" */

enum obj_type { T_CTX = 1, T_PD, T_MR, T_CQ, T_CHAN, T_QP, T_AH, T_CMID, T_SRQ, T_MW };

/* Common header of every wrapped object. `ptr` is the rdma-core object, NULL once destroyed. */
struct obj {
	uint32_t magic;
	uint32_t type;
	void *ptr;
};

struct ctx_obj {
	struct obj h;
	struct ibv_context *ctx;
	uv_poll_t *async_poll; /* watches ctx->async_fd once asked to */
	struct addon_state *st;
	int32_t key;
};

struct mr_obj {
	struct obj h;
	napi_ref buf_ref; /* keeps the registered memory alive until ibv_dereg_mr */
	uint32_t slot;    /* its index in the key table (BIND_MW work requests name MRs by it) */
};

/* An SRQ or a memory window: the data path names them by their slot in the key table. */
struct srq_obj {
	struct obj h;
	struct addon_state *st; /* for ibv_post_srq_recv: the scratch buffers */
};

struct mw_obj {
	struct obj h;
	uint32_t slot;
};

struct chan_obj {
	struct obj h;
	uv_poll_t *poll;
	struct addon_state *st;
	int32_t key;
	int refs; /* JS readers waiting: the poll handle keeps the loop alive while > 0 */
};

struct cmid_obj;

struct qp_obj {
	struct obj h;
	struct cmid_obj *cm; /* the rdma_cm_id that created it (rdma_create_qp), or NULL */
	struct addon_state *st; /* for the data path: the scratch buffers */
	uint32_t slot;          /* its key-table slot once dataSlot gave it one (0: none) */
};

struct cq_obj {
	struct obj h;
	struct addon_state *st;
	/* Made by ibv_create_cq_ex (createCqEx): polled with ibv_start_poll (pollCqEx). */
	struct ibv_cq_ex *ex;
	uint64_t wc_flags;
	uint32_t slot; /* its key-table slot once dataSlot gave it one (0: none) */
};

struct cmid_obj {
	struct obj h;
	struct qp_obj *qp; /* the QP made by rdma_create_qp, while it lives */
};

/* Per-environment state (napi_set_instance_data). */
struct addon_state {
	napi_env env;
	uv_loop_t *loop;
	napi_ref cq_event_cb;    /* (chanKey, cqKey) */
	napi_ref cm_event_cb;    /* (event object) */
	napi_ref async_event_cb; /* (ctxKey, type, kind, key) */
	napi_async_context actx;
	/* Data path scratch buffers, allocated by JS and shared (see src/native/binding.ts; layouts in src/native/abi.ts). */
	napi_ref wr_ref, wc_ref;
	uint32_t *wr;  /* send/recv WR encoding */
	size_t wr_bytes;
	uint32_t *wc;  /* polled completions */
	size_t wc_bytes;
	/* librdmacm */
	struct rdma_event_channel *cm_chan;
	uv_poll_t *cm_poll;
	int cm_refs;
	bool cm_tried;
	int cm_init_err;
};

/* Scratch layout, in 32-bit words. Keep in sync with src/native/abi.ts. */
#define WR_WORDS 20        /* one work request */
#define WR_MAX 32          /* work requests per call */
#define SGE_WORDS 4        /* one SGE: addr (f64), length, lkey */
#define SGE_MAX 256        /* SGEs per call */
#define SGE_BASE (WR_MAX * WR_WORDS) /* first SGE word */
#define WR_STATUS_WORD (SGE_BASE + SGE_MAX * SGE_WORDS) /* bad WR index after a failed post */
#define WR_SLOT_WORD (WR_STATUS_WORD + 1)   /* the *Slot calls' QP or CQ (its key-table slot) */
#define WR_COUNT_WORD (WR_STATUS_WORD + 2)  /* and their WR count or poll maximum */
#define WR_SCRATCH_WORDS (WR_STATUS_WORD + 4)
#define WC_WORDS 12        /* one completion */
#define WC_MAX 64          /* completions per call */

/* WR word offsets */
#define W_ID_LO 0
#define W_ID_HI 1
#define W_OPCODE 2
#define W_FLAGS 3
#define W_NSGE 4
#define W_SGE0 5
#define W_IMM 6
#define W_RKEY 7
#define W_RADDR 8 /* f64, 8-byte aligned */
#define W_INV 10
#define W_QKEY 11
#define W_AH 12
#define W_RQPN 13
#define W_MW_ACCESS 14 /* BIND_MW: mw_access_flags */
#define W_MW_RKEY 15   /* BIND_MW and ibv_bind_mw: the window's rkey as the application has it */
/* BIND_MW: the window's slot in W_AH, the MR's slot (0: none) in W_RQPN, the new rkey in W_RKEY,
 * the address at W_RADDR and the length (f64) at W_CMP_LO. */
#define W_CMP_LO 16 /* atomic compare (CAS) or add (FAA) operand, low and high 32 bits */
#define W_CMP_HI 17
#define W_SWAP_LO 18 /* CAS swap operand */
#define W_SWAP_HI 19

/* AH attribute layout in a Float64Array (see AH in src/native/abi.ts). */
enum { AH_DLID, AH_SL, AH_SRC_PATH_BITS, AH_STATIC_RATE, AH_IS_GLOBAL, AH_PORT, AH_FLOW_LABEL, AH_SGID_INDEX,
       AH_HOP_LIMIT, AH_TCLASS, AH_WORDS };

/* QP attribute layout in a Float64Array (see QA in src/native/abi.ts). */
enum { QA_STATE, QA_CUR_STATE, QA_ACCESS, QA_PKEY_INDEX, QA_PORT, QA_QKEY, QA_PATH_MTU, QA_TIMEOUT, QA_RETRY_CNT,
       QA_RNR_RETRY, QA_RQ_PSN, QA_SQ_PSN, QA_MAX_RD_ATOMIC, QA_MAX_DEST_RD_ATOMIC, QA_MIN_RNR_TIMER, QA_DEST_QPN,
       QA_EN_SQD_ASYNC, QA_SQ_DRAINING, QA_MAX_SEND_WR, QA_MAX_RECV_WR, QA_MAX_SEND_SGE, QA_MAX_RECV_SGE,
       QA_MAX_INLINE, QA_PATH_MIG_STATE, QA_AH, QA_WORDS = QA_AH + AH_WORDS };

/* shared functions (addon.c) */
struct addon_state *state_of(napi_env env);
void *get_obj(napi_env env, napi_value v, uint32_t type);
napi_value wrap_obj(napi_env env, struct obj *o, uint32_t type, void *ptr);
napi_value num(napi_env env, double d);
napi_value int32(napi_env env, int32_t i);
napi_value neg_errno(napi_env env, int e);
napi_value undef(napi_env env);
napi_value boolean(napi_env env, bool b);
napi_value str(napi_env env, const char *s);
bool arg_i32(napi_env env, napi_value v, int32_t *out);
bool arg_u32(napi_env env, napi_value v, uint32_t *out);
bool arg_f64(napi_env env, napi_value v, double *out);
bool arg_bool(napi_env env, napi_value v, bool *out);
bool is_nullish(napi_env env, napi_value v);
void set_num(napi_env env, napi_value obj, const char *name, double d);
void set_val(napi_env env, napi_value obj, const char *name, napi_value v);
void call_js(napi_env env, napi_ref fn, size_t argc, napi_value *argv);
int poll_start(napi_env env, uv_poll_t **out, int fd, uv_poll_cb cb, void *data);
void poll_close(uv_poll_t *p);
int set_nonblock(int fd);

#define ARGS(n)                                                                   \
	size_t argc = (n);                                                            \
	napi_value argv[(n) > 0 ? (n) : 1];                                           \
	if (napi_get_cb_info(env, info, &argc, argv, NULL, NULL) != napi_ok) return NULL; \
	if (argc < (n)) return neg_errno(env, EINVAL)

/* the key table of MRs and memory windows (mw.c): slots from 1, 0 names nothing */
uint32_t key_slot_put(struct obj *o);
void key_slot_drop(uint32_t slot);
struct obj *key_slot_get(uint32_t slot, uint32_t type);
bool bind_wr_from(const uint32_t *w, struct ibv_send_wr *wr);
/*
 * The (object, count) arguments of a posting call (verbs.c): the object of `type` and its count in
 * *n (1 .. WR_MAX), or NULL for anything else.
 */
void *post_args(napi_env env, napi_callback_info info, uint32_t type, uint32_t *n);
/*
 * ibv_post_recv to `qp` (or ibv_post_srq_recv to `srq` when qp is NULL) of the n receive WRs of
 * the scratch `base` (verbs.c): 0 or the errno, the first WR not posted in WR_STATUS_WORD.
 */
int post_recv_scratch(uint32_t *base, uint32_t n, struct ibv_qp *qp, struct ibv_srq *srq);

/* registration */
void verbs_register(napi_env env, napi_value exports);
void cm_register(napi_env env, napi_value exports);
void srq_register(napi_env env, napi_value exports);
void mw_register(napi_env env, napi_value exports);
napi_value ah_attr_value(napi_env env, const struct ibv_ah_attr *ah);
struct qp_obj *qp_wrap_new(void);
bool qp_init_from(napi_env env, napi_value *argv, struct ibv_qp_init_attr *a);
void qp_init_ex_from(const struct ibv_qp_init_attr *a, struct ibv_pd *pd, uint32_t flags, struct ibv_qp_init_attr_ex *x);
void qa_to(const struct ibv_qp_attr *a, double *v, uint8_t *gid);
bool f64s(napi_env env, napi_value v, double **out, size_t min);
bool gid16(napi_env env, napi_value v, uint8_t **out);
bool bytes_of(napi_env env, napi_value v, void **data, size_t *len);
napi_value qp_result(napi_env env, struct qp_obj *o, struct ibv_qp *qp, const struct ibv_qp_init_attr *a);

#define EXPORT(name, fn)                                                          \
	do {                                                                          \
		napi_value f_;                                                            \
		napi_create_function(env, name, NAPI_AUTO_LENGTH, fn, NULL, &f_);         \
		napi_set_named_property(env, exports, name, f_);                          \
	} while (0)

#endif
