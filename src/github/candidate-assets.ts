import picomatch from "picomatch";
import type { ReleaseSummary } from "./releases.js";

/** A release asset reposync would turn into a package, with the fields that identify it. */
export interface CandidateAsset {
  readonly releaseId: number;
  readonly tag: string;
  readonly prerelease: boolean;
  readonly draft: boolean;
  readonly assetId: number;
  readonly name: string;
  readonly size: number;
  readonly state: string;
  readonly updatedAt: string;
  readonly digest: string | null;
  readonly url: string;
  readonly browserDownloadUrl: string;
}

/** Which assets of a remote become packages. */
export interface AssetPolicy {
  /** Keep prereleases too (default: no). */
  readonly prereleases?: boolean;
  /** Globs on the asset name; none means every `.rpm`. */
  readonly include?: readonly string[];
  /** Globs on the asset name that drop an asset even when included. */
  readonly exclude?: readonly string[];
}

/**
 * The assets that can become packages: published releases only (drafts are visible to tokens
 * with push access, but are not releases yet), prereleases only if the policy says so, assets
 * whose upload has finished, named `*.rpm`, and passing the include/exclude globs (matched
 * against the asset name with picomatch; `dot` on, since names are not paths).
 */
export function selectCandidateAssets(
  releases: readonly ReleaseSummary[],
  policy: AssetPolicy = {},
): CandidateAsset[] {
  const options = { dot: true, nocase: false };
  const included = policy.include?.length ? picomatch([...policy.include], options) : () => true;
  const excluded = policy.exclude?.length ? picomatch([...policy.exclude], options) : () => false;
  const out: CandidateAsset[] = [];
  for (const release of releases) {
    if (release.draft) continue;
    if (release.prerelease && !policy.prereleases) continue;
    for (const asset of release.assets) {
      if (asset.state !== "uploaded") continue;
      if (!asset.name.toLowerCase().endsWith(".rpm")) continue;
      if (!included(asset.name) || excluded(asset.name)) continue;
      out.push({
        releaseId: release.id,
        tag: release.tag,
        prerelease: release.prerelease,
        draft: release.draft,
        assetId: asset.id,
        name: asset.name,
        size: asset.size,
        state: asset.state,
        updatedAt: asset.updatedAt,
        digest: asset.digest,
        url: asset.url,
        browserDownloadUrl: asset.browserDownloadUrl,
      });
    }
  }
  return out;
}

/** The parts of an asset that decide whether its package must be derived again. */
export type StableAsset = Pick<
  CandidateAsset,
  "assetId" | "name" | "size" | "updatedAt" | "digest" | "releaseId"
>;

/** What a listing means for the stored packages. */
export interface AssetDiff<S extends StableAsset, L extends StableAsset> {
  /** Listed, with nothing stored by that id or name. */
  readonly added: L[];
  /** Listed, replacing a stored asset: same id with other content, or same name with a new id. */
  readonly changed: { readonly stored: S; readonly listed: L }[];
  /** Stored, and gone from the listing. */
  readonly removed: S[];
  /** Listed and stored alike (the listed one is returned: its URLs are the current ones). */
  readonly unchanged: L[];
}

/** True when two assets are the same package by every stable field. */
export function sameAsset(a: StableAsset, b: StableAsset): boolean {
  return (
    a.assetId === b.assetId &&
    a.name === b.name &&
    a.size === b.size &&
    a.updatedAt === b.updatedAt &&
    a.digest === b.digest &&
    a.releaseId === b.releaseId
  );
}

/**
 * Compares stored assets with listed ones by stable fields only. A listing whose ETag changed
 * because download counts moved yields only `unchanged`; so does any difference in URLs or
 * release names. Pure: it reads no clock and no network.
 *
 * Matching goes by asset id first, then by name among what is left (a re-uploaded file gets a
 * new id under the same name: one change, not a removal plus an addition).
 */
export function diffAssets<S extends StableAsset, L extends StableAsset>(
  stored: readonly S[],
  listed: readonly L[],
): AssetDiff<S, L> {
  const storedById = new Map(stored.map((s) => [s.assetId, s]));
  const matched = new Set<S>();
  const added: L[] = [];
  const changed: { stored: S; listed: L }[] = [];
  const unchanged: L[] = [];
  const unmatchedListed: L[] = [];

  for (const l of listed) {
    const s = storedById.get(l.assetId);
    if (!s || matched.has(s)) {
      unmatchedListed.push(l);
      continue;
    }
    matched.add(s);
    if (sameAsset(s, l)) unchanged.push(l);
    else changed.push({ stored: s, listed: l });
  }

  const storedByName = new Map<string, S[]>();
  for (const s of stored) {
    if (matched.has(s)) continue;
    const list = storedByName.get(s.name) ?? [];
    list.push(s);
    storedByName.set(s.name, list);
  }
  for (const l of unmatchedListed) {
    const s = storedByName.get(l.name)?.shift();
    if (s) {
      matched.add(s);
      changed.push({ stored: s, listed: l });
    } else {
      added.push(l);
    }
  }

  const removed = stored.filter((s) => !matched.has(s));
  return { added, changed, removed, unchanged };
}
