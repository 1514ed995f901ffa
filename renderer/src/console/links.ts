// Links in guest output are text a guest chose: one opens only when it is an http(s) URL with a host, and only
// after the user saw the whole address and agreed.

/** The URL to open, or null when the text is not a plain http(s) address. */
export function safeLink(text: string): URL | null {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return null;
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return null;
  if (!url.hostname || url.username || url.password) return null;
  // No control or invisible characters that could make the shown address differ from the opened one.
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f-\u009f\u200b-\u200f\u202a-\u202e\u2066-\u2069]/.test(text)) return null;
  return url;
}

export function openLinkAfterAsking(text: string, ask: (message: string) => boolean = window.confirm): boolean {
  const url = safeLink(text);
  if (!url) return false;
  if (!ask(`Open this address from the guest's console in a new tab?\n\n${url.href}`)) return false;
  window.open(url.href, '_blank', 'noopener,noreferrer');
  return true;
}
