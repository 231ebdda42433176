/**
 * Where a packet capture's blocks go: a file (written at explicit offsets, so that what is still
 * queued when the process exits can be written synchronously after what is under way) or a Node
 * writable stream. Never blocks the caller: blocks are queued in memory up to a bound and written
 * asynchronously, one write at a time; a block that does not fit is dropped and counted. The first
 * error stops the writing: it is reported once, and later blocks are dropped.
 */
import fs from 'node:fs';
import type { Writable } from 'node:stream';

/** A destination stream of a capture: what it needs of a Node writable (`write` with a callback). */
export type CaptureStream = Pick<Writable, 'write'> & Partial<Pick<Writable, 'writableNeedDrain' | 'once'>>;

const writers = new Set<CaptureWriter>();

/** Size of the slabs blocks are laid in. */
const SLAB = 256 * 1024;
/** {@link CaptureWriter.slabUsed} of a slab that takes no more blocks. */
const SLAB_FULL = Number.MAX_SAFE_INTEGER;
const EMPTY_SLAB = Buffer.alloc(0);
let exitHooked = false;

/** At exit, every file writer writes what it holds synchronously. */
function hookExit(): void {
  if (exitHooked) return;
  exitHooked = true;
  process.on('exit', () => {
    for (const w of writers) w.flushSync();
  });
}

/** A bounded, asynchronous writer of capture blocks. */
export class CaptureWriter {
  /** Blocks written (handed to the file or stream and accepted). */
  writtenBytes = 0;
  /** Blocks dropped because the queue was full or the writer failed. */
  droppedBlocks = 0;
  /** The first error, once one happened. */
  error: Error | null = null;

  private readonly path: string | null;
  private readonly stream: CaptureStream | null;
  private fd = -1;
  private opening = false;
  /** File offset of the next block queued (files). */
  private pos = 0;
  /** Blocks waiting, with their offsets. */
  private queue: { b: Buffer; at: number }[] = [];
  private queuedBytes = 0;
  /** Blocks under way (files: kept for the synchronous write at exit). */
  private inflight: { b: Buffer; at: number }[] = [];
  private scheduled = false;
  private closing: (() => void)[] = [];
  private closed = false;

  /**
   * @param dest a file path (created or truncated) or a writable stream.
   * @param limitBytes the most bytes queued at once.
   * @param onError called once with the first error.
   */
  constructor(
    dest: string | CaptureStream,
    private readonly limitBytes: number,
    private readonly onError: (e: Error) => void,
  ) {
    this.path = typeof dest === 'string' ? dest : null;
    this.stream = typeof dest === 'string' ? null : dest;
    if (this.path !== null) {
      writers.add(this);
      hookExit();
    }
  }

  /** Bytes queued and not written yet. */
  get pending(): number {
    return this.queuedBytes;
  }

  /**
   * Queue `b`; `force` queues it even past the bound (a block later ones depend on: the section
   * header, an interface description). Returns false when it was dropped.
   */
  push(b: Buffer, force = false): boolean {
    if (this.error !== null || this.closed || (!force && this.queuedBytes + this.slabUsed - this.slabFrom + b.length > this.limitBytes)) {
      this.droppedBlocks++;
      return false;
    }
    this.seal();
    this.enqueue(b);
    return true;
  }

  /**
   * Room for a block of `n` bytes, to be written at {@link slab}[{@link slabAt}] before the next
   * call: blocks are laid side by side in slabs of {@link SLAB} bytes, written in one go. Returns
   * false (and counts the drop) when the bound or an error leaves no room.
   */
  reserve(n: number): boolean {
    if (this.error !== null || this.closed || this.queuedBytes + this.slabUsed - this.slabFrom + n > this.limitBytes) {
      this.droppedBlocks++;
      return false;
    }
    if (n > SLAB / 4) {
      this.seal();
      this.slab = Buffer.allocUnsafe(n);
      this.slabAt = 0;
      this.slabFrom = 0;
      this.slabUsed = n;
      this.seal();
      this.slabFrom = this.slabUsed = SLAB_FULL;
      this.schedule();
      return true;
    }
    if (this.slabUsed + n > this.slab.length) {
      this.seal();
      this.slab = Buffer.allocUnsafe(SLAB);
      this.slabFrom = this.slabUsed = 0;
    }
    this.slabAt = this.slabUsed;
    this.slabUsed += n;
    this.schedule();
    return true;
  }

