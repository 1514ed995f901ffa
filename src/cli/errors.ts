// The two ways a command fails: the user asked wrongly (status 2), or the work failed (a chosen status, usually 1).

export class UsageError extends Error {
  constructor(
    readonly command: string,
    message: string,
  ) {
    super(message);
    this.name = 'UsageError';
  }
}

export class CommandError extends Error {
  constructor(
    message: string,
    readonly exitStatus = 1,
  ) {
    super(message);
    this.name = 'CommandError';
  }
}

export const EXIT_USAGE = 2;
