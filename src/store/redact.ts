/** A database URL with its password replaced by `***`, for messages and logs. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password !== "") u.password = "***";
    return u.toString();
  } catch {
    // Not a URL: a file path, or something malformed; hide anything between ':' and '@'.
    return url.replace(/\/\/([^:/@]*):[^@]*@/, "//$1:***@");
  }
}
