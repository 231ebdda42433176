/**
 * Whether the native backend is worth loading, decided without loading it (this module imports
 * nothing of the backend): the tools load the backend only when this says so.
 */
import { existsSync } from 'node:fs';

/**
 * Whether the native backend should look for devices at all: the kernel has an RDMA class
 * (`/sys/class/infiniband`), or an addon was named explicitly (`RDMACM_NATIVE_PATH`). Spares
 * loading libibverbs, and its provider plug-ins, on machines without RDMA.
 */
export function nativeWanted(): boolean {
  return existsSync('/sys/class/infiniband') || Boolean(process.env['RDMACM_NATIVE_PATH']);
}
