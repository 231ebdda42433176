/**
 * `rdmacm/wire`: the wire formats, as pure codecs (no sockets, no timers, no QP objects), one
 * directory per protocol family. iWARP (src/wire/iwarp/, exported here at the top level as
 * before): the formats Linux siw speaks — RFC 5040 (RDMAP), RFC 5041 (DDP), RFC 5044 (MPA),
 * RFC 6581 (enhanced MPA); byte tables and siw's behaviours in docs/design/iwarp-wire.md.
 *
 * - {@link crc32c}: CRC-32C for MPA trailers (native `@node-rs/crc32` when present, else tables).
 * - MPA start frames: {@link encodeMpaStartFrame}, {@link decodeMpaStartFrame},
 *   {@link validateMpaRequest}, {@link validateMpaReply}; FPDU arithmetic {@link fpduPad},
 *   {@link fpduLength}, {@link writeFpduTrailer}.
 * - DDP/RDMAP: opcode table {@link IWARP_OPCODES}, zero-allocation header writers
 *   {@link writeTaggedHdr}, {@link writeUntaggedHdr}, {@link writeReadRequest}; builder
 *   {@link encodeFpdu}.
 * - {@link FpduDecoder}: incremental FPDU decoder that hands payload views to a sink.
 * - Terminate: {@link encodeTerminate}, {@link decodeTerminate}, {@link termName}.
 *
 * - `roce`: the RoCEv2 / IB CM codecs (see `wire/roce/index.ts`).
 *
 * Receive-side protocol errors are thrown as `TerminateError` (from `errors.ts`) carrying the
 * TERMINATE layer / etype / ecode to send.
 *
 * @packageDocumentation
 */
export * from './iwarp/index.js';
/** The iWARP codecs as a namespace too (`import { iwarp } from 'rdmacm/wire'`), beside `roce`. */
export * as iwarp from './iwarp/index.js';

export { TermLayer, TerminateError } from '../errors.js';

/**
 * RoCEv2 (rdma_rxe) and InfiniBand CM codecs, under their own namespace so that their names
 * (`crc32`, opcode tables, headers) never collide with the iWARP ones: `import { roce } from
 * 'rdmacm/wire'`.
 */
export * as roce from './roce/index.js';

/** The capture file codecs (pcapng blocks, Ethernet/IP/UDP/TCP frame headers): docs/capture.md. */
export * as capture from './capture/index.js';
