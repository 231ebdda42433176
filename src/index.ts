/**
 * rdmacm: the RDMA connection manager (librdmacm), verbs and the librdmacm tools in TypeScript,
 * over software devices that speak the real wire protocols — iWARP as Linux siw (MPA/DDP/RDMAP over
 * TCP), RoCEv2 as Linux rdma_rxe (BTH/DETH/ICRC over UDP 4791) — and, through the optional native
 * addon, the kernel's own RDMA devices.
 *
 * ```ts
 * import { createId, PortSpace, getDeviceList } from 'rdmacm';
 * const id = createId(null, null, PortSpace.TCP);            // synchronous id
 * await id.resolveAddr(null, { address: '127.0.0.1', port: 7174 });
 * await id.resolveRoute();
 * id.createQp(null, { cap: { maxSendWr: 16, maxRecvWr: 16 } });
 * await id.connect({ responderResources: 1, initiatorDepth: 1 });
 * ```
 * @packageDocumentation
 */
/** Loads the transports; each one's settings: `iwarp`, `roce`, `native` (src/transport-settings.ts). */
// Symbol.dispose / Symbol.asyncDispose before any class that defines disposers (Node < 20.4 lacks them).
import './util/dispose.js';
export * from './transport-settings.js';
export * from './verbs/index.js';
export * from './cm/index.js';
export { RdmaError, PostError, TerminateError, type RdmaErrorOptions } from './errors.js';
export { AbortError } from './util/abort.js';
export { Errno, errnoOf, strerror, type ErrnoCode } from './errno.js';
/**
 * Tracing through `node:diagnostics_channel`: a channel `rdmacm:<subsystem>` per subsystem carrying
 * {@link TraceMessage}s, and the stderr printer `RDMA_TRACE` / `NODE_DEBUG=rdmacm` start (docs/tracing.md).
 */
export {
  TRACE_NAMES,
  TRACE_CHANNELS,
  TraceMessage,
  type AnyTraceMessage,
  enableTrace,
  disableTrace,
  setTrace,
  printedTraces,
  tracing,
  type TraceName,
  type TraceEvent,
  type TraceEventFields,
} from './trace.js';
/**
 * Counters and resources like `rdma statistic` / `rdma resource`: this process's
 * (`listResources()`, `Context.queryCounters()`), the kernel's, and every process's of this host
 * that uses a soft device (`readProcesses()`; the `rdmacm-stat` tool). docs/counters.md.
 */
export {
  listResources,
  kernelResources,
  RESOURCE_KINDS,
  readProcesses,
  statReport,
  type ResourceKind,
  type ResourceRecord,
  type Resources,
  type StatReport,
  type DeviceReport,
  type ProcessScan,
  type SkippedProcess,
} from './stat/index.js';
/** rsockets: `rsocket.connect()` / `rsocket.createServer()` give Node `Duplex` streams over RDMA. */
export * as rsocket from './rsocket/index.js';
// Packet capture: exported by the entry points, not by verbs/index.ts, so that the tools' face
// (src/cli/api.ts) loads no capture codec unless a device starts a capture.
export { startCapture, activeCaptures, Capture, CAPTURE_BUFFER_DEFAULT, CAPTURE_SNAPLEN_DEFAULT, type CaptureOptions, type CaptureStats, type CaptureDirection } from './verbs/capture.js';
export type { CaptureStream } from './verbs/capture-writer.js';
