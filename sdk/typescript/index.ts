// The package's entry for scripts and agent harnesses: `import { Smol } from 'smol-studio'` (README, "SDK").
export { Smol } from './smol.js';
export type { ConnectOptions, Terminal, TerminalOptions } from './smol.js';
export type { CopyResult } from './copy.js';
export { ApiClient, ApiClientError } from '../../src/api/api-client.js';
// Remote engines (docs/remote.md): the engines file with its pins, and the error of a changed certificate.
export { ClientConfig } from '../../src/api/client-config.js';
export { CertificateChangedError, type PinStore } from '../../src/api/pinned-tls.js';
export type * from '../../src/api/schema.js';
