/**
 * The `rdmacm/verbs` entry point: the verbs API with the built-in providers loaded (the soft iWARP
 * and RoCEv2 devices, and the native backend where its addon is built), like linking libibverbs
 * with its providers installed.
 * @packageDocumentation
 */
/** Loads the transports; each one's settings: `iwarp`, `roce`, `native` (src/transport-settings.ts). */
// Symbol.dispose / Symbol.asyncDispose before any class that defines disposers (Node < 20.4 lacks them).
import './util/dispose.js';
export * from './transport-settings.js';
export * from './verbs/index.js';
// Packet capture: exported by the entry points, not by verbs/index.ts, so that the tools' face
// (src/cli/api.ts) loads no capture codec unless a device starts a capture.
export { startCapture, activeCaptures, Capture, CAPTURE_BUFFER_DEFAULT, CAPTURE_SNAPLEN_DEFAULT, type CaptureOptions, type CaptureStats, type CaptureDirection } from './verbs/capture.js';
export type { CaptureStream } from './verbs/capture-writer.js';
