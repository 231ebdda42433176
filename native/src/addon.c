/*
 * rdmacm native addon: module setup, handle wrapping, N-API value conversions, libuv polling.
 */
#include "addon.h"
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct addon_state *state_of(napi_env env)
{
	void *d = NULL;
	if (napi_get_instance_data(env, &d) != napi_ok)
		return NULL;
	return d;
}

napi_value undef(napi_env env)
{
	napi_value v;
	napi_get_undefined(env, &v);
	return v;
}

napi_value num(napi_env env, double d)
{
	napi_value v;
	napi_create_double(env, d, &v);
	return v;
}

napi_value int32(napi_env env, int32_t i)
{
	napi_value v;
	napi_create_int32(env, i, &v);
	return v;
}

napi_value neg_errno(napi_env env, int e)
{
	return num(env, -(double)(e > 0 ? e : EIO));
}

napi_value boolean(napi_env env, bool b)
{
	napi_value v;
	napi_get_boolean(env, b, &v);
	return v;
}

napi_value str(napi_env env, const char *s)
{
	napi_value v;
	napi_create_string_utf8(env, s, NAPI_AUTO_LENGTH, &v);
	return v;
}

bool is_nullish(napi_env env, napi_value v)
{
	napi_valuetype t;
	if (napi_typeof(env, v, &t) != napi_ok)
		return true;
	return t == napi_null || t == napi_undefined;
}

bool arg_f64(napi_env env, napi_value v, double *out)
{
	napi_valuetype t;
	if (napi_typeof(env, v, &t) != napi_ok || t != napi_number)
		return false;
	return napi_get_value_double(env, v, out) == napi_ok;
}

bool arg_i32(napi_env env, napi_value v, int32_t *out)
{
	double d;
	if (!arg_f64(env, v, &d) || d != (double)(int32_t)d)
		return false;
	*out = (int32_t)d;
	return true;
}

bool arg_u32(napi_env env, napi_value v, uint32_t *out)
{
	double d;
	if (!arg_f64(env, v, &d) || d < 0 || d > 4294967295.0 || d != (double)(uint32_t)d)
		return false;
	*out = (uint32_t)d;
	return true;
}

bool arg_bool(napi_env env, napi_value v, bool *out)
{
	napi_valuetype t;
	if (napi_typeof(env, v, &t) != napi_ok || t != napi_boolean)
		return false;
	return napi_get_value_bool(env, v, out) == napi_ok;
}

void set_num(napi_env env, napi_value obj, const char *name, double d)
{
	napi_set_named_property(env, obj, name, num(env, d));
}

void set_val(napi_env env, napi_value obj, const char *name, napi_value v)
{
	napi_set_named_property(env, obj, name, v);
}

/* --- handles ------------------------------------------------------------------------------ */

static void obj_finalize(napi_env env, void *data, void *hint)
{
	struct obj *o = data;
	(void)hint;
	if (!o || o->magic != OBJ_MAGIC)
		return;
	if (o->type == T_MR && o->ptr) {
		/* The JS side keeps registered MRs reachable until ibv_dereg_mr; should one still be
		 * collected, deregister it before its memory can go. */
		struct mr_obj *m = (struct mr_obj *)o;
		if (ibv_dereg_mr(o->ptr) == 0) {
			o->ptr = NULL;
			key_slot_drop(m->slot);
			if (m->buf_ref)
				napi_delete_reference(env, m->buf_ref);
			m->buf_ref = NULL;
		}
	}
	/* Live objects keep their wrapper: libuv handles and other wrappers may point at it. */
	if (o->ptr || o->type == T_CTX)
		return;
	o->magic = 0;
	free(o);
}

napi_value wrap_obj(napi_env env, struct obj *o, uint32_t type, void *ptr)
{
	napi_value v;
	o->magic = OBJ_MAGIC;
	o->type = type;
	o->ptr = ptr;
	if (napi_create_external(env, o, obj_finalize, NULL, &v) != napi_ok)
		return NULL;
	return v;
}

/* The wrapped object of `type` behind `v`, or NULL (not one of ours, wrong type, destroyed). */
void *get_obj(napi_env env, napi_value v, uint32_t type)
{
	void *p = NULL;
	/* napi_get_value_external fails (napi_invalid_arg) on anything but an external. */
	if (napi_get_value_external(env, v, &p) != napi_ok || !p)
		return NULL;
	struct obj *o = p;
	if (o->magic != OBJ_MAGIC || o->type != type || !o->ptr)
		return NULL;
	return o;
}

/* --- calling back into JS ----------------------------------------------------------------- */

void call_js(napi_env env, napi_ref fn, size_t argc, napi_value *argv)
{
	struct addon_state *st = state_of(env);
	napi_value f, recv, res;
	if (!st || !fn)
		return;
	if (napi_get_reference_value(env, fn, &f) != napi_ok || !f)
		return;
	/* napi_make_callback wants an object as `this`. */
	napi_get_global(env, &recv);
	napi_status s = napi_make_callback(env, st->actx, recv, f, argc, argv, &res);
	if (s == napi_pending_exception) {
		napi_value e;
		if (napi_get_and_clear_last_exception(env, &e) == napi_ok)
			napi_fatal_exception(env, e);
	}
}

