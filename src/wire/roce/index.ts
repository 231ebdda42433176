/**
 * `rdmacm/wire` → `roce`: RoCEv2 as Linux rdma_rxe speaks it, and the InfiniBand CM that runs over
 * it, as pure codecs (no sockets, no timers, no QP objects). Facts and byte tables:
 * docs/design/roce.md; IBTA vol. 1 chapters 9 (transport), 12 (CM), 13 (MADs) and annex A17
 * (RoCEv2).
 *
 * - Opcodes: {@link IB_OPCODES} (rxe-style table), {@link IbOpcode}, {@link OpMask}, {@link Hdr},
 *   AETH syndromes and credit codes.
 * - Headers: BTH accessors (`bthOpcode`, `setBthPsn`, {@link writeBth}, ...), extension headers
 *   (`dethQkey`, `writeReth`, ...), PSN arithmetic (`psnAdd`, `psnDiff`, ...).
 * - ICRC: {@link icrcCompute}, {@link icrcVerify}, {@link icrcSolveIpv4Id}, CRC-32 backends, IP
 *   header writers for the UD GRH area.
 * - Packets: {@link parseRocePacket} (zero-allocation, {@link RoceDrop} reasons),
 *   {@link writeRoceHeaders} / {@link finishRocePacket}, {@link encodeRocePacket} /
 *   {@link decodeRocePacket}, {@link roceUdpSrcPort}, MTU functions.
 *
 * @packageDocumentation
 */
export * from './opcodes.js';
export * from './bth.js';
export * from './psn.js';
export * from './headers.js';
export * from './icrc.js';
export * from './packet.js';
export * from './mad.js';
export * from './cm-mad.js';
export * from './cma.js';
