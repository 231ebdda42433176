/**
 * `rdmacm/wire` capture codecs: the pcapng blocks (pcapng.ts) and the Ethernet/IP/UDP/TCP frame
 * headers (frames.ts) a packet capture of the soft devices is written with (docs/capture.md).
 */
export * from './pcapng.js';
export * from './frames.js';
export * from './mpa-split.js';