/* --- libuv polling ------------------------------------------------------------------------ */

int set_nonblock(int fd)
{
	int fl = fcntl(fd, F_GETFL);
	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0)
		return errno;
	return 0;
}

static void poll_closed(uv_handle_t *h)
{
	free(h);
}

/* Watch `fd` for reading; the handle does not keep the loop alive until uv_ref'd. */
int poll_start(napi_env env, uv_poll_t **out, int fd, uv_poll_cb cb, void *data)
{
	struct addon_state *st = state_of(env);
	uv_poll_t *p;
	int r;
	if (!st || !st->loop)
		return EIO;
	r = set_nonblock(fd);
	if (r)
		return r;
	p = calloc(1, uv_handle_size(UV_POLL));
	if (!p)
		return ENOMEM;
	r = uv_poll_init(st->loop, p, fd);
	if (r) {
		free(p);
		return -r;
	}
	p->data = data;
	r = uv_poll_start(p, UV_READABLE, cb);
	if (r) {
		uv_close((uv_handle_t *)p, poll_closed);
		return -r;
	}
	uv_unref((uv_handle_t *)p);
	*out = p;
	return 0;
}


void poll_close(uv_poll_t *p)
{
	if (!p)
		return;
	uv_poll_stop(p);
	p->data = NULL;
	uv_close((uv_handle_t *)p, poll_closed);
}

/* --- setup -------------------------------------------------------------------------------- */

static bool get_ab(napi_env env, napi_value v, void **data, size_t *len)
{
	bool is;
	if (napi_is_arraybuffer(env, v, &is) != napi_ok || !is)
		return false;
	return napi_get_arraybuffer_info(env, v, data, len) == napi_ok;
}

/* setScratch(wrBuffer: ArrayBuffer, wcBuffer: ArrayBuffer) -> 0 | -errno */
static napi_value set_scratch(napi_env env, napi_callback_info info)
{
	ARGS(2);
	struct addon_state *st = state_of(env);
	void *wr, *wc;
	size_t wrn, wcn;
	if (!st || !get_ab(env, argv[0], &wr, &wrn) || !get_ab(env, argv[1], &wc, &wcn))
		return neg_errno(env, EINVAL);
	if (wrn < WR_SCRATCH_WORDS * 4 || wcn < WC_MAX * WC_WORDS * 4 || ((uintptr_t)wr & 7) || ((uintptr_t)wc & 7))
		return neg_errno(env, EINVAL);
	if (st->wr_ref)
		napi_delete_reference(env, st->wr_ref);
	if (st->wc_ref)
		napi_delete_reference(env, st->wc_ref);
	napi_create_reference(env, argv[0], 1, &st->wr_ref);
	napi_create_reference(env, argv[1], 1, &st->wc_ref);
	st->wr = wr;
	st->wr_bytes = wrn;
	st->wc = wc;
	st->wc_bytes = wcn;
	return num(env, 0);
}

static bool is_function(napi_env env, napi_value v)
{
	napi_valuetype t;
	return napi_typeof(env, v, &t) == napi_ok && t == napi_function;
}

/* setHandlers(cqEvent, cmEvent, asyncEvent) -> 0 | -errno */
static napi_value set_handlers(napi_env env, napi_callback_info info)
{
	ARGS(3);
	struct addon_state *st = state_of(env);
	if (!st || !is_function(env, argv[0]) || !is_function(env, argv[1]) || !is_function(env, argv[2]))
		return neg_errno(env, EINVAL);
	napi_ref *refs[3] = { &st->cq_event_cb, &st->cm_event_cb, &st->async_event_cb };
	for (int i = 0; i < 3; i++) {
		if (*refs[i])
			napi_delete_reference(env, *refs[i]);
		napi_create_reference(env, argv[i], 1, refs[i]);
	}
	return num(env, 0);
}

static void state_free(napi_env env, void *data, void *hint)
{
	struct addon_state *st = data;
	(void)hint;
	if (!st)
		return;
	if (st->actx)
		napi_async_destroy(env, st->actx);
	free(st);
}

static napi_value init(napi_env env, napi_value exports)
{
	struct addon_state *st = calloc(1, sizeof(*st));
	napi_value name;
	if (!st)
		return exports;
	st->env = env;
	napi_get_uv_event_loop(env, &st->loop);
	napi_create_string_utf8(env, "rdmacm:native", NAPI_AUTO_LENGTH, &name);
	napi_async_init(env, NULL, name, &st->actx);
	napi_set_instance_data(env, st, state_free, NULL);

	set_val(env, exports, "abi", num(env, ADDON_ABI));
	set_val(env, exports, "wrScratchBytes", num(env, WR_SCRATCH_WORDS * 4));
	set_val(env, exports, "wcScratchBytes", num(env, WC_MAX * WC_WORDS * 4));
	EXPORT("setScratch", set_scratch);
	EXPORT("setHandlers", set_handlers);
	verbs_register(env, exports);
	cm_register(env, exports);
	srq_register(env, exports);
	mw_register(env, exports);
	return exports;
}

NAPI_MODULE(NODE_GYP_MODULE_NAME, init)