  /** The slab the last {@link reserve} made room in, and where. */
  slab: Buffer = EMPTY_SLAB;
  slabAt = 0;
  /** The slab's bytes `[slabFrom, slabUsed)` are reserved and not queued yet. */
  private slabFrom = 0;
  private slabUsed = 0;

  /** Queue the slab's reserved bytes not queued yet. */
  private seal(): void {
    if (this.slabUsed > this.slabFrom && this.slabUsed !== SLAB_FULL) {
      this.enqueue(this.slab.subarray(this.slabFrom, this.slabUsed));
      this.slabFrom = this.slabUsed;
    }
  }

  private enqueue(b: Buffer): void {
    this.queue.push({ b, at: this.pos });
    this.pos += b.length;
    this.queuedBytes += b.length;
    this.schedule();
  }

  private schedule(): void {
    if (!this.scheduled && this.inflight.length === 0) {
      this.scheduled = true;
      setImmediate(() => this.pump());
    }
  }

  /** Resolves once everything queued is written (or the writer failed); closes a file. */
  close(): Promise<void> {
    this.seal();
    return new Promise((resolve) => {
      this.closing.push(resolve);
      this.maybeClosed();
    });
  }

  private maybeClosed(): void {
    if (this.closing.length === 0 || this.inflight.length > 0 || (this.queue.length > 0 && this.error === null) || this.opening) return;
    this.closed = true;
    writers.delete(this);
    const done = (): void => {
      const c = this.closing;
      this.closing = [];
      for (const f of c) f();
    };
    if (this.fd >= 0) {
      const fd = this.fd;
      this.fd = -1;
      fs.close(fd, () => done());
    } else done();
  }

  private fail(e: Error): void {
    if (this.error !== null) return;
    this.error = e;
    this.droppedBlocks += this.queue.length;
    this.queue = [];
    this.queuedBytes = 0;
    this.onError(e);
  }

  private pump(): void {
    this.scheduled = false;
    this.seal();
    if (this.error !== null || this.queue.length === 0) {
      this.maybeClosed();
      return;
    }
    if (this.stream !== null) return this.pumpStream();
    if (this.fd < 0) {
      if (this.opening) return;
      this.opening = true;
      fs.open(this.path as string, 'w', (e, fd) => {
        this.opening = false;
        if (e) this.fail(e);
        else this.fd = fd;
        this.pump();
      });
      return;
    }
    const batch = this.queue;
    this.queue = [];
    this.queuedBytes = 0;
    this.inflight = batch;
    const at = (batch[0] as { at: number }).at;
    fs.writev(
      this.fd,
      batch.map((x) => x.b),
      at,
      (e, n) => {
        this.inflight = [];
        if (e) this.fail(e);
        else this.writtenBytes += n;
        this.pump();
      },
    );
  }

  private pumpStream(): void {
    const s = this.stream as CaptureStream;
    const batch = this.queue;
    this.queue = [];
    this.queuedBytes = 0;
    this.inflight = batch;
    const data = batch.length === 1 ? (batch[0] as { b: Buffer }).b : Buffer.concat(batch.map((x) => x.b));
    try {
      s.write(data, (e?: Error | null) => {
        this.inflight = [];
        if (e) this.fail(e);
        else this.writtenBytes += data.length;
        this.pump();
      });
    } catch (e) {
      this.inflight = [];
      this.fail(e as Error);
      this.maybeClosed();
    }
  }

  /** Write what is under way and queued synchronously (process exit; files only). */
  flushSync(): void {
    if (this.path === null || this.error !== null) return;
    this.seal();
    const all = [...this.inflight, ...this.queue];
    if (all.length === 0) return;
    try {
      if (this.fd < 0) this.fd = fs.openSync(this.path, 'w');
      for (const x of all) fs.writeSync(this.fd, x.b, 0, x.b.length, x.at);
      this.queue = [];
      this.inflight = [];
      this.queuedBytes = 0;
    } catch {
      // Exiting: nothing left to report to.
    }
  }
}
