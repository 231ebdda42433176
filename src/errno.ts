/**
 * Linux errno names and numbers (x86-64/generic values) and their strerror() texts, as glibc
 * prints them. Every error this package raises carries one of these, so users can match on
 * `err.code` exactly as they would on a Node `SystemError` or on librdmacm's `errno`.
 */

/** errno name → [number, strerror text]. */
const TABLE = {
  EPERM: [1, 'Operation not permitted'],
  ENOENT: [2, 'No such file or directory'],
  EINTR: [4, 'Interrupted system call'],
  EIO: [5, 'Input/output error'],
  ENXIO: [6, 'No such device or address'],
  E2BIG: [7, 'Argument list too long'],
  EBADF: [9, 'Bad file descriptor'],
  EAGAIN: [11, 'Resource temporarily unavailable'],
  ENOMEM: [12, 'Cannot allocate memory'],
  EACCES: [13, 'Permission denied'],
  EFAULT: [14, 'Bad address'],
  EBUSY: [16, 'Device or resource busy'],
  EEXIST: [17, 'File exists'],
  ENODEV: [19, 'No such device'],
  ENOTDIR: [20, 'Not a directory'],
  EISDIR: [21, 'Is a directory'],
  EINVAL: [22, 'Invalid argument'],
  ENFILE: [23, 'Too many open files in system'],
  EMFILE: [24, 'Too many open files'],
  EFBIG: [27, 'File too large'],
  ENOSPC: [28, 'No space left on device'],
  EROFS: [30, 'Read-only file system'],
  EPIPE: [32, 'Broken pipe'],
  ERANGE: [34, 'Numerical result out of range'],
  ENAMETOOLONG: [36, 'File name too long'],
  ENOSYS: [38, 'Function not implemented'],
  ENODATA: [61, 'No data available'],
  ETIME: [62, 'Timer expired'],
  EPROTO: [71, 'Protocol error'],
  EBADMSG: [74, 'Bad message'],
  EOVERFLOW: [75, 'Value too large for defined data type'],
  EDESTADDRREQ: [89, 'Destination address required'],
  EMSGSIZE: [90, 'Message too long'],
  ENOPROTOOPT: [92, 'Protocol not available'],
  EPROTONOSUPPORT: [93, 'Protocol not supported'],
  EOPNOTSUPP: [95, 'Operation not supported'],
  EAFNOSUPPORT: [97, 'Address family not supported by protocol'],
  EADDRINUSE: [98, 'Address already in use'],
  EADDRNOTAVAIL: [99, 'Cannot assign requested address'],
  ENETDOWN: [100, 'Network is down'],
  ENETUNREACH: [101, 'Network is unreachable'],
  ECONNABORTED: [103, 'Software caused connection abort'],
  ECONNRESET: [104, 'Connection reset by peer'],
  ENOBUFS: [105, 'No buffer space available'],
  EISCONN: [106, 'Transport endpoint is already connected'],
  ENOTCONN: [107, 'Transport endpoint is not connected'],
  ESHUTDOWN: [108, 'Cannot send after transport endpoint shutdown'],
  ETIMEDOUT: [110, 'Connection timed out'],
  ECONNREFUSED: [111, 'Connection refused'],
  EHOSTDOWN: [112, 'Host is down'],
  EHOSTUNREACH: [113, 'No route to host'],
  EALREADY: [114, 'Operation already in progress'],
  EINPROGRESS: [115, 'Operation now in progress'],
  ECANCELED: [125, 'Operation canceled'],
  /** The kernel's internal ENOTSUPP (include/linux/errno.h): glibc has no text for it. */
  ENOTSUPP: [524, 'Unknown error 524'],
} as const satisfies Record<string, readonly [number, string]>;

/** An errno name this package uses, e.g. `'EINVAL'`. */
export type ErrnoCode = keyof typeof TABLE;

/** `ENOTSUP` is the same number as `EOPNOTSUPP` on Linux. */
export const ENOTSUP = TABLE.EOPNOTSUPP[0];

const BY_NUMBER = new Map<number, ErrnoCode>();
for (const [name, [num]] of Object.entries(TABLE)) BY_NUMBER.set(num, name as ErrnoCode);

/** errno number for a name (`errnoOf('EINVAL') === 22`). */
export function errnoOf(code: ErrnoCode): number {
  return TABLE[code][0];
}

/** errno name for a number, or `undefined` if it is not one this package knows. */
export function codeOf(errno: number): ErrnoCode | undefined {
  return BY_NUMBER.get(Math.abs(errno));
}

/** glibc's strerror() text for an errno number (`Unknown error N` otherwise). */
export function strerror(errno: number): string {
  const code = BY_NUMBER.get(Math.abs(errno));
  return code ? TABLE[code][1] : `Unknown error ${errno}`;
}

/** Errno numbers by name, for callers that want constants (`Errno.EINVAL === 22`). */
export const Errno: { readonly [K in ErrnoCode]: number } = Object.freeze(
  Object.fromEntries(Object.entries(TABLE).map(([k, v]) => [k, v[0]])) as { [K in ErrnoCode]: number },
);

/** Whether `s` names an errno this package knows (a Node system error's `code`, say). */
export function isErrnoCode(s: string): s is ErrnoCode {
  return Object.prototype.hasOwnProperty.call(TABLE, s);
}
