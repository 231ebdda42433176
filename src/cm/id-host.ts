/**
 * What a CM transport sees of an id ({@link CmHost}): one object per id (and per extra transport
 * of a wildcard listener) whose getters read the id live. A class, so that every id's host shares
 * one shape and its accessors live on the prototype rather than being made per id.
 */
import type { Context } from '../verbs/context.js';
import type { Device } from '../verbs/device.js';
import type { QpType } from '../verbs/types.js';
import type { SockAddr } from './addr.js';
import { isLocalAddress } from './device-choice.js';
import type { PortSpace } from './port-space.js';
import type { CmHost, CmTransport, CmUpcall } from './transport.js';

/** The id as its hosts read it: its public face and the seam's internal accessors. */
export interface HostedId {
  readonly ps: PortSpace;
  readonly qpType: QpType;
  readonly verbs: Context | null;
  readonly portNum: number;
  readonly localAddr: SockAddr | null;
  readonly peerAddr: SockAddr | null;
  _hostTag(): string;
  _hostOptions(): CmHost['options'];
  _hostDeviceFor(ip: string, t: CmTransport | null): Device | undefined;
  _hostUpcall(ev: CmUpcall): void;
}

export class IdHost implements CmHost {
  constructor(
    private readonly id: HostedId,
    /** The transport it speaks for; null: the id's own. */
    private readonly speaksFor: CmTransport | null,
  ) {}
  get tag(): string {
    return this.id._hostTag();
  }
  get portSpace(): PortSpace {
    return this.id.ps;
  }
  get qpType(): QpType {
    return this.id.qpType;
  }
  get context(): Context | null {
    return this.id.verbs;
  }
  get portNum(): number {
    return this.id.portNum;
  }
  get localAddr(): SockAddr | null {
    return this.id.localAddr;
  }
  get peerAddr(): SockAddr | null {
    return this.id.peerAddr;
  }
  get options(): CmHost['options'] {
    return this.id._hostOptions();
  }
  deviceFor(ip: string): Device | undefined {
    return this.id._hostDeviceFor(ip, this.speaksFor);
  }
  isLocalAddress(ip: string): boolean {
    return isLocalAddress(ip);
  }
  upcall(ev: CmUpcall): void {
    this.id._hostUpcall(ev);
  }
}
