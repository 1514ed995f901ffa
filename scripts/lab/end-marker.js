// Splits one output channel of the lab into the command's bytes and the end marker the lab's init appends
// (`SMOL-LAB-EXIT-<nonce>=<status>` on stdout, `SMOL-LAB-END-<nonce>` on stderr). Bytes pass through unchanged;
// only a tail that could be the start of the marker is held back until the next chunk decides.

function longestSuffixThatPrefixes(buffer, token) {
  for (let length = Math.min(token.length - 1, buffer.length); length > 0; length--) {
    if (buffer.subarray(buffer.length - length).equals(token.subarray(0, length))) return length;
  }
  return 0;
}

/**
 * @param {string} token  the marker up to its value, e.g. `SMOL-LAB-EXIT-<nonce>=`
 * @param {(chunk: Buffer) => void} onData  the command's bytes
 * @param {(value: string) => void} onEnd  called once with the text between the token and the next newline
 */
export function createEndMarkerSplitter(token, onData, onEnd) {
  const tokenBytes = Buffer.from(token);
  let pending = Buffer.alloc(0);
  let found = false;
  let ended = false;

  return function push(chunk) {
    if (ended) return;
    pending = Buffer.concat([pending, chunk]);
    if (!found) {
      const at = pending.indexOf(tokenBytes);
      if (at < 0) {
        const hold = longestSuffixThatPrefixes(pending, tokenBytes);
        if (pending.length > hold) onData(pending.subarray(0, pending.length - hold));
        pending = pending.subarray(pending.length - hold);
        return;
      }
      if (at > 0) onData(pending.subarray(0, at));
      pending = pending.subarray(at + tokenBytes.length);
      found = true;
    }
    const newline = pending.indexOf(10);
    if (newline < 0) return;
    ended = true;
    onEnd(pending.subarray(0, newline).toString());
  };
}
