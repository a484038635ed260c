/**
 * Whether a path belongs in primary.xml (and so may satisfy a file require without filelists):
 * createrepo_c's rule, unchanged since yum: anything under /etc/, anything with `bin/` in it, and
 * /usr/lib/sendmail.
 */
export function isPrimaryFile(path: string): boolean {
  return path.startsWith("/etc/") || path.includes("bin/") || path === "/usr/lib/sendmail";
}
