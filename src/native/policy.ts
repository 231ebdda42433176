/**
 * When the native backend is worth loading, decided without loading it: this module imports
 * nothing of the backend (the one native module a tool run over the soft devices loads). The
 * connection tools ask {@link when} through the transport manifest (src/transports.ts).
 */
import { existsSync } from 'node:fs';
import type { Backend } from '../verbs/provider.js';

/**
 * Whether the native backend should look for devices at all: the kernel has an RDMA class
 * (`/sys/class/infiniband`), or an addon was named explicitly (`RDMACM_NATIVE_PATH`). Spares
 * loading libibverbs, and its provider plug-ins, on machines without RDMA.
 */
export function nativeWanted(env: NodeJS.ProcessEnv = process.env): boolean {
  return existsSync('/sys/class/infiniband') || Boolean(env['RDMACM_NATIVE_PATH']);
}

/**
 * A connection tool loads the native backend at start when the backend selection admits kernel
 * devices and {@link nativeWanted} says there may be some; otherwise never (no later call of the
 * tool can reach a kernel device).
 */
export function when(ctx: { readonly env: NodeJS.ProcessEnv; readonly backend: Backend }): 'now' | 'never' {
  return ctx.backend !== 'soft' && nativeWanted(ctx.env) ? 'now' : 'never';
}
