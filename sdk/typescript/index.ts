// The package's entry for scripts and agent harnesses: `import { Smol } from 'smol-studio'` (README, "SDK").
export { Smol } from './smol.js';
export type { ConnectOptions, Terminal, TerminalOptions } from './smol.js';
export type { CopyResult } from './copy.js';
export { ApiClient, ApiClientError } from '../../src/api/api-client.js';
export type * from '../../src/api/schema.js';
