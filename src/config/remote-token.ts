/**
 * Resolves the GitHub token of a remote: the environment variable its `--token-env` names, else
 * GITHUB_TOKEN. Remotes store only the variable's name (a token in the database would be readable
 * by anyone with a backup), so the value is looked up here, in the one folder that reads the
 * process environment. An empty or unset variable means anonymous access.
 */
export function remoteTokenResolver(
  defaultToken: string | undefined,
  env: Readonly<Record<string, string | undefined>> = process.env,
): (remote: { readonly tokenEnv: string | null }) => string | undefined {
  return (remote) => {
    if (remote.tokenEnv === null) return defaultToken;
    const value = env[remote.tokenEnv];
    return value === undefined || value === "" ? undefined : value;
  };
}
