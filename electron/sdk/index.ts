// The package's entry for scripts and agent harnesses: `import { Smol } from 'smol-studio'` (README, "SDK").
export { Smol } from './smol.js';
export type { ConnectOptions } from './smol.js';
export { ApiClient, ApiClientError } from '../api/api-client.js';
export type * from '../api/schema.js';
