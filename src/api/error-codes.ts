// What kind of failure an error is, by its errno name (`err.code`: 'EBUSY'), and the HTTP status that kind becomes
// (docs/engine.md, "API errors"). The VMM's errors carry these codes from C (native/vmm/error.h) through the binding
// and the vmhost; the engine's own file and socket calls carry Node's. A known kind is never a 500.
export type FailureStatus = 400 | 403 | 404 | 409 | 503 | 507;

const KINDS: Record<FailureStatus, readonly string[]> = {
  /** The request is wrong: a value out of range, a file that is not what it should be, a name too long. */
  400: [
    ...['EINVAL', 'ENOEXEC', 'E2BIG', 'ERANGE', 'ENAMETOOLONG', 'ENOTDIR', 'EISDIR', 'ELOOP'],
    ...['EBADMSG', 'EFBIG', 'EOVERFLOW', 'ENOTSUP', 'EOPNOTSUPP'],
  ],
  /** Not allowed: a file or device this user may not open, a read-only file system. */
  403: ['EACCES', 'EPERM', 'EROFS'],
  /** Gone: a snapshot, disk layer or kernel that is not there, a VM that has exited. */
  404: ['ENOENT', 'ESRCH', 'ENODEV', 'ENXIO'],
  /** Busy, or in a state that conflicts: a checkpoint holds the VM, it is paused already, the file exists. */
  409: ['EBUSY', 'EEXIST', 'EALREADY', 'EINPROGRESS', 'ENOTEMPTY', 'ETXTBSY'],
  /** The host ran out of something; the same request may work later. */
  503: ['ENOMEM', 'EMFILE', 'ENFILE', 'EAGAIN', 'ENOBUFS'],
  /** The data dir's file system is full, or at the engine's reserve (Insufficient Storage): remove something first. */
  507: ['ENOSPC', 'EDQUOT'],
};

const STATUS_OF = new Map<string, FailureStatus>(
  Object.entries(KINDS).flatMap(([status, codes]) => codes.map((code) => [code, Number(status) as FailureStatus])),
);

/** The HTTP status for an errno name, or undefined for a code of no known kind (then the failure is a 500). */
export function statusForCode(code: string | undefined): FailureStatus | undefined {
  return code === undefined ? undefined : STATUS_OF.get(code);
}

/** The `code` an error carries (a string such as 'EBUSY'), if any. */
export function codeOf(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}

/** What of an error crosses a process boundary: the vmhost's replies carry it, the engine makes an Error of it again. */
export interface ErrorData {
  name: string;
  message: string;
  code?: string;
  errno?: number;
}

export function errorData(error: unknown): ErrorData {
  if (!(error instanceof Error)) return { name: 'Error', message: String(error) };
  const { errno } = error as { errno?: unknown };
  const code = codeOf(error);
  return {
    name: error.name,
    message: error.message,
    ...(code !== undefined && { code }),
    ...(typeof errno === 'number' && { errno }),
  };
}

/** An Error with the name, message, code and errno of one that was thrown in another process. */
export class CodedError extends Error {
  readonly code?: string;
  readonly errno?: number;

  constructor(data: ErrorData) {
    super(data.message);
    this.name = data.name;
    if (data.code !== undefined) this.code = data.code;
    if (data.errno !== undefined) this.errno = data.errno;
  }
}
